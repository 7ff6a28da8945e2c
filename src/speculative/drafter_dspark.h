// DSpark drafter: the DeepSpec `Gemma4DSparkModel` (docs/DSPARK-ENGINE.md, 'A round') behind the Drafter interface.
//
// Per request: begin() projects the prompt's tap rows into per-layer context K/V; draft() runs
// the block [anchor, MASK x (γ-1)] at positions P..P+γ-1 (P = committed length), then the
// sequential Markov pass slot by slot (greedy, or sampled from softmax(s_k / T) at T > 0 with q =
// that Markov-corrected distribution), with the confidence c_k computed before slot k is drawn so
// the threshold truncation (first c_k < threshold) stops the pass early; commit() appends the
// anchor + accepted rows (never rejected ones; nothing is ever recomputed).
// Greedy slots use the exact Markov top-K fast path (dspark_markov.h) unless disabled.
// Thread safety: one DSparkDrafter per request; the DSparkModel (weights) may be shared.
// Lifetime: the target model (its token tables may be aliased) must outlive the drafter.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "dspark/copy_head.h"
#include "speculative/drafter.h"
#include "speculative/suffix_index.h"
#include "dspark/dspark_markov.h"
#include "dspark/dspark_model.h"

namespace dspark::speculative {

// The DSpark network lives in src/dspark (namespace net); this adapter drives it.
using net::CopyHead;
using net::CopyHeadConfig;
using net::CopyProposal;
using net::DSparkConfig;
using net::DSparkContext;
using net::DSparkModel;
using net::DSparkScratch;
using net::DSparkWeights;
using net::lookup_chain;
using net::MarkovFastPathStats;
using net::MarkovHead;
using net::target_shape;
using net::TargetShape;
using net::TargetTables;

struct DSparkOptions {
  float threshold = 0.0f;         // in [0, 1]; > 0: truncate at the first slot with c_k < threshold
  int gamma = 0;                  // draft length cap, 1..block_size; 0 = block_size
  bool markov_fast_path = true;   // exact top-K Markov argmax at temperature 0
  int fast_path_top_k = 64;       // K candidates of the fast path
  bool report_confidence = false; // compute c_k (DraftResult::confidence) even when threshold == 0
  int64_t ctx_reserve = 4096;     // context rows reserved at begin() (more grow the buffers)
  // Cost-aware draft length (paper Algorithm 1, single request; docs/DSPARK-ENGINE.md 'Copy head and
  // the cost-aware draft length'): with calibrated c_k = σ(z_k / T_k) (STS temperatures from the checkpoint) and
  // prefix survival a_k = Π c_i,
  // slot k is drafted only while (1 + Σ a) / (draft_ms + verify_ms[1 + ℓ]) still improves; the
  // scan stops at the first non-improvement (non-anticipating: c_k uses tokens before slot k).
  // verify_ms[n] = one target forward over n tokens (n = 1 .. γ + 1; index 0 unused), measured at
  // start-up and refined online from observe_verify() (moving average); draft_ms is measured
  // online (running mean of this drafter's backbone time).
  bool schedule = false;
  std::vector<double> verify_ms;
  // Backbone gate (with the schedule): a round whose first slot has no copy proposal runs the
  // backbone only while recent backbone rounds delivered more tokens per ms than plain decoding
  // (1 / verify_ms[1]), judged by exponential moving averages of tokens and costs (the schedule's
  // own cost tables, so sampled requests stay deterministic). While it is closed, a probe round
  // runs the backbone after 1, 2, 4 .. kGateMaxBackoff skipped rounds to follow the text.
  bool backbone_gate = false;
  // Backbone cost used by sampled (temperature > 0) requests, which decide from constants only, so
  // a request with a seed drafts (and samples) the same way every time: the start-up verify table
  // and this value (calibrate_draft_ms()). 0 = the online mean (decisions then follow timing).
  double draft_ms = 0;
  // Greedy requests decide from the same constants (start-up verify table, calibrated draft_ms)
  // instead of the online estimates, so two arms of an A/B differ by their algorithm, not by the
  // timings each happened to observe.
  bool static_costs = false;
  // Copy head (dspark/copy_head.h): slots with a prompt-lookup match take the copied token; the
  // backbone runs only when a slot has none. Its online acceptance estimate is the slot's c_k.
  bool copy = false;
  bool copy_only = false;  // with copy: never run the backbone (a slot without a match ends the draft)
  // With copy: a match always takes its slot (the rule before 2026-12-01). Otherwise a copy whose
  // estimated acceptance (for its match length; CopyHead::schedule_confidence, so kinds still being
  // explored count as 1) is below the drafter's own slots' estimate yields the slot to the
  // backbone, when a backbone pass pays (cost-aware schedule) or has already run.
  bool copy_first = false;
  CopyHeadConfig copy_cfg;
  int copy_bits = 0;  // load: DSparkLoadOptions::copy_bits (8 or 4: integer copies; 0: as given)
  // Retrieval, the copy head's third source (docs/SPECULATION.md, "Retrieval drafting"): with the
  // copy head on, a slot whose prompt-lookup match is shorter than index_below tokens asks this
  // suffix index of the target's own answers for the most frequent continuation of the context's
  // longest matching suffix (index_query); a proposal whose share of the matched occurrences reaches
  // the first of copy_cfg.index_share_edges is a copied slot of that share's retrieval kind, with its
  // own online acceptance estimate. nullptr: no retrieval.
  std::shared_ptr<const SuffixIndex> index;
  SuffixQueryConfig index_query;
  int index_below = 2;
};

class DSparkDrafter : public Drafter {
 public:
  // Loads `dir` against the target (pairing check; Gemma 3's tied token_embd serves as the table
  // for drafters without embed_tokens / lm_head).
  static Result<std::unique_ptr<DSparkDrafter>> load(const std::string& dir, const model::Model& target,
                                                     const DSparkOptions& opt, ThreadPool* pool);
  // Same against a target described by shape and (optional) tables; `isa`: the kernels' instruction
  // set (the target backend's; unset: the best the CPU has).
  static Result<std::unique_ptr<DSparkDrafter>> load(const std::string& dir, const TargetShape& target,
                                                     const TargetTables* tables, const DSparkOptions& opt,
                                                     ThreadPool* pool, std::optional<kernels::Isa> isa = {});
  // A new request state over already loaded (shared) weights.
  static Result<std::unique_ptr<DSparkDrafter>> create(std::shared_ptr<const DSparkModel> model,
                                                       const DSparkOptions& opt, ThreadPool* pool);

  std::string kind() const override { return "dspark"; }
  std::vector<int> required_taps() const override { return model_->config().target_layer_ids; }
  int max_gamma() const override { return (int)model_->config().block_size; }
  Status begin(std::span<const int32_t> prompt, const TapRows& taps) override;
  Status draft(const DraftRequest& req, DraftResult* out) override;
  Status commit(std::span<const int32_t> committed, int64_t pos, const TapRows& taps) override;
  // Refines the verify-cost table of the cost-aware schedule with what rounds really cost
  // (greedy requests; sampled ones keep the start-up table, see DSparkOptions::draft_ms).
  void observe_verify(int n_tokens, double ms) override;
  // With the copy head on (and answer-cache kinds in its config): the cache is consulted before the
  // suffix index where prompt lookup's match is short.
  void use_answer_cache(const AnswerCache* cache) override { answers_ = cache; }
  // With the copy head on (and not copy-first): copies whose kind is estimated at kSureAcceptance.
  bool sure_drafts() const override { return opt_.copy && !opt_.copy_first; }
  // The same network and options (calibrated draft_ms included), a new request state.
  std::unique_ptr<Drafter> fork() const override;
  // Times the backbone + LM head over a synthetic 128-row context (median of 5 after a warm-up),
  // stores it as options().draft_ms and as the online mean's start, and returns it. Call before
  // begin(); it leaves no request state behind.
  double calibrate_draft_ms();

  const DSparkModel& model() const { return *model_; }
  const std::shared_ptr<const DSparkModel>& shared_model() const { return model_; }
  const DSparkOptions& options() const { return opt_; }
  int gamma() const { return gamma_; }
  const MarkovFastPathStats& fast_path_stats() const { return markov_.stats(); }
  nlohmann::json stats() const override;
  void reset_fast_path_stats() { markov_.reset_stats(); }

  // Inspection of the last draft() (tests, debugging). Rows are slots 0..last_slots()-1. With the
  // copy head on, rows of copied slots are only valid if the backbone ran in that draft
  // (last_backbone_ran()), and last_conf_logits() holds the drafter's slots only.
  int last_slots() const { return last_slots_; }                              // slots drawn
  const float* last_hidden() const { return hidden_.data(); }                  // [γ, H] post-final-norm
  const float* last_base_logits() const { return base_.data(); }               // [n, V_d] softcapped U
  // Markov-corrected s_k [V_d]; nullptr when the fast path skipped the full row.
  const float* last_logits(int slot) const;
  const std::vector<float>& last_conf_logits() const { return conf_logits_; }  // z_k of computed slots
  bool last_backbone_ran() const { return backbone_ran_; }
  // Committed rows (the context: projected rows + rows still waiting to be projected).
  int64_t context_len() const { return ctx_.len + pending_rows_; }
  // The projected context K/V [len, nKV, hd] (projects the waiting rows first).
  const std::vector<float>& context_k(int64_t layer) {
    (void)flush_context();
    return ctx_.k[(size_t)layer];
  }
  const std::vector<float>& context_v(int64_t layer) {
    (void)flush_context();
    return ctx_.v[(size_t)layer];
  }

 private:
  DSparkDrafter(std::shared_ptr<const DSparkModel> model, const DSparkOptions& opt, ThreadPool* pool);
  float confidence_logit(int slot, const float* w1_prev) const;
  int32_t shadow_argmax(int slot);
  // The copy head's proposal for the next slot, or the answer cache's / the index's where lookup's
  // match is short.
  CopyProposal propose_copy() const;
  Status sure_draft(int32_t pending, int n, DraftResult* out);
  void run_backbone(int32_t anchor, int n_rows);
  bool gate_open(double serial_rate);
  // Committed tap rows wait in pending_taps_ until a draft needs the context: rounds that draft
  // nothing (the governor's plain steps) cost no projection, and a run of them is projected in
  // one batched pass.
  Status flush_context();
  Status buffer_taps(const TapRows& taps);  // rows projected at the next flush_context()

  std::shared_ptr<const DSparkModel> model_;
  DSparkOptions opt_;
  int gamma_ = 0;
  DSparkContext ctx_;
  std::vector<std::vector<float>> pending_taps_;  // [n_taps] of [pending_rows_, n_embd] f32
  int64_t pending_rows_ = 0;
  DSparkScratch s_;
  MarkovHead markov_;
  std::vector<int32_t> history_;    // committed tokens (lookup input only)
  std::vector<int32_t> inputs_;     // [γ] block inputs of the last backbone pass
  std::vector<float> hidden_;       // [γ, H]
  std::vector<float> base_;         // [γ, V_d]
  std::vector<float> scores_;       // [γ, V_d] corrected rows
  std::vector<char> scores_valid_;  // [γ]
  sample::RowDist draft_row_;        // temperature > 0: the sampled slot's distribution over the draft vocab
  std::vector<sample::TokenProb> draft_list_;
  std::vector<float> conf_logits_;  // [γ]
  int last_slots_ = 0;
  bool backbone_ran_ = false;
  CopyHead copy_;
  ThreadPool* pool_ = nullptr;
  const AnswerCache* answers_ = nullptr;
  mutable std::vector<int32_t> cache_out_;  // propose_copy()'s scratch
  bool cache_ok_ = true;                    // this draft may use answers_ (greedy)
  int64_t backbone_rounds_ = 0, rounds_ = 0;
  std::vector<double> verify_ms_;   // the schedule's cost table: opt_.verify_ms, refined online
  double draft_ms_ = 0;
  double last_backbone_ms_ = 0;             // running mean of the backbone + LM head time per round
  // Backbone gate (DSparkOptions::backbone_gate): EMAs over rounds that ran the backbone from slot 0.
  struct Gate {
    double tokens = 0, ms = 0;   // EMA of tokens committed, of cost (backbone + verify) in ms
    int64_t n = 0;               // gated rounds observed
    int skipped = 0, backoff = 1;
    bool pending = false;        // the last draft ran the backbone from slot 0: commit() scores it
    double pending_ms = 0;       // that round's cost from the tables
  } gate_;                       // reset by begin()
  int64_t gate_skips_ = 0, gate_probes_ = 0, gate_rounds_ = 0;  // over all requests, like rounds_
  // Network-slot calibration (stats()): the calibrated c_k of each slot of the last draft (-1: a
  // copied slot, or no c_k computed), and over all requests' evaluated network slots the sums of
  // c_k and of acceptances.
  std::vector<double> slot_conf_;
  double all_predicted_ = 0, all_accepted_ = 0;
  int64_t all_evaluated_ = 0;
};

}  // namespace dspark::speculative
