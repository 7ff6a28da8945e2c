// Token sampling: greedy, temperature, top-k, top-p, min-p, seeded.
// Order follows llama.cpp's default chain: top-k, top-p, min-p (on temperature-1 probabilities),
// then temperature, then a draw. temperature <= 0 is greedy (argmax, first index on ties).
// The work per row is in RowDist (row_dist.h): O(V) vectorised passes, no V-entry lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "sample/row_dist.h"

namespace dspark::sample {

struct SamplerConfig {
  float temperature = 0.0f;
  int32_t top_k = 0;      // 0 = off
  float top_p = 1.0f;     // 1 = off
  float min_p = 0.0f;     // 0 = off
  uint64_t seed = 0;
};

// Validates ranges; error names the field.
Status validate(const SamplerConfig& cfg);

// The scalar oracle of RowDist: the same distribution as an explicit list in the same order
// (ids ascending; greedy: the argmax with p = 1). Sorts the whole vocabulary: tests only.
std::vector<TokenProb> distribution_reference(const SamplerConfig& cfg, const float* logits, int64_t n_vocab);

class Sampler {
 public:
  // pool (optional): the pool of the session whose logits this sampler reads; see RowDist::build.
  explicit Sampler(const SamplerConfig& cfg, ThreadPool* pool = nullptr) : cfg_(cfg), rng_(cfg.seed), pool_(pool) {}
  const SamplerConfig& config() const { return cfg_; }
  bool greedy() const { return cfg_.temperature <= 0.0f; }

  // Draws one token from logits [n_vocab] f32. A row with a single survivor (greedy, top-k 1)
  // consumes no random number.
  int32_t sample(const float* logits, int64_t n_vocab);

  // The distribution sample() draws from, built into this sampler's storage (valid until the
  // next call).
  const RowDist& row(const float* logits, int64_t n_vocab);

  // The same as an explicit list (materialises V entries at temperature only; prefer row()).
  const std::vector<TokenProb>& distribution(const float* logits, int64_t n_vocab);

  Rng& rng() { return rng_; }

 private:
  SamplerConfig cfg_;
  Rng rng_;
  ThreadPool* pool_;
  RowDist row_;
  std::vector<TokenProb> list_;
};

}  // namespace dspark::sample
