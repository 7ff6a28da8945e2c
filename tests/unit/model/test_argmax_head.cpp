// The exact greedy head (model/argmax_head.h) on synthetic Q8_0 heads: its bound holds (and is
// tight where the activation is the error's own direction), its argmax is the full head's on every
// ISA the CPU runs, ties included, and rows it cannot screen fall back to the full head.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/f16.h"
#include "kernels/backend.h"
#include "kernels/quant_blocks.h"
#include "kernels/ops.h"
#include "kernels/ref/ref.h"
#include "model/argmax_head.h"

namespace dspark {
namespace {

// A Q8_0 head [V, H] from random f32 rows (a few rows repeated, for exact ties), and the values.
struct SynthHead {
  int64_t V, H;
  std::vector<uint8_t> bytes;
  std::vector<float> w;  // dequantized [V, H]
  kernels::QMatrix m() const { return {DType::Q8_0, V, H, bytes.data(), row_bytes(DType::Q8_0, H)}; }
};

SynthHead make_head(int64_t V, int64_t H, uint32_t seed) {
  SynthHead h{V, H, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> f((size_t)(V * H));
  for (float& v : f) v = nd(rng);
  for (int64_t i = 0; i < 16; ++i)  // rows 100+i repeat rows 10+i: exact ties
    std::memcpy(&f[(size_t)((100 + i) * H)], &f[(size_t)((10 + i) * H)], sizeof(float) * H);
  const size_t rb = row_bytes(DType::Q8_0, H);
  h.bytes.resize(rb * (size_t)V);
  h.w.resize(f.size());
  for (int64_t i = 0; i < V; ++i) {
    kernels::quantize_row_ref(DType::Q8_0, &f[(size_t)(i * H)], h.bytes.data() + i * rb, H);
    kernels::dequantize_row(DType::Q8_0, h.bytes.data() + i * rb, &h.w[(size_t)(i * H)], H);
  }
  return h;
}

// Activations with Gemma-like outlier channels (a few elements carrying most of the norm).
std::vector<float> make_x(int64_t H, std::mt19937& rng, bool outliers) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x((size_t)H);
  for (float& v : x) v = nd(rng);
  if (outliers)
    for (int64_t j : {3, 50, 131}) x[(size_t)(j % H)] = 40.0f * (j % 2 ? 1.0f : -1.0f);
  return x;
}

// A synthetic head with its screen on the default backend, and a matmul context for both.
class ArgmaxHeadScreened : public ::testing::Test {
 protected:
  void screen(int64_t V, int64_t H, uint32_t seed) {
    h = make_head(V, H, seed);
    head = model::ArgmaxHead::build(h.m(), be);
    ASSERT_NE(head, nullptr);
  }
  SynthHead h;
  const kernels::Backend& be = kernels::default_backend();
  std::unique_ptr<model::ArgmaxHead> head;
  kernels::MatmulContext mm = be.matmul_context(nullptr);
};

// The SIMD ISAs this CPU runs (the scalar ISA gets no screen: reading it would cost more than the
// full head's SIMD-less read saves).
std::vector<kernels::Isa> isas() {
  std::vector<kernels::Isa> out;
  for (kernels::Isa isa : {kernels::Isa::kAvx2, kernels::Isa::kAvx512})
    if (isa <= kernels::detect_isa()) out.push_back(isa);
  return out;
}

TEST(ArgmaxHead, OnlyForQ8_0HeadsOnSimd) {
  const kernels::Backend& be = kernels::default_backend();
  std::vector<float> f(64 * 64, 0.5f);
  const kernels::QMatrix m{DType::F32, 64, 64, f.data(), 64 * sizeof(float)};
  EXPECT_EQ(model::ArgmaxHead::build(m, be), nullptr);
  EXPECT_EQ(model::ArgmaxHead::build(make_head(64, 64, 1).m(), kernels::cpu_backend(kernels::Isa::kScalar)), nullptr);
}

// The screen's fused requantizer against its oracle: the reference Q5_0 quantizer of the dequantized
// row, bit for bit, on rows with ties of |q|, zero blocks and negative scales; its statistics bound
// the reference values from above, within 1e-4.
TEST(ArgmaxHead, RequantizerMatchesTheReference) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::uniform_real_distribution<float> dd(-0.02f, 0.02f);
  const int64_t n = 256;
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<kernels::BlockQ8_0> row(n / 32);
    for (size_t b = 0; b < row.size(); ++b) {
      row[b].d = fp32_to_fp16(rep % 7 == 0 && b == 1 ? 0.0f : dd(rng));
      for (int j = 0; j < 32; ++j) row[b].qs[j] = (int8_t)(rep % 5 == 0 && b == 2 ? (j % 2 ? 90 : -90) : qd(rng));
      if (rep % 3 == 0 && b == 3)
        for (int j = 0; j < 32; ++j) row[b].qs[j] = 0;
    }
    std::vector<float> w(n), wt(n);
    kernels::dequantize_row_ref(DType::Q8_0, row.data(), w.data(), n);
    std::vector<uint8_t> want(row_bytes(DType::Q5_0, n)), got(want.size());
    kernels::quantize_row_q5_0_ref(w.data(), want.data(), n);
    const model::RequantStats st = model::requantize_q8_0_to_q5_0(row.data(), got.data(), n);
    ASSERT_EQ(got, want) << "rep " << rep;
    kernels::dequantize_row_ref(DType::Q5_0, want.data(), wt.data(), n);
    double e = 0, em = 0, nw = 0, nt = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = (double)w[j] - wt[j];
      e += d * d;
      em = std::max(em, std::fabs(d));
      nw += (double)w[j] * w[j];
      nt += (double)wt[j] * wt[j];
    }
    for (auto [bound, exact] : {std::pair{st.l2, std::sqrt(e)}, std::pair{st.linf, em}, std::pair{st.norm_w, std::sqrt(nw)},
                                std::pair{st.norm_wt, std::sqrt(nt)}}) {
      EXPECT_GE(bound, exact) << "rep " << rep;
      EXPECT_LE(bound, exact * (1 + 1e-4) + 1e-30) << "rep " << rep;
    }
  }
}

TEST_F(ArgmaxHeadScreened, BoundHoldsAndIsTightAlongTheError) {
  screen(512, 256, 7);
  std::vector<float> full(512), tmp;
  double tightest = 0;
  for (int64_t i = 0; i < 512; i += 37) {
    // x = the sign pattern of row i's screen error: Cauchy-Schwarz and Hölder are nearly tight.
    std::vector<float> wt(256);
    std::vector<uint8_t> q(row_bytes(DType::Q5_0, 256));
    kernels::quantize_row_ref(DType::Q5_0, &h.w[(size_t)(i * 256)], q.data(), 256);
    kernels::dequantize_row(DType::Q5_0, q.data(), wt.data(), 256);
    std::vector<float> x(256);
    for (int j = 0; j < 256; ++j) x[j] = h.w[(size_t)(i * 256 + j)] - wt[j];
    be.matmul(mm, h.m(), x.data(), 1, full.data(), 512);
    const model::ActivationSplit sp =
        model::split_activation_bound(x.data(), 256, head->linf_bounds()[i], head->l2_bounds()[i], tmp);
    // ỹ_i from the Q5_0 rows as the screen holds them (same quantizer, same canonical kernel).
    const kernels::QMatrix qi{DType::Q5_0, 1, 256, q.data(), q.size()};
    float yt = 0;
    be.matmul(mm, qi, x.data(), 1, &yt, 1);
    const double bound = head->linf_bounds()[i] * sp.a + head->l2_bounds()[i] * sp.b;
    const double diff = std::fabs((double)full[(size_t)i] - yt);
    EXPECT_LE(diff, bound) << "row " << i;
    tightest = std::max(tightest, diff / bound);
  }
  // Along the error the bound is within a small factor of the actual difference: a bound half as
  // large would fail the EXPECT_LE above.
  EXPECT_GT(tightest, 0.5);
}

TEST(ArgmaxHead, ArgmaxEqualsFullHeadOnEveryIsa) {
  const SynthHead h = make_head(2048, 256, 11);
  for (kernels::Isa isa : isas()) {
    const kernels::Backend& be = kernels::cpu_backend(isa);
    auto head = model::ArgmaxHead::build(h.m(), be);
    ASSERT_NE(head, nullptr) << kernels::isa_name(isa);
    kernels::MatmulContext mm = be.matmul_context(nullptr);
    std::mt19937 rng(3);
    model::ArgmaxScratch s;
    int64_t screened = 0, n_rows = 0;
    for (int rep = 0; rep < 40; ++rep) {
      // Rows one at a time (decode); every fourth batch aims at a tied pair (rows 10+k, 100+k).
      const int64_t n = 3;
      std::vector<float> x;
      for (int64_t t = 0; t < n; ++t) {
        std::vector<float> xt = make_x(256, rng, rep % 2 == 0);
        if (rep % 4 == 1)
          for (int j = 0; j < 256; ++j) xt[j] = 30.0f * h.w[(size_t)((10 + t) * 256 + j)];
        x.insert(x.end(), xt.begin(), xt.end());
      }
      std::vector<float> full((size_t)(n * 2048)), fast((size_t)(n * 2048));
      be.matmul(mm, h.m(), x.data(), n, full.data(), 2048);
      for (int64_t t = 0; t < n; ++t) head->run(mm, x.data() + t * 256, 1, fast.data() + t * 2048, 2048, s);
      for (int64_t t = 0; t < n; ++t) {
        const float* a = fast.data() + t * 2048;
        const float* b = full.data() + t * 2048;
        const int64_t want = kernels::argmax(b, 2048);
        EXPECT_EQ(kernels::argmax(a, 2048), want) << kernels::isa_name(isa) << " rep " << rep << " row " << t;
        if (rep % 4 == 1) {
          EXPECT_EQ(want, 10 + t) << "the tie resolves to the first of the equal rows";
        }
        int64_t kept = 0;
        for (int64_t i = 0; i < 2048; ++i) {
          if (a[i] == -std::numeric_limits<float>::infinity()) continue;
          ++kept;
          EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "row " << i << ": not the full head's bits";
        }
        screened += 2048 - kept;
        ++n_rows;
      }
    }
    EXPECT_EQ(s.rows_run + s.full_rows, n_rows);
    EXPECT_LT(s.fallbacks * 4, n_rows);
    // The screen must drop most rows, or it saves nothing.
    EXPECT_GT(screened, n_rows * 2048 / 2) << kernels::isa_name(isa);
  }
}

TEST_F(ArgmaxHeadScreened, WindowsRunTheFullHead) {
  screen(1024, 128, 9);
  std::mt19937 rng(1);
  std::vector<float> x;
  for (int t = 0; t < 4; ++t) {
    const std::vector<float> xt = make_x(128, rng, true);
    x.insert(x.end(), xt.begin(), xt.end());
  }
  std::vector<float> full(4 * 1024), fast(4 * 1024);
  model::ArgmaxScratch s;
  head->run(mm, x.data(), 4, fast.data(), 1024, s);
  be.matmul(mm, h.m(), x.data(), 4, full.data(), 1024);
  EXPECT_EQ(s.full_rows, 4);
  EXPECT_EQ(s.rows_run, 0);
  EXPECT_EQ(std::memcmp(fast.data(), full.data(), sizeof(float) * full.size()), 0);
}

TEST_F(ArgmaxHeadScreened, UnscreenableRowsFallBackToTheFullHead) {
  screen(1024, 128, 5);
  std::vector<float> zero(128, 0.0f), full(1024), fast(1024);
  model::ArgmaxScratch s;
  head->run(mm, zero.data(), 1, fast.data(), 1024, s);  // every logit 0: nothing can be screened out
  be.matmul(mm, h.m(), zero.data(), 1, full.data(), 1024);
  EXPECT_EQ(s.fallbacks, 1);
  EXPECT_EQ(std::memcmp(fast.data(), full.data(), sizeof(float) * 1024), 0);
  EXPECT_EQ(kernels::argmax(fast.data(), 1024), 0);
  // The next kSkipAfterFallback rows go to the full head unscreened, then screening resumes.
  std::mt19937 rng(2);
  const std::vector<float> x = make_x(128, rng, true);
  for (int64_t i = 0; i < model::ArgmaxHead::kSkipAfterFallback + 1; ++i) head->run(mm, x.data(), 1, fast.data(), 1024, s);
  EXPECT_EQ(s.full_rows, model::ArgmaxHead::kSkipAfterFallback);
  EXPECT_EQ(s.rows_run, 2);
}

}  // namespace
}  // namespace dspark
