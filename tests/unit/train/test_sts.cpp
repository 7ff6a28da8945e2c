#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "train/sts.h"

namespace dspark::train {
namespace {

// Rounds whose true per-slot acceptance is σ(z / 2.5): raw σ(z) is overconfident; STS must find
// T ≈ 2.5 for each slot and cut the ECE.
TEST(Sts, RecoversTemperature) {
  Rng rng(3);
  const int gamma = 3;
  std::vector<std::vector<float>> z;
  std::vector<int32_t> acc;
  for (int r = 0; r < 20000; ++r) {
    std::vector<float> row;
    int a = 0;
    bool alive = true;
    for (int k = 0; k < gamma; ++k) {
      const float zk = (float)(rng.uniform() * 10.0 - 3.0);
      row.push_back(zk);
      const bool ok = rng.uniform() < 1.0 / (1.0 + std::exp(-zk / 2.5));
      if (alive && ok) ++a; else alive = false;
    }
    z.push_back(row);
    acc.push_back(a);
  }
  const StsFit f = fit_sts(z, acc, gamma);
  for (int k = 0; k < gamma; ++k) {
    EXPECT_NEAR(f.temperatures[k], 2.5, 0.4) << "slot " << k;
    EXPECT_LT(f.ece_after[k], f.ece_before[k]);
    EXPECT_LT(f.ece_after[k], 0.02);
  }
}

TEST(Sts, EceOfPerfectAndWorstPredictions) {
  EXPECT_DOUBLE_EQ(expected_calibration_error({1.0, 0.0}, {1, 0}), 0.0);
  EXPECT_DOUBLE_EQ(expected_calibration_error({1.0, 1.0}, {0, 0}), 1.0);
}

}  // namespace
}  // namespace dspark::train
