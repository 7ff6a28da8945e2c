// One row of logits turned into the distribution a sampler draws from, in a few vectorised O(V)
// passes and without building a V-entry candidate list (V = 262,144 for Gemma 3).
//
// Transforms, in llama.cpp's default order: top-k, then top-p and min-p on temperature-1
// probabilities (top-p normalises over the top-k survivors, or over the whole vocabulary when
// top-k is off; min-p keeps p >= min_p * p_max), then the temperature softmax over the survivors.
// temperature <= 0 is greedy (argmax, first index on ties).
//
// Two forms; every inverse-CDF draw walks tokens in vocabulary order (ascending id):
//   sparse  greedy, or any truncation on: the kept tokens with their final probabilities (sum 1).
//           The cut-offs are found without sorting the survivors: a histogram of the candidates
//           by logit locates the bin holding the top-k / top-p boundary and only that bin is sorted.
//   dense   temperature only: every token, p_i = exp((x_i - max) / T) / Z. The exp values and
//           their sums over kExpChunk-token chunks are kept, so prob() is O(1) and a draw reads the
//           chunk sums, then one chunk.
// The scalar oracle is distribution_reference() (sampler.h): the same distribution as a list in
// the same order, so a seeded draw picks the same token from both.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/threadpool.h"

namespace dspark::sample {

struct SamplerConfig;

struct TokenProb {
  int32_t id;
  float p;
};

using IdProb = std::pair<int32_t, float>;  // (token, probability): a sparse draft distribution q

// Inverse-CDF pick from a list summing to 1: the first entry where the running sum exceeds u
// (the last entry when rounding leaves u above the total). draw() takes u from rng.
int32_t draw_at(std::span<const TokenProb> dist, double u);
inline int32_t draw(std::span<const TokenProb> dist, Rng& rng) { return draw_at(dist, rng.uniform()); }

// Residual draws with at most this much mass left in max(p - q, 0) draw from p instead.
inline constexpr double kResidualMassFloor = 1e-8;

class RowDist {
 public:
  // logits [n] f32 (finite); cfg validated. Reuses this object's storage; logits need not outlive it.
  // pool (optional; call from the thread that drives it) splits the O(V) passes over its threads;
  // the result is bitwise the same for any number of threads.
  void build(const SamplerConfig& cfg, const float* logits, int64_t n, ThreadPool* pool = nullptr);

  bool dense() const { return dense_; }
  int64_t n_vocab() const { return n_; }
  // Final probability of id (0 when truncated away).
  float prob(int32_t id) const;
  // Inverse-CDF draw in vocabulary order (always one uniform).
  int32_t draw(Rng& rng) const;
  // Draw from norm(max(p - q, 0)), or from p when that has mass <= kResidualMassFloor (one
  // uniform either way). q: distinct ids, any order, probabilities summing to <= 1.
  int32_t draw_residual(std::span<const IdProb> q, Rng& rng) const;
  // Sparse form: the kept tokens, ids ascending. Dense form: empty.
  std::span<const TokenProb> kept() const { return kept_; }
  // Every token with p > 0, ids ascending (the dense form materialises V entries).
  void to_list(std::vector<TokenProb>* out) const;

  // A candidate token while the cut-offs are found.
  struct Cand {
    float x;   // logit
    int32_t id;
    float e;   // exp(x - max): temperature-1 weight (filled when top-p needs it)
  };

 private:
  void build_sparse(const SamplerConfig& cfg, const float* x, float max_logit, ThreadPool* pool);
  // The O(V) passes, split over the pool in whole kExpChunk chunks.
  float par_max(const float* x, ThreadPool* pool);
  // Fills e_ and chunk_; with collect_t > -inf also ids_ = {i : x_i >= collect_t} (ascending).
  double par_exp(const float* x, float shift, float scale, ThreadPool* pool, float collect_t = -INFINITY);
  void par_collect(const float* x, float t, ThreadPool* pool);                 // fills ids_ (ascending)
  // The k-th member (1-based) of s in (logit descending, id ascending) order. Reorders s.
  Cand kth(std::vector<Cand>& s, size_t k, float max_logit);
  // The last member, in (logit descending, id ascending) order, of the shortest prefix of s whose
  // weights reach target (the last member of s when rounding never reaches it). Reorders s.
  Cand top_p_cut(std::vector<Cand>& s, double target, float max_logit);
  int32_t walk_dense(double target, std::span<const IdProb> q_by_id, const double* chunk_adj) const;

  int64_t n_ = 0;
  bool dense_ = false;
  std::vector<TokenProb> kept_;  // sparse: kept tokens
  // dense: e_[i] = exp((x_i - max) / T) [n]; chunk_[c] = sum of e_ over chunk c; z_ = sum of all
  std::vector<float> e_, chunk_;
  double z_ = 0;
  std::vector<int32_t> ids_;                  // scratch: candidate ids
  std::vector<std::vector<int32_t>> part_ids_;  // scratch: per-thread candidate ids
  std::vector<float> part_max_;               // scratch: per-thread maxima
  std::vector<Cand> cand_, bin_members_;      // scratch: candidates, one histogram bin
  std::vector<double> bin_mass_;              // scratch: histogram
  std::vector<int64_t> bin_count_;            // scratch: histogram
  std::vector<float> xs_;                     // scratch: kept logits
  mutable std::vector<IdProb> q_scratch_;     // scratch: draw_residual
  mutable std::vector<double> adj_scratch_;   // scratch: draw_residual
};

}  // namespace dspark::sample
