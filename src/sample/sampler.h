// Token sampling: greedy, temperature, top-k, top-p, min-p, seeded.
// Order follows llama.cpp's default chain: top-k, top-p, min-p (on temperature-1 probabilities),
// then temperature, then a draw. temperature <= 0 is greedy (argmax, first index on ties).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"

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

struct TokenProb {
  int32_t id;
  float p;
};

// Inverse-CDF draw of one token from a distribution summing to 1 (consumes one uniform).
int32_t draw(const std::vector<TokenProb>& dist, Rng& rng);

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}
  const SamplerConfig& config() const { return cfg_; }
  bool greedy() const { return cfg_.temperature <= 0.0f; }

  // Draws one token from logits [n_vocab] f32.
  int32_t sample(const float* logits, int64_t n_vocab);

  // The distribution sample() draws from: candidates with p > 0 summing to 1; the first entry
  // is the most likely token (the rest are sorted only when top-p or min-p is on). For greedy it is the single argmax with p = 1. Reuses internal storage.
  const std::vector<TokenProb>& distribution(const float* logits, int64_t n_vocab);

  Rng& rng() { return rng_; }

 private:
  SamplerConfig cfg_;
  Rng rng_;
  std::vector<TokenProb> cand_;
  std::vector<float> probs_;
};

}  // namespace dspark::sample
