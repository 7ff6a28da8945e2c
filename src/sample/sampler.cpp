#include "sample/sampler.h"

namespace dspark::sample {

Status validate(const SamplerConfig& c) {
  if (!(c.temperature >= 0.0f) || c.temperature > 100.0f)
    return Status::error("temperature must be in [0, 100], got " + std::to_string(c.temperature));
  if (c.top_k < 0) return Status::error("top_k must be >= 0, got " + std::to_string(c.top_k));
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f))
    return Status::error("top_p must be in (0, 1], got " + std::to_string(c.top_p));
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f))
    return Status::error("min_p must be in [0, 1], got " + std::to_string(c.min_p));
  return Status::ok();
}

int32_t draw_at(std::span<const TokenProb> dist, double u) {
  double cum = 0;
  for (const TokenProb& tp : dist) {
    cum += tp.p;
    if (u < cum) return tp.id;
  }
  return dist.back().id;  // rounding left u above the total
}

const RowDist& Sampler::row(const float* logits, int64_t n) {
  row_.build(cfg_, logits, n, pool_);
  return row_;
}

const std::vector<TokenProb>& Sampler::distribution(const float* logits, int64_t n) {
  row(logits, n).to_list(&list_);
  return list_;
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  const RowDist& r = row(logits, n);
  if (!r.dense() && r.kept().size() == 1) return r.kept()[0].id;  // no random draw
  return r.draw(rng_);
}

}  // namespace dspark::sample
