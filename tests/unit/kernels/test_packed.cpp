// The packed "x8" / "x16" matvec / verify kernels (kernels/packed.h) against the canonical kernels: for
// Q8_0, Q4_1, Q4_0, Q5_0, Q4_K and Q6_K, row counts that are and are not multiples of 8, 1 to 40 tokens
// (several token groups), 1 and 2 threads and several value patterns, matmul over the packed copy
// (AVX2, and AVX-512 VNNI where this CPU runs it, each ISA's own layout) is bitwise (memcmp) equal to the scalar canonical
// kernel and to the unpacked AVX2 kernel. Batch invariance therefore holds
// across the packed and unpacked paths (spec == serial whatever the window size).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/packed.h"

namespace dspark::kernels {
namespace {

void product(const QMatrix& w, const std::vector<float>& x, int64_t ntok, Isa isa, ThreadPool* pool,
             std::vector<float>* y) {
  MatmulContext ctx;
  ctx.isa = isa;
  ctx.pool = pool;
  y->assign((size_t)(ntok * w.n_rows), -777.f);
  matmul(ctx, w, x.data(), ntok, y->data(), w.n_rows);
}

// The ISAs whose packed kernels this CPU runs: AVX2, and AVX-512 VNNI where the CPU has it without AMX.
std::vector<Isa> packed_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (isa <= detect_isa() && pack_supported(DType::Q8_0, isa)) v.push_back(isa);
  return v;
}

TEST(Packed, SupportedTypesAndSize) {
  EXPECT_TRUE(pack_supported(DType::Q8_0, Isa::kAvx2));
  EXPECT_TRUE(pack_supported(DType::Q4_1, Isa::kAvx2));
  EXPECT_TRUE(pack_supported(DType::Q5_0, Isa::kAvx2));
  EXPECT_TRUE(pack_supported(DType::Q4_0, Isa::kAvx2));
  EXPECT_FALSE(pack_supported(DType::Q5_K, Isa::kAvx2));
  EXPECT_FALSE(pack_supported(DType::Q8_0, Isa::kScalar));
  EXPECT_EQ(pack_supported(DType::Q8_0, Isa::kAvx512), !amx_available());  // AMX CPUs keep the unpacked kernels
  QMatrix w{DType::Q4_1, 13, 64, nullptr, row_bytes(DType::Q4_1, 64)};
  EXPECT_EQ(packed_bytes(w), (size_t)2 * 2 * 8 * 20);  // 2 groups (13 rows -> 16) x 2 blocks x 8 rows
  // Q4_0 is widened to Q8_0 records (34 bytes per block); Q5_0 keeps its 22 in its own record.
  EXPECT_EQ(packed_record_type(DType::Q4_0), DType::Q8_0);
  QMatrix w4{DType::Q4_0, 13, 64, nullptr, row_bytes(DType::Q4_0, 64)};
  EXPECT_EQ(packed_bytes(w4), (size_t)2 * 2 * 8 * 34);
  EXPECT_EQ(packed_record_type(DType::Q5_0), DType::Q5_0);
  QMatrix w5{DType::Q5_0, 13, 64, nullptr, row_bytes(DType::Q5_0, 64)};
  EXPECT_EQ(packed_bytes(w5), (size_t)2 * 2 * 8 * 22);
  EXPECT_TRUE(pack_supported(DType::Q4_K, Isa::kAvx2));
  QMatrix wk{DType::Q4_K, 13, 512, nullptr, row_bytes(DType::Q4_K, 512)};
  EXPECT_EQ(packed_bytes(wk), (size_t)2 * 2 * kPackedQ4KRecordBytes);
  EXPECT_TRUE(pack_supported(DType::Q6_K, Isa::kAvx2));
  QMatrix w6{DType::Q6_K, 13, 512, nullptr, row_bytes(DType::Q6_K, 512)};
  EXPECT_EQ(packed_bytes(w6), (size_t)2 * 2 * kPackedQ6KRecordBytes);
  // x16 records under AVX-512 VNNI only: 13 rows -> one group of 16.
  EXPECT_EQ(packed_bytes(w4, 16), (size_t)1 * 2 * kPackedQ8_0x16RecordBytes);
  EXPECT_EQ(packed_record_bytes(DType::Q8_0, 16), kPackedQ8_0x16RecordBytes);
  EXPECT_EQ(packed_group_rows(DType::Q8_0, Isa::kAvx2), 8);
  EXPECT_EQ(packed_group_rows(DType::Q5_0, Isa::kAvx512), amx_available() ? 8 : 16);
  EXPECT_EQ(packed_group_rows(DType::Q4_1, Isa::kAvx512), amx_available() ? 8 : 16);
  EXPECT_EQ(packed_group_rows(DType::Q6_K, Isa::kAvx512), amx_available() ? 8 : 16);
  EXPECT_EQ(packed_bytes(wk, 16), (size_t)1 * 2 * 2 * kPackedQ4KRecordBytes);  // x16: twice the x8 record
  EXPECT_EQ(packed_bytes(w6, 16), (size_t)1 * 2 * 2 * kPackedQ6KRecordBytes);
  EXPECT_EQ(packed_bytes(w5, 16), (size_t)1 * 2 * kPackedQ5_0x16RecordBytes);
  EXPECT_EQ(packed_group_rows(DType::Q8_0, Isa::kAvx512), amx_available() ? 8 : 16);
  EXPECT_EQ(packed_group_rows(DType::Q4_0, Isa::kAvx512), amx_available() ? 8 : 16);
}

// A copy packed for one ISA is not used under another whose layout differs: matmul falls back to the
// unpacked kernels (same bits), and packed_usable says so (fused packed-only matrices need it).
TEST(Packed, LayoutMismatchIsNotUsed) {
  if (detect_isa() < Isa::kAvx512 || amx_available()) GTEST_SKIP() << "needs AVX-512 VNNI without AMX";
  Rng rng(3);
  auto w = test::make_matrix(rng, DType::Q8_0, 40, 96, test::Pattern::kRandom);
  std::vector<uint8_t> packed(packed_bytes(w.m, 16));
  QMatrix wp = w.m;
  attach_packed(&wp, Isa::kAvx512, packed.data());
  EXPECT_EQ(wp.packed_rows, 16);
  EXPECT_TRUE(packed_usable(wp, Isa::kAvx512));
  EXPECT_FALSE(packed_usable(wp, Isa::kAvx2));
  EXPECT_NE(matmul_path(wp, Isa::kAvx512, false).kernel.find("packed x16"), std::string::npos);
  EXPECT_EQ(matmul_path(wp, Isa::kAvx2, false).kernel.find("packed"), std::string::npos);
  const auto x = test::make_values(rng, 3 * 96, test::Pattern::kRandom);
  std::vector<float> ref, got;
  product(w.m, x, 3, Isa::kScalar, nullptr, &ref);
  product(wp, x, 3, Isa::kAvx2, nullptr, &got);
  ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * 4));
}

TEST(Packed, BitwiseEqualToCanonicalKernels) {
  if (detect_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2";
  ThreadPool pool2(2);
  Rng rng(11);
  for (DType t : {DType::Q8_0, DType::Q4_1, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q6_K})
    for (int64_t rows : {8, 13, 40, 77})
      for (int64_t cols : t == DType::Q4_K || t == DType::Q6_K ? std::vector<int64_t>{256, 512, 1280} : std::vector<int64_t>{32, 96, 576})
        for (auto pat : {test::Pattern::kRandom, test::Pattern::kZeroBlocks, test::Pattern::kAllEqual,
                         test::Pattern::kLarge}) {
          auto w = test::make_matrix(rng, t, rows, cols, pat);
          std::vector<std::vector<uint8_t>> packed;
          std::vector<QMatrix> wp;  // per packed ISA: its own layout
          for (Isa isa : packed_isas()) {
            packed.emplace_back(packed_bytes(w.m, packed_group_rows(t, isa)));
            wp.push_back(w.m);
            attach_packed(&wp.back(), isa, packed.back().data());
          }
          for (int64_t ntok : {1, 2, 3, 5, 8, 16, 17, 40}) {
            const auto x = test::make_values(rng, ntok * cols, pat);
            std::vector<float> ref, plain, got;
            product(w.m, x, ntok, Isa::kScalar, nullptr, &ref);
            product(w.m, x, ntok, Isa::kAvx2, nullptr, &plain);
            ASSERT_EQ(0, std::memcmp(ref.data(), plain.data(), ref.size() * 4));
            for (size_t i = 0; i < wp.size(); ++i)
              for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2}) {
                const Isa isa = packed_isas()[i];
                product(wp[i], x, ntok, isa, pool, &got);
                ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * 4))
                    << dtype_name(t) << " rows " << rows << " cols " << cols << " tokens " << ntok << " pattern "
                    << (int)pat << " threads " << (pool ? 2 : 1) << " " << isa_name(isa) << " x" << wp[i].packed_rows;
              }
          }
        }
}

// A token's row is the same alone and at every position of a long batch over the packed copy (the
// matrix is taller than one row block, so prefill's row and token blocking is exercised).
TEST(Packed, WindowsMatchSingleTokens) {
  if (detect_isa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2";
  Rng rng(5);
  for (DType t : {DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q6_K}) {
    auto w = test::make_matrix(rng, t, 1029, 2048, test::Pattern::kRandom);
    const int64_t n = 37;
    const auto x = test::make_values(rng, n * 2048, test::Pattern::kRandom);
    for (Isa isa : packed_isas()) {
      std::vector<uint8_t> packed(packed_bytes(w.m, packed_group_rows(t, isa)));
      QMatrix wp = w.m;
      attach_packed(&wp, isa, packed.data());
      std::vector<float> all;
      product(wp, x, n, isa, nullptr, &all);
      for (int64_t tk = 0; tk < n; ++tk) {
        std::vector<float> xi(x.begin() + tk * 2048, x.begin() + (tk + 1) * 2048), one;
        product(wp, xi, 1, isa, nullptr, &one);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + tk * 1029, 1029 * 4))
            << dtype_name(t) << " token " << tk << " " << isa_name(isa);
      }
    }
  }
}

}  // namespace
}  // namespace dspark::kernels
