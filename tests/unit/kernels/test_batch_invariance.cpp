// Batch invariance of kernels::matmul (cpu/cpu.h, "BATCH INVARIANCE"): for every weight type and
// every ISA this CPU has, row t of a multi-token product is bitwise identical (memcmp) to token t
// computed alone with n_tokens = 1, whatever n_tokens, the thread count (1 or 2), and whether the
// AMX path runs; and all ISAs (scalar, AVX2, AVX-512 VNNI, AMX) agree bitwise with each other. Speculative decoding relies on this to reproduce serial greedy output exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace dspark::kernels {
namespace {

ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

struct Mode {
  Isa isa;
  bool amx;
  std::string name() const { return std::string(isa_name(isa)) + (amx ? "+amx" : ""); }
};

std::vector<Mode> modes() {
  std::vector<Mode> v;
  for (Isa isa : test::available_isas()) v.push_back({isa, false});
  if (detect_isa() >= Isa::kAvx512 && amx_available()) v.push_back({Isa::kAvx512, true});
  return v;
}

void run(const test::TestMatrix& w, const float* x, int64_t ntok, const Mode& m, int threads, float* y, int64_t ldy) {
  MatmulContext ctx;
  ctx.isa = m.isa;
  ctx.allow_amx = m.amx;
  ctx.pool = threads > 1 ? &pool2() : nullptr;
  matmul(ctx, w.m, x, ntok, y, ldy);
}

// Every row of the batched product equals the token computed alone (1 thread, same mode), and
// with AMX enabled also the same token in the VNNI-only mode (ISA-level invariance).
void check_type(DType t, int64_t rows, int64_t cols, const std::vector<int64_t>& ntoks, uint64_t seed) {
  Rng rng(seed);
  auto w = test::make_matrix(rng, t, rows, cols, test::Pattern::kRandom);
  int64_t max_tok = 0;
  for (int64_t n : ntoks) max_tok = std::max(max_tok, n);
  const auto x = test::make_values(rng, cols * max_tok, test::Pattern::kRandom);
  const std::vector<Mode> ms = modes();
  std::vector<float> first;  // the first mode's single-token results
  for (const Mode& m : ms) {
    // Reference: each token alone.
    std::vector<float> single((size_t)(max_tok * rows));
    for (int64_t tk = 0; tk < max_tok; ++tk) run(w, x.data() + tk * cols, 1, m, 1, single.data() + tk * rows, rows);
    // All ISAs share the quantizers and the canonical order: bitwise equal too.
    if (first.empty()) first = single;
    else
      ASSERT_EQ(0, std::memcmp(first.data(), single.data(), single.size() * 4))
          << dtype_name(t) << " " << m.name() << " differs from " << ms[0].name();
    if (m.amx) {  // AMX mode (n_tokens = 1 never takes AMX) vs pure VNNI: also compare VNNI batches
      std::vector<float> v((size_t)(max_tok * rows));
      run(w, x.data(), max_tok, {Isa::kAvx512, false}, 2, v.data(), rows);
      ASSERT_EQ(0, std::memcmp(v.data(), single.data(), v.size() * 4)) << dtype_name(t) << " vnni batch vs single";
    }
    for (int64_t ntok : ntoks) {
      for (int threads : {1, 2}) {
        // Start the batch at a token offset so token t sits at different batch positions.
        for (int64_t off : {(int64_t)0, max_tok - ntok}) {
          const int64_t ldy = rows + 3;
          std::vector<float> y((size_t)(ntok * ldy), -777.f);
          run(w, x.data() + off * cols, ntok, m, threads, y.data(), ldy);
          for (int64_t tk = 0; tk < ntok; ++tk) {
            const float* got = y.data() + tk * ldy;
            const float* want = single.data() + (off + tk) * rows;
            if (std::memcmp(got, want, (size_t)rows * 4) != 0) {
              int64_t r = 0;
              while (got[r] == want[r] || (got[r] != got[r] && want[r] != want[r])) ++r;
              FAIL() << dtype_name(t) << " " << m.name() << " rows=" << rows << " cols=" << cols << " ntok=" << ntok
                     << " threads=" << threads << " off=" << off << " t=" << tk << " r=" << r << ": " << got[r]
                     << " vs alone " << want[r];
            }
            for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(got[r], -777.f) << "wrote past n_rows";
          }
        }
      }
    }
  }
}

const std::vector<int64_t> kTokens{1, 2, 3, 5, 8, 9, 16, 17, 64, 300};

class BatchInvariance : public ::testing::TestWithParam<DType> {};

TEST_P(BatchInvariance, ModelShapes) {
  const DType t = GetParam();
  const int64_t blk = dtype_info(t).block_elems == 1 ? 32 : dtype_info(t).block_elems;
  if (blk == 32) {
    check_type(t, 83, 640, kTokens, 1);      // q/k/v/up/gate width, rows not a multiple of 16
    check_type(t, 45, 2048, {1, 2, 5, 9, 17, 40}, 2);
    check_type(t, 21, 32 * 21, {1, 2, 3, 8, 33}, 3);  // odd block count
  } else {
    check_type(t, 83, 1024, kTokens, 1);  // attn_output width
    check_type(t, 45, 2048, {1, 2, 5, 9, 17, 40}, 2);
    check_type(t, 19, 256, {1, 2, 8, 33}, 3);
  }
}

TEST(BatchInvariance, Q8_0LmHeadLike) {
  // Q8_0 [rows, 640]: matvec for 1 token, AMX direct (<= 32 tokens) or VNNI tiles for more.
  check_type(DType::Q8_0, 1000, 640, {1, 2, 3, 5, 8, 16, 17, 32, 33, 64}, 4);
  // Widest matvec (256 blocks) and one past it (no matvec), odd count.
  check_type(DType::Q8_0, 37, 32 * 256, {1, 2, 9}, 5);
  check_type(DType::Q8_0, 37, 32 * 257, {1, 2, 9}, 6);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, BatchInvariance, ::testing::ValuesIn(test::all_weight_types()),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dspark::kernels
