// The DSpark sequential stage's Markov heads (docs/DSPARK-CHECKPOINT.md §4) and
// the exact top-K fast path for the greedy argmax.
//
// Every head type adds bias_k = W2 · u_k to the base logits U_k, with u_k in R^r:
//   vanilla  u = W1[prev]
//   gated    u = σ(G·[h_k ; W1[prev]] + b_G) ⊙ W1[prev]
//   rnn      z = [s_{k-1} ; W1[prev] ; h_k], y = J·z + b_J (rows [gate; candidate; output]),
//            s_k = σ(y_g)⊙s_{k-1} + (1-σ(y_g))⊙tanh(y_c), u = tanh(y_o); s_0 = 0 per block.
// The full product costs V_d·r multiply-adds per slot (67 M for V = 262144, r = 256).
//
// Fast path (greedy only; all three head types, since each bias is W2·u): with the upper bound
//   UB(v) = U(v) + ||u|| · ||W2[v]||  >=  U(v) + bias(v)          (Cauchy-Schwarz, per row)
// take the K tokens with the largest UB as candidates, compute their bias exactly (the same kernel
// over the selected rows gives the same per-row values as the full product: the matmul kernels,
// dense and quantized, accumulate each row independently) and pick the best candidate b*. Every other token v has
// score(v) <= UB(v) <= UB_(K+1), so if score(b*) > UB_(K+1) (+ a rounding slack) b* is the exact
// argmax. Otherwise retry once with kEscalate·K candidates, then fall back to the full product.
// (max_v ||W2[v]|| as one global bound is weaker; the per-row norms cost one pass over V_d.)
// At temperature > 0 the whole distribution is needed (q must be exact): always the full product.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "dspark/dspark_model.h"

namespace dspark::net {

struct MarkovFastPathStats {
  uint64_t slots = 0;        // greedy slots that needed a Markov argmax
  uint64_t hits = 0;         // the bound held: argmax from K candidate rows only
  uint64_t fallbacks = 0;    // the bound failed: full product computed
  uint64_t macs_full = 0;    // multiply-adds the full product would have cost (slots * V_d * r)
  uint64_t macs_done = 0;    // multiply-adds actually spent on bias rows
  uint64_t macs_saved() const { return macs_full > macs_done ? macs_full - macs_done : 0; }
  double hit_rate() const { return slots ? (double)hits / (double)slots : 0.0; }
};

// Per-drafter-state Markov head: scratch sized at construction, no allocation afterwards.
class MarkovHead {
 public:
  MarkovHead(const DSparkModel& model, int top_k);

  bool enabled() const { return r_ > 0; }
  // Start of a block: the RNN state s_0 = 0.
  void reset();
  // Slot k with previous token `prev` (target id) and backbone row h_k [H]: computes W1[prev] and
  // u_k (advancing the RNN state).
  void prepare(int32_t prev, const float* h_k, kernels::MatmulContext& mm);
  const float* w1_row() const { return e_.data(); }  // W1[prev] [r], valid after prepare()
  // bias = W2 · u_k  [V_d]
  void full_bias(kernels::MatmulContext& mm, float* bias);
  // Greedy argmax of U + bias. `scores` [V_d] receives U + bias when the full product ran; with the
  // fast path it is left untouched and *full_row = false.
  int64_t argmax(kernels::MatmulContext& mm, const float* u_row, bool fast, float* scores, bool* full_row);

  const MarkovFastPathStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  void restore_stats(const MarkovFastPathStats& s) { stats_ = s; }

 private:
  const DSparkModel& m_;
  int64_t r_ = 0, vd_ = 0, H_ = 0;
  static constexpr int kEscalate = 16;            // second try with 16·K candidates
  static constexpr int kMaxCandidateShare = 8;    // never gather more than V_d / 8 rows
  int top_k_ = 64;
  int64_t max_k_ = 0;
  std::vector<float> e_, u_, s_, zin_, y_;      // [r], [r], [r], [2r+H], [3r]
  std::vector<std::pair<float, int64_t>> heap_;  // top K+1 of the base logits
  std::vector<uint8_t> rows_;                    // K gathered W2 rows (dense W2)
  std::vector<int64_t> cand_rows_;               // [K] candidate draft indices
  std::vector<float> cand_bias_;                 // [K]
  MarkovFastPathStats stats_;
};

}  // namespace dspark::net
