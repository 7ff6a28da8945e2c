// distribution_reference: the scalar oracle of RowDist (plain loops, whole-vocabulary sort).
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "sample/sampler.h"

namespace dspark::sample {

std::vector<TokenProb> distribution_reference(const SamplerConfig& cfg, const float* logits, int64_t n) {
  std::vector<TokenProb> cand;
  if (cfg.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    cand.push_back({(int32_t)best, 1.0f});
    return cand;
  }
  float max_logit = logits[0];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  for (int64_t i = 0; i < n; ++i) cand.push_back({(int32_t)i, logits[i]});  // p holds the logit for now
  const bool truncating = (cfg.top_k > 0 && cfg.top_k < n) || cfg.top_p < 1.0f || cfg.min_p > 0.0f;
  if (truncating) {
    std::sort(cand.begin(), cand.end(),
              [](const TokenProb& a, const TokenProb& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
    if (cfg.top_k > 0 && (size_t)cfg.top_k < cand.size()) cand.resize((size_t)cfg.top_k);
  }
  auto softmax = [&](float temp) {
    std::vector<float> out(cand.size());
    double sum = 0;
    for (size_t i = 0; i < cand.size(); ++i) {
      out[i] = std::exp((cand[i].p - max_logit) / temp);
      sum += out[i];
    }
    for (float& v : out) v = (float)(v / sum);
    return out;
  };
  if (truncating) {
    // Temperature-1 probabilities for top-p / min-p.
    const std::vector<float> probs = softmax(1.0f);
    size_t keep = cand.size();
    if (cfg.top_p < 1.0f) {
      double cum = 0;
      for (size_t i = 0; i < keep; ++i) {
        cum += probs[i];
        if (cum >= cfg.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    if (cfg.min_p > 0.0f) {
      const float threshold = cfg.min_p * probs[0];
      size_t k = 1;
      while (k < keep && probs[k] >= threshold) ++k;
      keep = k;
    }
    cand.resize(keep);
    std::sort(cand.begin(), cand.end(), [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
  }
  const std::vector<float> probs = softmax(cfg.temperature);
  std::vector<TokenProb> out;
  for (size_t i = 0; i < cand.size(); ++i)
    if (probs[i] > 0) out.push_back({cand[i].id, probs[i]});
  return out;
}

}  // namespace dspark::sample
