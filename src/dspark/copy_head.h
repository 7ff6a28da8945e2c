// The DSpark drafter's copy head: prompt lookup inside the sequential stage.
//
// Slot by slot (like the Markov head, it sees the tokens drafted before slot k), the copy head
// looks up the latest earlier occurrence of the last n tokens of committed + pending + drafted
// (n = max_ngram down to min_ngram) and proposes the token that followed it. A slot with a
// proposal takes it (the drafter's backbone is not needed for it); a slot without one falls back
// to the drafter's own prediction. Greedy: q is one-hot at temperature > 0, so verification stays
// lossless. Its acceptance is estimated online per match length n (Beta prior, counted from what
// the target accepted), which plays the role of a calibrated confidence c_k for the cost-aware
// draft length and the threshold. The drafter's own slots are counted too (n = 0), so the
// cost-aware schedule can decide whether a backbone pass is worth running before it runs.
// Thread safety: one CopyHead per request state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace dspark::net {

struct CopyHeadConfig {
  int max_ngram = 3;
  int min_ngram = 1;
  // Prior of a slot kind's conditional acceptance: prior_acceptance[n] (n = 0: the drafter's own
  // slots, n >= 1: copies with match length n), worth prior_weight evaluations. Calibrated offline
  // (scripts/calibrate_copy_head.py on regen shards) and stored in the drafter's config; empty =
  // uninformed (0.5, worth 2 evaluations) plus exploration.
  std::vector<double> prior_acceptance;
  // The same for requests sampled at temperature > 0 (acceptance there is the chance that the target's
  // sampled token equals the draft; calibrated on sampled sequences). Empty = prior_acceptance.
  std::vector<double> prior_acceptance_sampled;
  double prior_weight = 20.0;
  // Exploration (uninformed prior only): until a slot kind has been evaluated this many times, the
  // cost-aware schedule treats it as certain, so a pessimistic start cannot keep it from ever being
  // drafted (and its estimate from ever being learned).
  int explore_evaluations = 8;
  // Retrieval slot kinds (speculative/drafter_dspark.h, DSparkOptions::index): a proposal from a suffix index
  // of the target's own answers, bucketed by the share of the matched context's occurrences that
  // continue with it (index_share_edges: bucket b holds shares in [edge[b], edge[b + 1]), the last one
  // up to 1). Kind n = max_ngram + 1 + b; its prior is index_prior[b] (worth prior_weight evaluations)
  // for greedy and sampled requests alike. Empty edges: no retrieval kinds.
  std::vector<double> index_share_edges;
  std::vector<double> index_prior;
  // Answer-cache kinds (speculative/answer_cache.h): a continuation of answers already served, bucketed by
  // the length of the context's agreement with the pool (bucket i: lengths from cache_match_edges[i]
  // up to the next edge); kind n = max_ngram + 1 + index buckets + i, prior cache_prior[i]. Empty: none.
  std::vector<int> cache_match_edges;
  std::vector<double> cache_prior;
};

struct CopyProposal {
  int32_t token = -1;  // -1: no match
  int n = 0;           // match length used
};

// The latest earlier occurrence of the last n tokens of seq (n = max_ngram down to min_ngram) and
// the token that followed it; {-1, 0} without a match. The copy head's proposal rule.
CopyProposal lookup_next(std::span<const int32_t> seq, int max_ngram, int min_ngram);

// Block inputs for a drafter with lookup input (DSparkConfig::lookup_max_ngram): out[0] = pending,
// out[k] (k = 1..n-1) = lookup_next over history + pending + out[1..k-1], or `mask` from the first
// slot without a match on. out has n entries.
void lookup_chain(std::span<const int32_t> history, int32_t pending, int n, int max_ngram, int min_ngram, int32_t mask,
                  std::vector<int32_t>* out);

class CopyHead {
 public:
  explicit CopyHead(CopyHeadConfig cfg = {});

  // Slot kinds: 0 = the drafter's own, 1..max_ngram = copies by match length, then the retrieval
  // buckets (CopyHeadConfig::index_share_edges), then the answer-cache match lengths (cache_prior).
  int kinds() const { return (int)tries_.size(); }
  int max_ngram() const { return cfg_.max_ngram; }
  bool has_index_kinds() const { return !cfg_.index_share_edges.empty(); }
  // The retrieval kind of a proposal whose share (support / context occurrences) is `share`; -1 below
  // the first edge.
  int index_kind(double share) const;
  bool has_cache_kinds() const { return !cfg_.cache_match_edges.empty(); }
  // The answer-cache kind of a match of `len` context tokens; -1 below the first edge or without kinds.
  int cache_kind(int len) const;
  bool is_cache_kind(int n) const { return has_cache_kinds() && n >= cfg_.max_ngram + 1 + (int)cfg_.index_share_edges.size(); }
  // history + pending + the drafts pushed so far: the context a retrieval source continues.
  std::span<const int32_t> context() const { return seq_; }

  // A new request: the committed history; the acceptance counts restart from the priors.
  void begin(std::span<const int32_t> prompt);
  // Which priors the request's estimates start from: the sampled set (temperature > 0) or the
  // greedy one. Call before its first draft (a request keeps one temperature).
  void use_sampled_priors(bool sampled) { sampled_ = sampled; }
  // Start of a draft: the pending (anchor) token; proposals are then made over
  // history + pending + push()ed drafts.
  void start_draft(int32_t pending);
  CopyProposal propose() const;
  // Appends the token chosen for the slot; src_n = match length when it came from the copy head,
  // 0 when it came from the drafter. Diagnostics (stats()["shadow"]): copy_n = the match length the
  // copy head had for this slot (0: none), alt = the token the other proposer would have put there
  // (the copy's proposal under a drafter slot, the network's argmax under a copied one; -1: unknown).
  void push(int32_t token, int src_n, int copy_n = -1, int32_t alt = -1);
  // Estimated conditional acceptance of a copied slot of kind n (match length, or a retrieval kind);
  // n = 0: of a slot the drafter filled (what a backbone pass is expected to earn before it is run).
  double confidence(int n) const;
  // The confidence the cost-aware schedule uses: 1 while slot kind n is still being explored.
  double schedule_confidence(int n) const;
  // The round's outcome: committed = [pending, accepted drafts...] at position pos. Updates the
  // acceptance counts of the copied slots that the target evaluated, then appends to the history.
  // Returns false if pos does not continue the history.
  bool commit(std::span<const int32_t> committed, int64_t pos);

  int64_t history_len() const { return committed_len_; }
  // slots_*: counts over this state's life; drafter_slots_* and by_match_length: the current request
  // (the estimates restart from the priors at begin()).
  nlohmann::json stats() const;

 private:
  CopyHeadConfig cfg_;
  std::vector<int32_t> seq_;        // committed history, then (during a draft) pending + drafts
  int64_t committed_len_ = 0;
  struct Slot {
    int32_t token;
    int src_n;   // match length of a copied slot, 0: the drafter's
    int copy_n;  // the copy head's match length at this slot (0: none)
    int32_t alt; // the other proposer's token, -1: unknown
  };
  // Shadow counts, over this state's life, per [who drafted: 0 copy, 1 drafter][copy_n]: slots the
  // target evaluated, of them accepted, with an alternative token, and alternatives that were right.
  struct ShadowCell {
    uint64_t evaluated = 0, accepted = 0, alt_seen = 0, alt_right = 0;
  };
  void score(const Slot& s, int32_t target);
  std::vector<Slot> drafted_;       // the current draft's slots
  bool resolve_pending_ = false;    // resolve_ awaits the target's token there (the next draft's pending)
  Slot resolve_{};                  // the last draft's first rejected slot
  std::vector<ShadowCell> shadow_;  // [2 * kinds()]
  std::vector<double> tries_, accepts_;  // per kind [kinds()]; n = 0: the drafter's slots
  std::vector<double> prior_tries_;      // pseudo-counts per n
  std::vector<double> prior_accepts_[2];  // per n: [0] greedy requests, [1] sampled ones
  bool sampled_ = false;                  // which prior_accepts_ the estimates use
  uint64_t slots_proposed_ = 0, slots_accepted_ = 0, drafter_slots_ = 0;
};

}  // namespace dspark::net
