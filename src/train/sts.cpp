#include "train/sts.h"

#include <cmath>

namespace dspark::train {

double expected_calibration_error(const std::vector<double>& pred, const std::vector<int>& label) {
  constexpr int kBins = 20;
  double sp[kBins] = {}, sl[kBins] = {};
  int64_t n[kBins] = {};
  for (size_t i = 0; i < pred.size(); ++i) {
    int b = (int)(pred[i] * kBins);
    b = b < 0 ? 0 : b >= kBins ? kBins - 1 : b;
    sp[b] += pred[i];
    sl[b] += label[i];
    ++n[b];
  }
  double ece = 0;
  for (int b = 0; b < kBins; ++b)
    if (n[b]) ece += std::fabs(sp[b] - sl[b]) / (double)pred.size();
  return pred.empty() ? 0.0 : ece;
}

StsFit fit_sts(const std::vector<std::vector<float>>& z, const std::vector<int32_t>& acc, int gamma) {
  StsFit fit;
  fit.temperatures.assign((size_t)gamma, 1.0f);
  std::vector<double> prefix(z.size(), 1.0), prefix_raw(z.size(), 1.0);  // Π of earlier slots
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (int k = 0; k < gamma; ++k) {
    std::vector<size_t> rows;
    for (size_t r = 0; r < z.size(); ++r)
      if ((int)z[r].size() > k) rows.push_back(r);
    if (rows.empty()) {
      fit.ece_before.push_back(0);
      fit.ece_after.push_back(0);
      continue;
    }
    std::vector<int> y;
    std::vector<double> raw;
    for (size_t r : rows) {
      y.push_back(acc[r] >= k + 1 ? 1 : 0);
      raw.push_back(prefix_raw[r] * sig(z[r][(size_t)k]));
    }
    fit.ece_before.push_back(expected_calibration_error(raw, y));
    int positives = 0;
    for (int v : y) positives += v;
    // Too few accepted examples to calibrate on: keep the previous slot's temperature.
    const bool thin = positives < kStsMinPositives || positives == (int)y.size();
    double best_t = k > 0 ? fit.temperatures[(size_t)k - 1] : 1.0, best_e = 1e300;
    std::vector<double> pred(rows.size());
    for (int g = 0; g <= 120 && !thin; ++g) {
      const double t = 0.05 * std::pow(400.0, g / 120.0);  // 0.05 .. 20
      for (size_t i = 0; i < rows.size(); ++i) pred[i] = prefix[rows[i]] * sig(z[rows[i]][(size_t)k] / t);
      const double e = expected_calibration_error(pred, y);
      if (e < best_e - 1e-12) { best_e = e; best_t = t; }
    }
    if (thin) {
      for (size_t i = 0; i < rows.size(); ++i) pred[i] = prefix[rows[i]] * sig(z[rows[i]][(size_t)k] / best_t);
      best_e = expected_calibration_error(pred, y);
    }
    fit.temperatures[(size_t)k] = (float)best_t;
    fit.ece_after.push_back(best_e);
    for (size_t r : rows) {
      prefix[r] *= sig(z[r][(size_t)k] / best_t);
      prefix_raw[r] *= sig(z[r][(size_t)k]);
    }
  }
  return fit;
}

}  // namespace dspark::train
