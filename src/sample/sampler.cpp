#include "sample/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

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

const std::vector<TokenProb>& Sampler::distribution(const float* logits, int64_t n) {
  cand_.clear();
  if (greedy()) {
    cand_.push_back({(int32_t)kernels::argmax(logits, n), 1.0f});
    return cand_;
  }
  float max_logit = logits[0];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  // Candidates: everything within a huge margin of the max (exp(-80) is below f32 resolution of a sum).
  auto by_logit = [](const TokenProb& a, const TokenProb& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
  auto by_logit_less = [&](const TokenProb& a, const TokenProb& b) { return by_logit(b, a); };
  for (int64_t i = 0; i < n; ++i)
    if (logits[i] > max_logit - 80.0f) cand_.push_back({(int32_t)i, logits[i]});  // p holds the logit for now
  if (cfg_.top_k > 0 && (size_t)cfg_.top_k < cand_.size()) {
    std::nth_element(cand_.begin(), cand_.begin() + cfg_.top_k, cand_.end(), by_logit);
    cand_.resize(cfg_.top_k);
  }
  // Sorting 262k candidates costs milliseconds; only top-p and min-p need the order.
  if (cfg_.top_p < 1.0f || cfg_.min_p > 0.0f) {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  } else {
    auto it = std::max_element(cand_.begin(), cand_.end(), by_logit_less);
    std::iter_swap(cand_.begin(), it);  // softmax below subtracts cand_[0], the max
  }
  // Temperature-1 probabilities for top-p / min-p.
  auto softmax_inplace = [&](float temp, std::vector<float>& out) {
    out.resize(cand_.size());
    double sum = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      out[i] = std::exp((cand_[i].p - cand_[0].p) / temp);
      sum += out[i];
    }
    for (float& v : out) v = (float)(v / sum);
  };
  std::vector<float>& probs = probs_;
  softmax_inplace(1.0f, probs);
  size_t keep = cand_.size();
  if (cfg_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs[i];
      if (cum >= cfg_.top_p) { keep = i + 1; break; }
    }
  }
  if (cfg_.min_p > 0.0f) {
    const float threshold = cfg_.min_p * probs[0];
    size_t k = 1;
    while (k < keep && probs[k] >= threshold) ++k;
    keep = k;
  }
  cand_.resize(keep);
  softmax_inplace(cfg_.temperature, probs);
  for (size_t i = 0; i < cand_.size(); ++i) cand_[i].p = probs[i];
  return cand_;
}

int32_t draw(const std::vector<TokenProb>& dist, Rng& rng) {
  const double u = rng.uniform();
  double cum = 0;
  for (const TokenProb& tp : dist) {
    cum += tp.p;
    if (u < cum) return tp.id;
  }
  return dist.back().id;  // rounding left u above the total
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  const auto& dist = distribution(logits, n);
  if (dist.size() == 1) return dist[0].id;  // greedy / one candidate: no random draw
  return draw(dist, rng_);
}

}  // namespace dspark::sample
