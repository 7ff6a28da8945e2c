// The blockwise randomized Hadamard rotation: FWHT against the explicit Sylvester matrix, the
// rotation against R = H D / sqrt(b) built densely, orthogonality and round trips, and the SIMD
// transforms bitwise against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "kernels/kernels.h"
#include "quant/hadamard.h"

namespace dspark::quant {
namespace {

constexpr double kTolRoundTrip = 2e-6;  // f32 rotate + unrotate, |x| ~ 1 (measured ~3e-7)

std::vector<float> random_vec(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v((size_t)n);
  for (float& x : v) x = (float)(2 * rng.uniform() - 1);
  return v;
}

// Sylvester H_n entry (i, j) = (-1)^popcount(i & j).
double hadamard(int64_t i, int64_t j) { return __builtin_popcountll((uint64_t)(i & j)) % 2 ? -1.0 : 1.0; }

TEST(QuantHadamard, FwhtMatchesNaiveMatrix) {
  for (int64_t n = 1; n <= 256; n *= 2) {
    const std::vector<float> x = random_vec(n, (uint64_t)n);
    std::vector<float> y = x;
    fwht_ref(y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j) want += hadamard(i, j) * x[(size_t)j];
      EXPECT_NEAR(y[(size_t)i], want, 1e-5 * std::sqrt((double)n)) << "n " << n << " i " << i;
    }
  }
}

TEST(QuantHadamard, RotationIsBlockwiseHDOverSqrtB) {
  const int64_t n = 96;  // 3 blocks of 32
  const Rotation r = make_rotation(n, 32, 5);
  const std::vector<float> x = random_vec(n, 9);
  std::vector<float> y = x;
  rotate_ref(r, y.data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b0 = i / 32 * 32;
    double want = 0;
    for (int64_t j = b0; j < b0 + 32; ++j) want += hadamard(i - b0, j - b0) * r.signs[(size_t)j] * x[(size_t)j];
    EXPECT_NEAR(y[(size_t)i], want / std::sqrt(32.0), 1e-6) << i;
  }
  // Signs are ±1 and not all equal.
  int neg = 0;
  for (float s : r.signs) {
    ASSERT_TRUE(s == 1.0f || s == -1.0f);
    neg += s < 0;
  }
  EXPECT_GT(neg, 20);
  EXPECT_LT(neg, 76);
}

TEST(QuantHadamard, RoundTripAndNorm) {
  for (auto [n, b] : {std::pair<int64_t, int>{640, 128}, {3840, 256}, {64, 64}, {704, 64}, {48, 16}}) {
    const Rotation r = make_rotation(n, b, 42);
    const std::vector<float> x = random_vec(n, 3);
    std::vector<float> y = x;
    rotate_ref(r, y.data());
    double nx = 0, ny = 0;
    for (int64_t i = 0; i < n; ++i) {
      nx += (double)x[(size_t)i] * x[(size_t)i];
      ny += (double)y[(size_t)i] * y[(size_t)i];
    }
    EXPECT_NEAR(ny / nx, 1.0, 1e-5) << n;
    unrotate_ref(r, y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[(size_t)i], x[(size_t)i], kTolRoundTrip) << n << " at " << i;
  }
}

TEST(QuantHadamard, SeededSignsAreStable) {
  // The sign stream is part of the checkpoint format (docs/QUANT-FORMAT.md §3): pin it.
  const std::vector<float> s = rotation_signs(1, 130);
  EXPECT_EQ(s, rotation_signs(1, 130));
  EXPECT_NE(s, rotation_signs(2, 130));
  Rng rng(1);
  const uint64_t w0 = rng.next(), w1 = rng.next(), w2 = rng.next();
  for (int i = 0; i < 130; ++i) {
    const uint64_t w = i < 64 ? w0 : i < 128 ? w1 : w2;
    ASSERT_EQ(s[(size_t)i], (w >> (i % 64)) & 1 ? -1.0f : 1.0f) << i;
  }
}

TEST(QuantHadamard, SimdBitwiseEqualsReference) {
  const kernels::Isa best = kernels::detect_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (isa > best) {
      GTEST_LOG_(INFO) << "skipping " << kernels::isa_name(isa) << ": not supported by this CPU";
      continue;
    }
    for (auto [n, b] : {std::pair<int64_t, int>{640, 128}, {3840, 256}, {64, 64}, {32, 16}, {48, 16}, {256, 256}}) {
      const Rotation r = make_rotation(n, b, 7);
      std::vector<float> a = random_vec(n, 1), c = a;
      rotate_ref(r, a.data());
      rotate(r, c.data(), isa);
      ASSERT_EQ(0, std::memcmp(a.data(), c.data(), (size_t)n * 4)) << kernels::isa_name(isa) << " rotate n " << n;
      unrotate_ref(r, a.data());
      unrotate(r, c.data(), isa);
      ASSERT_EQ(0, std::memcmp(a.data(), c.data(), (size_t)n * 4)) << kernels::isa_name(isa) << " unrotate n " << n;
    }
  }
}

}  // namespace
}  // namespace dspark::quant
