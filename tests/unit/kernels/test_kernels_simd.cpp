// SIMD matmul vs the scalar reference for every weight type and every ISA this CPU has
// (Scalar, Avx2, Avx512 forced through MatmulContext::isa), awkward shapes and data patterns,
// multi-token tiles and threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

// |matmul - matmul_ref| <= tol * sum_i |w_i * x_i|.
// Integer types: same quantized activations (Q8_K bit-exact; Q8_0/Q8_1 may differ by one unit on
// exact ties, which random data never hits) and f32 accumulation in another order: 1e-5 covers
// ~64 blocks of f32 rounding with margin.
constexpr double kTolSimdVsRefInt = 1e-5;
// F16 / BF16: SIMD keeps f32 activations, ggml (the ref) rounds them to f16 (2^-11 relative) /
// bf16 (2^-8 relative); F32: summation order only.
constexpr double kTolSimdVsRefF16 = 1e-3;
constexpr double kTolSimdVsRefBF16 = 5e-3;
constexpr double kTolSimdVsRefF32 = 1e-5;

double tol_for(DType t) {
  switch (t) {
    case DType::F16: return kTolSimdVsRefF16;
    case DType::BF16: return kTolSimdVsRefBF16;
    case DType::F32: return kTolSimdVsRefF32;
    default: return kTolSimdVsRefInt;
  }
}

ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

// Runs matmul with `isa` / `threads` and checks it against matmul_ref.
void check(const test::TestMatrix& w, const std::vector<float>& x, int64_t ntok, Isa isa, int threads,
           const std::string& what, bool allow_amx = true) {
  const int64_t rows = w.m.n_rows, ldy = rows + 3;
  std::vector<float> y((size_t)(ntok * ldy), -777.f), yr((size_t)(ntok * rows));
  MatmulContext ctx;
  ctx.isa = isa;
  ctx.pool = threads > 1 ? &pool2() : nullptr;
  ctx.allow_amx = allow_amx;
  matmul(ctx, w.m, x.data(), ntok, y.data(), ldy);
  matmul_ref(w.m, x.data(), ntok, yr.data(), rows);
  const auto scale = test::abs_scale(w.m, x, ntok);
  const double tol = tol_for(w.m.type);
  int bad = 0;
  for (int64_t t = 0; t < ntok; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const double got = y[(size_t)(t * ldy + r)], want = yr[(size_t)(t * rows + r)];
      const double lim = tol * scale[(size_t)(t * rows + r)] + 1e-30;
      if (!(std::fabs(got - want) <= lim) && bad++ < 3)
        ADD_FAILURE() << what << " " << isa_name(isa) << (allow_amx ? "" : " no-amx") << " t=" << t << " r=" << r << " got " << got << " want " << want
                      << " lim " << lim;
    }
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[(size_t)(t * ldy + r)], -777.f) << "wrote past n_rows";
  }
}

int64_t block_of(DType t) { return dtype_info(t).block_elems == 1 ? 32 : dtype_info(t).block_elems; }

class SimdVsRef : public ::testing::TestWithParam<DType> {};

TEST_P(SimdVsRef, ShapesAndPatterns) {
  const DType t = GetParam();
  const test::Pattern patterns[] = {test::Pattern::kRandom, test::Pattern::kZeroBlocks, test::Pattern::kAllEqual,
                                    test::Pattern::kLarge};
  Rng rng(1234);
  for (int64_t rows : {1, 7, 31, 33}) {
    for (int64_t nblk : {1, 3, 8}) {
      const int64_t cols = nblk * block_of(t);
      for (auto pw : patterns) {
        for (auto px : {test::Pattern::kRandom, test::Pattern::kZeroBlocks, pw}) {
          auto w = test::make_matrix(rng, t, rows, cols, pw);
          const auto x = test::make_values(rng, cols * 2, px);
          const std::string what = std::string(dtype_name(t)) + " rows=" + std::to_string(rows) +
                                   " cols=" + std::to_string(cols) + " pw=" + std::to_string((int)pw) +
                                   " px=" + std::to_string((int)px);
          for (Isa isa : test::available_isas()) {
            check(w, x, 1, isa, 1, what);
            check(w, x, 2, isa, 1, what);
          }
        }
      }
    }
  }
}

TEST_P(SimdVsRef, TokensAndThreads) {
  const DType t = GetParam();
  Rng rng(99);
  const int64_t rows = 67, cols = 2 * block_of(t) * (block_of(t) == 32 ? 8 : 1);  // 512
  auto w = test::make_matrix(rng, t, rows, cols, test::Pattern::kRandom);
  for (int64_t ntok : {1, 2, 3, 5, 8, 16, 17, 64}) {
    const auto x = test::make_values(rng, cols * ntok, test::Pattern::kRandom);
    for (Isa isa : test::available_isas())
      for (int threads : {1, 2}) {
        const std::string what = std::string(dtype_name(t)) + " ntok=" + std::to_string(ntok);
        check(w, x, ntok, isa, threads, what);
        if (isa == Isa::kAvx512 && amx_available()) check(w, x, ntok, isa, threads, what, /*allow_amx=*/false);
      }
  }
}

TEST_P(SimdVsRef, ScratchGrowsOnlyOnce) {
  const DType t = GetParam();
  Rng rng(5);
  auto w = test::make_matrix(rng, t, 16, 512, test::Pattern::kRandom);
  const auto x = test::make_values(rng, 512 * 8, test::Pattern::kRandom);
  std::vector<float> y(16 * 8);
  MatmulContext ctx;
  ctx.isa = detect_isa();
  matmul(ctx, w.m, x.data(), 8, y.data(), 16);
  const uint8_t* p = ctx.act_scratch.data();
  const size_t cap = ctx.act_scratch.capacity();
  for (int i = 0; i < 3; ++i) matmul(ctx, w.m, x.data(), 8, y.data(), 16);
  matmul(ctx, w.m, x.data(), 1, y.data(), 16);
  EXPECT_EQ(p, ctx.act_scratch.data());
  EXPECT_EQ(cap, ctx.act_scratch.capacity());
}

// The dedicated Q8_0 matvec (AVX-512) works on groups of 16 blocks and pairs of blocks: cover
// the real lm_head width (20 blocks), an odd count past one group (21) and the widest (256).
TEST(SimdQ8_0, MatvecGroupsAndOddBlocks) {
  Rng rng(77);
  for (int64_t nblk : {2, 16, 17, 20, 21, 256, 257}) {
    auto w = test::make_matrix(rng, DType::Q8_0, 45, 32 * nblk, test::Pattern::kRandom);
    const auto x = test::make_values(rng, 32 * nblk, test::Pattern::kRandom);
    for (Isa isa : test::available_isas())
      for (int threads : {1, 2}) check(w, x, 1, isa, threads, "Q8_0 blocks=" + std::to_string(nblk));
  }
}

// AMX vs the AVX-512 VNNI path: same quantized activations (so no Q8_0 rounding-tie differences
// with the reference, which large random inputs do hit), identical int32 sums and, since the
// canonical order (cpu.h), bitwise equal results (test_batch_invariance.cpp checks that exactly).
void check_amx_vs_vnni(const test::TestMatrix& w, const std::vector<float>& x, int64_t ntok, int threads,
                       const std::string& what) {
  const int64_t rows = w.m.n_rows, ldy = rows + 5;
  std::vector<float> y((size_t)(ntok * ldy), -777.f), yv((size_t)(ntok * rows));
  MatmulContext ctx;
  ctx.isa = Isa::kAvx512;
  ctx.pool = threads > 1 ? &pool2() : nullptr;
  matmul(ctx, w.m, x.data(), ntok, y.data(), ldy);
  ctx.allow_amx = false;
  matmul(ctx, w.m, x.data(), ntok, yv.data(), rows);
  const auto scale = test::abs_scale(w.m, x, ntok);
  int bad = 0;
  for (int64_t t = 0; t < ntok; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const double got = y[(size_t)(t * ldy + r)], want = yv[(size_t)(t * rows + r)];
      const double lim = kTolSimdVsRefInt * scale[(size_t)(t * rows + r)] + 1e-30;
      if (!(std::fabs(got - want) <= lim) && bad++ < 3)
        ADD_FAILURE() << what << " amx t=" << t << " r=" << r << " got " << got << " want " << want << " lim " << lim;
    }
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[(size_t)(t * ldy + r)], -777.f) << "wrote past n_rows";
  }
}

// AMX-INT8 path (n_tokens >= 8 on AMX CPUs, >= 2 for Q8_0): 32-row panels and 32-token steps with
// partial rows / tokens, 8-chunk groups with a partial last group, the Q8_0 direct path
// (<= 32 tokens), every data pattern, 1 and 2 threads.
TEST(SimdAmx, PanelsTokensAndPatterns) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-INT8";
  Rng rng(2024);
  const test::Pattern patterns[] = {test::Pattern::kRandom, test::Pattern::kZeroBlocks, test::Pattern::kAllEqual,
                                    test::Pattern::kLarge};
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t blk = block_of(t);
    for (int64_t nblk : blk == 32 ? std::vector<int64_t>{1, 8, 9, 20} : std::vector<int64_t>{1, 3}) {
      const int64_t cols = nblk * blk;
      for (int64_t rows : {1, 17, 33, 67}) {
        for (auto pw : patterns) {
          auto w = test::make_matrix(rng, t, rows, cols, pw);
          for (int64_t ntok : {2, 3, 8, 9, 16, 31, 33, 70}) {
            if (ntok < 8 && t != DType::Q8_0) continue;  // only Q8_0 takes AMX below 8 tokens
            const auto px = pw == test::Pattern::kRandom ? test::Pattern::kZeroBlocks : pw;
            const auto x = test::make_values(rng, cols * ntok, ntok % 2 ? px : test::Pattern::kRandom);
            const std::string what = std::string(dtype_name(t)) + " rows=" + std::to_string(rows) + " cols=" +
                                     std::to_string(cols) + " ntok=" + std::to_string(ntok) + " pw=" + std::to_string((int)pw);
            check_amx_vs_vnni(w, x, ntok, ntok % 3 ? 1 : 2, what);
          }
        }
      }
    }
  }
}

// Q8_0 direct path (raw weight rows as tiles): widest supported row (256 blocks), one past it
// (general AMX path), partial last panel, one and two token tiles.
TEST(SimdAmx, Q8_0DirectWidths) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-INT8";
  Rng rng(11);
  for (int64_t nblk : {2, 20, 256, 257}) {
    auto w = test::make_matrix(rng, DType::Q8_0, 45, 32 * nblk, test::Pattern::kRandom);
    for (int64_t ntok : {2, 8, 17, 32}) {
      const auto x = test::make_values(rng, 32 * nblk * ntok, test::Pattern::kRandom);
      for (int threads : {1, 2})
        check_amx_vs_vnni(w, x, ntok, threads, "Q8_0 blocks=" + std::to_string(nblk) + " ntok=" + std::to_string(ntok));
    }
  }
}

// Prefill-sized token counts on model-like widths.
TEST(SimdAmx, ManyTokens) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-INT8";
  Rng rng(7);
  for (DType t : {DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    auto w = test::make_matrix(rng, t, 48, t == DType::Q5_0 || t == DType::Q8_0 ? 640 : 1024, test::Pattern::kRandom);
    for (int64_t ntok : {100, 512, 600}) {
      const auto x = test::make_values(rng, w.m.n_cols * ntok, test::Pattern::kRandom);
      for (int threads : {1, 2}) check_amx_vs_vnni(w, x, ntok, threads, std::string(dtype_name(t)) + " ntok=" + std::to_string(ntok));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SimdVsRef, ::testing::ValuesIn(test::all_weight_types()),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// The AVX-512 quantizer of the 32-element block formats (16 blocks reduced at once) writes the
// AVX2 one's bytes: q (int8, or biased u = q + 128 against the AVX-512 kernels' own), d and, for Q8_1,
// s; rows of 1-40 blocks (a tail of fewer than 16 padded), every data pattern, exact ties of |x|.
TEST(SimdQuantizer, Avx512BlocksOf16MatchAvx2) {
  if (detect_isa() < Isa::kAvx512) GTEST_SKIP() << "needs AVX-512";
  Rng rng(17);
  for (DType wt : {DType::Q8_0, DType::Q4_1}) {
    for (bool biased : {false, true}) {
      cpu::KernelSet ks;  // the reference: the AVX2 quantizer (int8) or the AVX-512 kernels' (biased)
      ASSERT_TRUE(biased ? cpu::kernels_avx512(wt, &ks) : cpu::kernels_avx2(wt, &ks));
      auto fn = biased ? &cpu::quantize_q8_32_avx512_biased : &cpu::quantize_q8_32_avx512;
      for (int64_t nb : {1, 2, 15, 16, 17, 18, 32, 40, 48}) {
        const int64_t n = 32 * nb;
        const auto L = cpu::act_layout(ks.act, n);
        for (auto p : {test::Pattern::kRandom, test::Pattern::kZeroBlocks, test::Pattern::kAllEqual,
                       test::Pattern::kLarge}) {
          auto x = test::make_values(rng, n, p);
          if (nb > 3) {  // both signs reaching a block's amax, and a block's amax at its last element
            x[40] = 3.5f, x[41] = -3.5f;
            x[95] = 9.f;
          }
          std::vector<uint8_t> want(L.stride, 0xAB), got(L.stride, 0xAB);
          ks.quantize(x.data(), want.data(), L);
          fn(x.data(), got.data(), L);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), (size_t)n)) << dtype_name(wt) << " q, blocks " << nb;
          ASSERT_EQ(0, std::memcmp(want.data() + L.off_d, got.data() + L.off_d, (size_t)nb * 4)) << "d, blocks " << nb;
          if (ks.act == cpu::ActKind::kQ8_1) {
            ASSERT_EQ(0, std::memcmp(want.data() + L.off_s, got.data() + L.off_s, (size_t)nb * 4)) << "s, blocks " << nb;
          }
        }
      }
    }
  }
}

// The SIMD Q8_K quantizer is bit-exact with quantize_row_q8_K_ref; Q8_0 may differ by one unit
// on ties (ggml's AVX2 quantizer rounds half to even), so random data must match exactly.
TEST(SimdQuantizer, MatchesRefOnRandomData) {
  Rng rng(3);
  for (Isa isa : test::available_isas()) {
    if (isa == Isa::kScalar) continue;
    for (DType wt : {DType::Q8_0, DType::Q4_1, DType::Q4_K}) {
      cpu::KernelSet ks;
      ASSERT_TRUE(isa == Isa::kAvx512 ? cpu::kernels_avx512(wt, &ks) : cpu::kernels_avx2(wt, &ks));
      const int64_t n = 512;
      const auto L = cpu::act_layout(ks.act, n);
      for (auto p : {test::Pattern::kRandom, test::Pattern::kZeroBlocks, test::Pattern::kLarge}) {
        const auto x = test::make_values(rng, n, p);
        std::vector<uint8_t> packed(L.stride);
        ks.quantize(x.data(), packed.data(), L);
        const DType at = vec_dot_type(wt);
        std::vector<uint8_t> ref(row_bytes(at, n));
        quantize_row_ref(at, x.data(), ref.data(), n);
        std::vector<float> deq_ref((size_t)n);
        dequantize_row_ref(at, ref.data(), deq_ref.data(), n);
        const int64_t blk = ks.act == cpu::ActKind::kQ8_K ? 256 : 32;
        const auto* d = reinterpret_cast<const float*>(packed.data() + L.off_d);
        for (int64_t i = 0; i < n; ++i) {
          int q = packed[(size_t)i];
          q = isa == Isa::kAvx512 ? q - 128 : (int)(int8_t)q;
          ASSERT_EQ((float)q * d[i / blk], deq_ref[(size_t)i]) << isa_name(isa) << " " << dtype_name(at) << " i=" << i;
        }
      }
    }
  }
}

// Q8_K's scale takes the sign of the first element with the largest |x|: cover a block where
// only +amax, only -amax, and both (in either order) occur.
TEST(SimdQuantizer, Q8_KSignOfFirstMax) {
  for (Isa isa : test::available_isas()) {
    if (isa == Isa::kScalar) continue;
    cpu::KernelSet ks;
    ASSERT_TRUE(isa == Isa::kAvx512 ? cpu::kernels_avx512(DType::Q4_K, &ks) : cpu::kernels_avx2(DType::Q4_K, &ks));
    const int64_t n = 256;
    const auto L = cpu::act_layout(ks.act, n);
    for (int c = 0; c < 4; ++c) {
      std::vector<float> x((size_t)n);
      for (int64_t i = 0; i < n; ++i) x[(size_t)i] = 0.01f * (float)((i * 37) % 101 - 50);
      if (c == 0 || c == 2) x[40] = 3.f;
      if (c == 1 || c == 2) x[200] = -3.f;
      if (c == 3) { x[10] = -3.f; x[250] = 3.f; }
      std::vector<uint8_t> packed(L.stride);
      ks.quantize(x.data(), packed.data(), L);
      std::vector<uint8_t> ref(row_bytes(DType::Q8_K, n));
      quantize_row_ref(DType::Q8_K, x.data(), ref.data(), n);
      float dref;
      std::memcpy(&dref, ref.data(), 4);
      EXPECT_EQ(reinterpret_cast<const float*>(packed.data() + L.off_d)[0], dref) << isa_name(isa) << " case " << c;
      for (int64_t i = 0; i < n; ++i) {
        const int q = isa == Isa::kAvx512 ? (int)packed[(size_t)i] - 128 : (int)(int8_t)packed[(size_t)i];
        ASSERT_EQ(q, (int)(int8_t)ref[4 + (size_t)i]) << isa_name(isa) << " case " << c << " i=" << i;
      }
    }
  }
}

TEST(Dispatch, DetectIsaAndNames) {
  const Isa isa = detect_isa();
  EXPECT_STRNE(isa_name(isa), "unknown");
  std::vector<float> a(64, 1.f), b(64);
  std::vector<uint8_t> q(row_bytes(DType::Q8_0, 64));
  quantize_row_ref(DType::Q8_0, a.data(), q.data(), 64);
  dequantize_row(DType::Q8_0, q.data(), b.data(), 64);
  EXPECT_NEAR(b[10], 1.f, 1e-4f);  // d = f16(1/127)
}

}  // namespace
}  // namespace dspark::kernels
