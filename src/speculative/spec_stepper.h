// One generation driven a step at a time: a prefill chunk or one speculative round per step().
// A server interleaves sequences with it, cancels between steps, and keeps a sequence's KV (and
// the target tap rows a drafter needs) across requests to reuse their common token prefix.
// generate_spec() runs it to the end. Without a drafter every round verifies [pending] alone:
// plain serial decoding (same tokens as generate::generate at temperature 0; the kernels are
// batch-invariant, so neither chunking nor a reused prefix changes a single logit).
//
// Invariant after every step: history.tokens == the tokens at KV positions [0, kv length), and
// history.taps[i] holds their rows for tap point history.tap_ids[i].
// Thread safety: one stepper per session; a session and its history are used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "generate/generate.h"
#include "generate/stop.h"
#include "speculative/drafter.h"
#include "speculative/spec_decode.h"
#include "speculative/token_tree.h"
#include "tokenizer/utf8.h"

namespace dspark::speculative {

// What a session's KV holds, kept across generations.
struct SeqHistory {
  std::vector<int32_t> tokens;            // tokens at positions [0, kv length)
  std::vector<int> tap_ids;               // tap points recorded for every position
  std::vector<std::vector<float>> taps;   // [tap_ids.size()] of [tokens.size(), n_embd] f32
  void clear() {
    tokens.clear();
    for (auto& t : taps) t.clear();
  }
  size_t tap_bytes() const {
    size_t b = 0;
    for (const auto& t : taps) b += t.size() * sizeof(float);
    return b;
  }
};

struct StepperOptions {
  int64_t prefill_chunk = 0;   // prompt tokens per prefill step; 0 = the whole prompt in one step
  bool reuse_prefix = true;    // keep the KV of the longest prefix shared with history
  // A governor kept across generations (a server slot's; Governor::begin_request), else the
  // stepper's own, fresh one. Must outlive the stepper.
  Governor* governor = nullptr;
};

class SpecStepper {
 public:
  // Validates the parameters, keeps the reusable prefix of `history` (shared with prompt[0, L-1)
  // and restorable by the KV ring) and drops the rest. `drafter` may be null (serial decoding);
  // its required taps must be exactly history->tap_ids when it has any. `history` may be null
  // (nothing reused or kept). The model, session, tokenizer, drafter and history must outlive
  // the stepper. Errors: empty prompt, bad sampler, max_tokens < 1, prompt + max_tokens > n_ctx.
  static Result<std::unique_ptr<SpecStepper>> create(const model::Model& model, model::Session& session,
                                                     const tokenizer::Tokenizer& tok,
                                                     std::span<const int32_t> prompt, const SpecParams& params,
                                                     Drafter* drafter, SeqHistory* history,
                                                     generate::TextCallback on_text, const StepperOptions& opt = {});

  // One prefill chunk, or one round (draft, one target forward, accept, roll back, commit).
  // On error the session and history are cleared (the sequence is abandoned).
  Status step();
  bool done() const { return done_; }
  bool prefilling() const { return !begun_; }

  // The same round split in two, so a caller can verify several sequences in one
  // Model::forward_multi: plan_round() drafts and returns the verify window, the caller runs
  // the target over it on this stepper's session with round_options(), finish_round() accepts,
  // rolls back and commits. Only while in_round(). Errors abandon the sequence as step() does.
  bool in_round() const { return begun_ && !done_; }
  // `may_draft` false: a plain round whatever the governor would choose (the server's batch gate).
  Result<std::span<const int32_t>> plan_round(bool may_draft = true);
  model::ForwardOptions round_options() const { return {model::LogitsMode::kAll, hist_->tap_ids, argmax_only()}; }
  // T 0 reads only each row's argmax (accept_greedy): the exact greedy head may serve it.
  bool argmax_only() const { return params_.gen.sampler.temperature <= 0.0f && !params_.gen.full_lm_head; }
  // `verify_ms`: what this sequence's window cost in the forward (a batched forward is charged to
  // its sequences by serve/batch_cost.h), which the governor weighs against its tokens.
  Status finish_round(double verify_ms);

  int64_t reused_tokens() const { return reused_; }   // prompt tokens whose KV was kept
  const SpecResult& result() const { return res_; }
  SpecResult take_result() { return std::move(res_); }

 private:
  SpecStepper(const model::Model& model, model::Session& session, const tokenizer::Tokenizer& tok,
              std::span<const int32_t> prompt, const SpecParams& params, Drafter* drafter, SeqHistory* history,
              generate::TextCallback on_text, const StepperOptions& opt);
  Status prefill_step();
  Status round();
  // tree_ok: this round's forward can verify a token tree (round(); not a batched forward).
  Status draft_phase(bool may_draft = true, bool tree_ok = false);
  Status accept_phase();
  Status accept_tree_phase();  // accept_phase for a token tree (greedy)
  Status abandon(Status st);  // clears the session and history on error
  bool emit(int32_t id);        // true when generation must stop
  void finish_text();
  void record(std::span<const int32_t> tokens);  // appends tokens + the last forward's first tap rows to history
  TapRows history_taps(int64_t row0, int64_t n) const;

  const model::Model& model_;
  model::Session& session_;
  const tokenizer::Tokenizer& tok_;
  std::vector<int32_t> prompt_;
  SpecParams params_;
  Drafter* drafter_;
  SeqHistory own_history_;
  SeqHistory* hist_;
  generate::TextCallback on_text_;
  StepperOptions opt_;
  sample::Sampler sampler_;
  tokenizer::StreamDecoder decoder_;
  generate::StopMatcher stops_;
  std::vector<int> fwd_taps_;
  SpecResult res_;
  int64_t reused_ = 0;
  int64_t n_pre_ = 0;        // prompt tokens prefilled before the first round (L - 1)
  int32_t pending_ = 0;
  int64_t pos_ = 0;
  bool begun_ = false;
  bool done_ = false;
  std::chrono::steady_clock::time_point t_decode_{};
  DraftResult draft_;
  std::vector<int32_t> window_, argmax_rows_;
  std::vector<int32_t> tree_parent_;     // the window's parents when the round verifies a tree, else empty
  double tree_expected_ = 0;             // tokens the round's branches were expected to add
  TreeCalibration tree_calib_;           // what branches delivered against that (speculative/token_tree.h)
  Governor own_gov_;
  Governor* gov_ = &own_gov_;            // chooses each round's gamma (draft length) (speculative/governor.h)
  Governor::Decision decision_;          // of the round in flight
  double round_draft_ms_ = 0, round_verify_ms_ = 0;
};

// Length of the longest common prefix of a and b.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

}  // namespace dspark::speculative
