// The drafter interface shared by every draft source (n-gram lookup, a second GGUF model, DSpark).
//
// Round protocol (the loop: spec_decode.h): the target has committed positions [0, P); `pending` is the token
// at position P, not yet in the target KV. The loop calls draft(pending, ...) to get d <= max_n
// proposals for positions P+1..P+d, runs ONE target forward over [pending, drafts...] (with the
// taps the drafter asked for), accepts k of the drafts, and calls commit(): positions P..P+k are
// now committed (pending + k accepted drafts), with their target tap rows.
// Thread safety: one drafter state per request; not shared across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "model/taps.h"
#include "sample/sampler.h"
#include "speculative/verify.h"

namespace dspark::speculative {

class AnswerCache;  // speculative/answer_cache.h

// Target hidden-state rows for a run of positions: taps[i] for tap point required_taps()[i].
using TapRows = model::TapRows;

struct DraftRequest {
  int32_t pending = 0;         // token at position pos (the anchor)
  int64_t pos = 0;             // its position
  int max_n = 0;               // propose at most this many tokens
  sample::SamplerConfig sampler;  // the request's sampling; temperature > 0: sample drafts and report q
  Rng* rng = nullptr;          // for sampled drafts
  // Only tokens the drafter is sure of (Drafter::sure_drafts); may return none. Asked of drafters
  // whose sure_drafts() is true only.
  bool sure_only = false;
  // The caller can verify a token tree this round (a single sequence's greedy round; not a batched
  // forward): a drafter configured for trees may then add branches (DraftResult::parent).
  bool tree_ok = false;
  // With sure_only: the round's decided cap. A sure draft of no more tokens is not taken, so the drafter
  // may return none (and should then leave no trace of it: the round drafts as decided next).
  int sure_min = 0;
};

struct DraftResult {
  std::vector<int32_t> tokens;             // d <= max_n proposals for positions pos+1..pos+d
  // For temperature > 0 only: q[i] = the distribution tokens[i] was drawn from, as sparse
  // (id, prob) pairs that sum to 1 (greedy drafters give one pair with p = 1).
  std::vector<SparseDist> q;
  std::vector<float> confidence;           // optional per-slot confidence (DSpark; a tree's estimates, below)
  // A token tree (only when DraftRequest::tree_ok): parent[i] is the index in `tokens` of the token
  // tokens[i] follows, -1 = the pending token; parents come first. The first branch is the chain
  // tokens[0..chain) (parent i - 1), the others follow it. `confidence` then holds each token's
  // estimated probability that its whole branch up to it is taken (the caller prunes branches that
  // do not pay at its verify costs). Empty: a chain.
  std::vector<int32_t> parent;
  int chain = 0;                           // with parent: the first branch's length
  int draft_class = -1;                    // the draft's class (Drafter::class_priors), -1: none
  void clear() {
    tokens.clear();
    q.clear();
    confidence.clear();
    parent.clear();
    chain = 0;
    draft_class = -1;
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string kind() const = 0;
  // The most tokens one draft() can propose (a request asking for more is clamped to this).
  virtual int max_gamma() const { return kMaxGammaDefault; }
  static constexpr int kMaxGammaDefault = 16;
  // Tap points of the target this drafter needs (empty: none; the verify pays nothing).
  virtual std::vector<int> required_taps() const { return {}; }
  // A new request: prompt tokens [0, P) are committed in the target (P = prompt.size()); `taps`
  // holds their tap rows when required_taps() is non-empty.
  virtual Status begin(std::span<const int32_t> prompt, const TapRows& taps) = 0;
  virtual Status draft(const DraftRequest& req, DraftResult* out) = 0;
  // Positions [pos, pos + committed.size()) are committed: committed[0] is the old pending token,
  // followed by the accepted drafts. `taps` has one row per committed token.
  virtual Status commit(std::span<const int32_t> committed, int64_t pos, const TapRows& taps) = 0;
  // The target forward over n_tokens (pending + drafts) that verified the last draft took `ms`
  // (single-sequence rounds only; a batched forward of several requests is not reported).
  virtual void observe_verify(int n_tokens, double ms) {}
  // A pool of answers already served (serve: shared by every slot, owned by the scheduler, used on
  // its thread) that weightless and copy-head drafts may continue where the request's own prompt
  // lookup finds no match; nullptr detaches it. Drafters that cannot use it ignore it.
  virtual void use_answer_cache(const AnswerCache* cache) { (void)cache; }
  // A fresh state for another request or server slot over the same weights, tables and options (no
  // loading; nothing of this state's request or answer cache is carried). Whatever the weights live
  // in must outlive the fork (runtime::MountedDrafter owns it).
  virtual std::unique_ptr<Drafter> fork() const = 0;
  // Sure drafts: asked with DraftRequest::sure_only in a round the governor (or the server's batch
  // gate) made plain, the drafter proposes only tokens that cost no network pass and that it
  // estimates the target takes with probability >= kSureAcceptance each (copies of a long match in
  // the answers already served; for draft-kind suffix also in the request's own text), so that such
  // text is not decoded token by token.
  // Greedy requests only. Drafters without such estimates return false and are never asked.
  virtual bool sure_drafts() const { return false; }
  static constexpr double kSureAcceptance = 0.75;
  // A sure draft may run past gamma (copies need no network pass): at most this many tokens
  // (SpecParams::sure_gamma, which a request's explicit num_draft_tokens lowers to it).
  static constexpr int kMaxSureGamma = 16;
  // A token tree's tokens at most (chain and branches; DraftResult::parent).
  static constexpr int kMaxTreeTokens = 16;
  // Draft classes: a drafter that can tell its drafts apart by how likely the target is to take
  // them (a lookup's match length, an index draft's share) puts each draft in one of
  // class_priors().size() classes (DraftResult::draft_class), and the governor learns each class's
  // acceptance on its own (speculative/governor.h, "By class"). class_priors()[c]: a class-c
  // token's acceptance, given the draft's tokens before it were accepted, before any is seen.
  // Empty: no classes (one estimate for every draft).
  virtual std::vector<double> class_priors() const { return {}; }
  // Drafter-specific counters for the request's telemetry (empty object if none).
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
};

}  // namespace dspark::speculative
