// f32 ops against plain double-precision formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/f16.h"
#include "kernels/ops.h"

namespace dspark::kernels {
namespace {

// The GELU table rounds input and output to f16 (as ggml does): |error| <= ~2^-10 relative to
// max(|x|, 1) around zero crossings; 2e-3 bounds it (measured max 1.0e-3).
constexpr float kTolGeluTable = 2e-3f;
constexpr float kTolRope = 1e-4f;  // f32 angle recurrence vs fresh double pow, positions < 4096

TEST(Ops, GeluTableCloseToExact) {
  GeluTable table;
  std::vector<float> x, up, exact(1), got(1);
  float worst = 0;
  for (float v = -12.0f; v <= 12.0f; v += 0.0137f) {
    const float one = 1.0f;
    gelu_tanh_mul_ref(&v, &one, exact.data(), 1);
    table.gelu_mul(&v, &one, got.data(), 1);
    worst = std::max(worst, std::fabs(got[0] - exact[0]) / std::max(1.0f, std::fabs(v)));
  }
  EXPECT_LT(worst, kTolGeluTable);
}

// libmvec's tanhf is within a few ulp of std::tanh. Where tanh is near -1 (x < ~-2), 1 + tanh
// cancels and those ulp of 1 become the result's whole error, so the bound scales with |x * up|,
// not the tiny result: measured max 1.2e-7 x |x * up| on this sweep; 1e-6 leaves 8x room.
constexpr float kTolGeluTanh = 1e-6f;

TEST(Ops, GeluTanhMatchesExact) {
  std::vector<float> x, up;
  for (float v = -12.0f; v <= 12.0f; v += 0.0137f) {
    x.push_back(v);
    up.push_back(0.5f + 0.01f * (float)(x.size() % 100));
  }
  x.push_back(-100.0f);
  x.push_back(100.0f);
  up.resize(x.size(), 1.0f);
  std::vector<float> want(x.size()), got(x.size());
  gelu_tanh_mul_ref(x.data(), up.data(), want.data(), (int64_t)x.size());
  gelu_tanh_mul(x.data(), up.data(), got.data(), (int64_t)x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kTolGeluTanh * std::max(std::fabs(x[i] * up[i]), 1e-3f)) << "x " << x[i];
}

TEST(Ops, RmsNorm) {
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 2, 0.5f, 1}, y(4);
  rms_norm(x.data(), w.data(), y.data(), 4, 1e-6f);
  const double inv = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-6);
}

TEST(Ops, RopeNeoxMatchesFormula) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int64_t hd = 256, heads = 2;
  for (int64_t pos : {0, 1, 7, 511, 4095}) {
    for (float base : {1e4f, 1e6f}) {
      std::vector<float> x(heads * hd);
      for (auto& v : x) v = nd(rng);
      std::vector<float> y = x;
      rope_neox(y.data(), heads, hd, pos, base);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i) {
          const double th = pos * std::pow((double)base, -2.0 * i / hd);
          const double a = x[h * hd + i], b = x[h * hd + i + hd / 2];
          EXPECT_NEAR(y[h * hd + i], a * std::cos(th) - b * std::sin(th), kTolRope * (1 + pos / 512.0));
          EXPECT_NEAR(y[h * hd + i + hd / 2], b * std::cos(th) + a * std::sin(th), kTolRope * (1 + pos / 512.0));
        }
    }
  }
}

TEST(Ops, ArgmaxFirstIndexOfTheMaximum) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (int64_t n : {1, 15, 16, 17, 100, 262144}) {
    std::vector<float> x(n);
    for (auto& v : x) v = nd(rng);
    int64_t want = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[want]) want = i;
    EXPECT_EQ(argmax(x.data(), n), want) << n;
    if (n > 40) {  // ties: the first index wins
      x[n - 3] = x[want] + 1.0f;
      x[20] = x[n - 3];
      EXPECT_EQ(argmax(x.data(), n), 20) << n;
    }
  }
}

TEST(Ops, CollectGeMatchesReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (int64_t n : {1, 15, 16, 17, 1000, 262144}) {
    std::vector<float> x(n);
    for (auto& v : x) v = nd(rng);
    for (float t : {-10.0f, 0.0f, 2.5f, 100.0f}) {
      std::vector<int32_t> got = {-7}, want = {-7};  // appends after what is there
      EXPECT_EQ(collect_ge(x.data(), n, t, got), collect_ge_ref(x.data(), n, t, want));
      EXPECT_EQ(got, want) << n << " " << t;
    }
    EXPECT_FLOAT_EQ(max_value(x.data(), n), *std::max_element(x.begin(), x.end()));
  }
}

// The vectorised exp (libmvec) against std::exp, and its chunk sums against the reference's.
constexpr double kTolExpRel = 1e-6;
// A chunk sum adds 1024 f32 terms in 8 lanes vs one running sum: measured up to 1.1e-6 apart.
constexpr double kTolChunkSumRel = 1e-5;
TEST(Ops, ExpShiftSumChunksMatchReference) {
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {5, 1024, 1025, 262144}) {
    std::vector<float> x(n), a(n), b(n);
    for (auto& v : x) v = nd(rng);
    const int64_t nc = (n + kExpChunk - 1) / kExpChunk;
    std::vector<float> ca(nc), cb(nc);
    const double sa = exp_shift_sum(x.data(), n, 3.0f, 0.7f, a.data(), ca.data());
    const double sb = exp_shift_sum_ref(x.data(), n, 3.0f, 0.7f, b.data(), cb.data());
    EXPECT_NEAR(sa / sb, 1.0, kTolChunkSumRel);
    double total = 0;
    for (int64_t c = 0; c < nc; ++c) {
      EXPECT_NEAR(ca[c] / cb[c], 1.0, kTolChunkSumRel) << c;
      total += ca[c];
    }
    EXPECT_NEAR(total / sa, 1.0, kTolExpRel);
    for (int64_t i = 0; i < n; i += 97) EXPECT_NEAR(a[i] / b[i], 1.0, kTolExpRel) << i;
  }
}

TEST(Ops, F16RowConversionRoundsToNearestEven) {
  const float x[3] = {1.0f, 1.0f + 1.0f / 2048, 65504.0f};
  uint16_t y[3];
  f32_to_f16_row(x, y, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], fp32_to_fp16(x[i]));
}

}  // namespace
}  // namespace dspark::kernels
