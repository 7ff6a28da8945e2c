// TurboQuant pieces: the Lloyd-Max codebooks against the N(0, 1) optimum, and the weight quantizer's
// reconstruction error against the Lloyd-Max distortion on Gaussian rows.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "quant/lloyd_max.h"
#include "quant/qmatrix.h"
#include "quant/turbo.h"

namespace dspark::quant {
namespace {

// The Lloyd-Max optimum for N(0, 1), computed independently to 5 decimals: MSE/σ² and the positive-half levels.
constexpr double kTolTable = 1e-5;  // the table is rounded to 5 decimals
const double kMse[5] = {0, 0.36338, 0.11748, 0.03455, 0.00950};
const std::vector<std::vector<double>> kPositive = {
    {},
    {0.79788},
    {0.45278, 1.51042},
    {0.24509, 0.75601, 1.34391, 2.15195},
    {0.12840, 0.38805, 0.65676, 0.94234, 1.25623, 1.61805, 2.06902, 2.73259}};

double normal(Rng& rng) {
  const double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

TEST(QuantTurbo, LloydMaxMatchesKnownDistortions) {
  for (int bits = 1; bits <= 4; ++bits) {
    const LloydMaxCodebook cb = lloyd_max_gaussian(bits);
    EXPECT_NEAR(cb.mse, kMse[bits], kTolTable + 5e-6) << bits << " bits";
    const int n = 1 << bits;
    ASSERT_EQ((int)cb.levels.size(), n);
    for (int i = 0; i < n / 2; ++i) {
      EXPECT_NEAR(cb.levels[(size_t)(n / 2 + i)], kPositive[(size_t)bits][(size_t)i], kTolTable) << bits << " bits, level " << i;
      EXPECT_EQ(cb.levels[(size_t)(n / 2 - 1 - i)], -cb.levels[(size_t)(n / 2 + i)]);
    }
    EXPECT_EQ(cb.boundaries[(size_t)(n / 2 - 1)], 0.0);  // 0 is a boundary
    // Below the paper's bound D <= (sqrt(3) pi / 2) 4^-b and above the lower bound 4^-b.
    EXPECT_LT(cb.mse, std::sqrt(3.0) * M_PI / 2 * std::pow(4.0, -bits));
    EXPECT_GT(cb.mse, std::pow(4.0, -bits));
  }
  // Monte Carlo of the nearest-level quantizer agrees with the closed-form MSE.
  Rng rng(11);
  const std::vector<float> lv = turbo_levels(3);
  double err = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float x = (float)normal(rng);
    const double d = x - lv[(size_t)nearest_level(lv, x)];
    err += d * d;
  }
  EXPECT_NEAR(err / n, kMse[3], 0.001);
}

// Normalized MSE of turbo-quantized Gaussian rows (rotation leaves i.i.d. Gaussians Gaussian), next
// to an independent Monte Carlo estimate (TQ-4 g32 0.0084-0.0089, TQ-3 g32 0.0326, TQ-2 g32 0.111).
TEST(QuantTurbo, GaussianRowsReachTheLloydMaxDistortion) {
  const int64_t rows = 64, cols = 512;
  Rng rng(7);
  std::vector<float> w((size_t)(rows * cols));
  for (float& x : w) x = (float)normal(rng) * 0.02f;
  const double want[5] = {0, 0, 0.111, 0.0326, 0.0087};
  for (int bits : {2, 3, 4}) {
    const int g = 32;
    auto tables = std::make_shared<TurboTables>();
    tables->levels = turbo_levels(bits);
    tables->rot = make_rotation(cols, 128, 99);
    std::vector<uint8_t> codes((size_t)(rows * cols * bits / 8));
    std::vector<uint16_t> scales((size_t)(rows * cols / g));
    for (int64_t r = 0; r < rows; ++r)
      turbo_quantize_row(&w[(size_t)(r * cols)], tables->rot, tables->levels, bits, g, &codes[(size_t)(r * cols * bits / 8)],
                         &scales[(size_t)(r * cols / g)]);
    QuantMatrix q{{Method::kTurbo, bits, g, 128, 99}, rows, cols, codes.data(), scales.data(), nullptr, tables};
    double err = 0, ref = 0;
    std::vector<float> row((size_t)cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(q, r, row.data());  // un-rotated: the original basis
      for (int64_t j = 0; j < cols; ++j) {
        const double a = w[(size_t)(r * cols + j)], d = a - row[(size_t)j];
        err += d * d;
        ref += a * a;
      }
    }
    const double nmse = err / ref;
    EXPECT_NEAR(nmse, want[bits], want[bits] * 0.12) << "TQ-" << bits << " g32";
  }
}

TEST(QuantTurbo, ZeroGroupAndScaleRounding) {
  const Rotation rot = make_rotation(64, 64, 1);
  const std::vector<float> lv = turbo_levels(4);
  std::vector<float> z(64, 0.0f);
  uint8_t codes[32];
  uint16_t scales[2];
  turbo_quantize_row(z.data(), rot, lv, 4, 32, codes, scales);
  EXPECT_EQ(scales[0], 0);
  EXPECT_EQ(scales[1], 0);
}

}  // namespace
}  // namespace dspark::quant
