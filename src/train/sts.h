// Sequential Temperature Scaling (docs/TRAINING.md, STS): per-slot temperatures T_k fitted left to right
// so that the cumulative product Π_{i<=k} σ(z_i / T_i) is calibrated (ECE, 20 equal-width bins)
// against y_k = [slots 0..k all accepted], earlier temperatures fixed. Order-preserving per slot.
#pragma once

#include <cstdint>
#include <vector>

namespace dspark::train {

// A slot with fewer accepted rounds than this keeps the previous slot's temperature (a grid search
// on a handful of positives fits noise).
inline constexpr int kStsMinPositives = 30;

struct StsFit {
  std::vector<float> temperatures;   // [γ]
  std::vector<double> ece_before;    // [γ] ECE of the raw cumulative products
  std::vector<double> ece_after;     // [γ] with the fitted temperatures
};

// ECE with 20 equal-width bins: Σ_b (n_b / N) |mean(pred_b) - mean(label_b)|.
double expected_calibration_error(const std::vector<double>& pred, const std::vector<int>& label);

// conf_logits[r][k]: raw confidence logit of slot k in round r (rows may be shorter than γ: the
// slots that were computed); accepted_len[r]: accepted drafts in round r. Temperatures are searched
// on a log grid in [0.05, 20].
StsFit fit_sts(const std::vector<std::vector<float>>& conf_logits, const std::vector<int32_t>& accepted_len, int gamma);

}  // namespace dspark::train
