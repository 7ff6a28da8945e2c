// The exact greedy head on the real targets: step by step along a greedy continuation, and over
// verify windows, the argmax-only forward gives the full head's argmax, and every entry it keeps
// holds the full head's bits. Gemma 3's Q8_0 head is 72 % of its bytes and gets one; SmolLM2's is
// 30 % and does not (ArgmaxHead::kMinHeadShare), so there argmax_only changes nothing.
#include <cstdio>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "real_model.h"

namespace dspark::testing {
namespace {

// max_kept_share: the largest share of logits entries the screen may keep (fallback and unscreened
// rows count whole).
void check_model(const runtime::LoadedModel& lm, double max_kept_share) {
  const auto& model = *lm.model;
  ASSERT_NE(model.argmax_head(), nullptr) << "a Q8_0 head that is most of the bytes gets the exact greedy head";
  const int64_t V = model.config().n_vocab;
  const model::SessionOptions so{.n_ctx = 512, .max_batch = 64};
  const model::ForwardOptions fast_last{model::LogitsMode::kLast, {}, true}, full_last{model::LogitsMode::kLast, {}};
  const model::ForwardOptions fast_all{model::LogitsMode::kAll, {}, true}, full_all{model::LogitsMode::kAll, {}};
  int64_t kept = 0, rows = 0, screened = 0, fallbacks = 0;
  for (const char* text : {"The capital of France is", "def fibonacci(n):\n", "Translate to German: good morning"}) {
    model::Session a(model, so, &test_pool()), b(model, so, &test_pool());
    std::vector<int32_t> ids = lm.tok->encode(text, true, false);
    ASSERT_TRUE(model.forward(a, ids, fast_last).is_ok());
    ASSERT_TRUE(model.forward(b, ids, full_last).is_ok());
    for (int step = 0; step < 40; ++step) {
      const int64_t want = kernels::argmax(b.logits(), V);
      ASSERT_EQ(kernels::argmax(a.logits(), V), want) << text << " step " << step;
      for (int64_t i = 0; i < V; ++i)
        if (a.logits()[i] != -std::numeric_limits<float>::infinity()) {
          ++kept;
          ASSERT_EQ(std::memcmp(a.logits() + i, b.logits() + i, sizeof(float)), 0) << text << " step " << step;
        }
      ++rows;
      const int32_t id = (int32_t)want;
      ASSERT_TRUE(model.forward(a, std::span<const int32_t>(&id, 1), fast_last).is_ok());
      ASSERT_TRUE(model.forward(b, std::span<const int32_t>(&id, 1), full_last).is_ok());
    }
    screened += a.argmax_stats().rows_run;
    fallbacks += a.argmax_stats().fallbacks;
    // A verify window of 8 rows (all-position logits), as speculative decoding at T 0 runs it
    // (ArgmaxHead sends windows to the full head; the argmax must not change either way).
    const std::vector<int32_t> window(ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 8));
    ASSERT_TRUE(model.forward(a, window, fast_all).is_ok());
    ASSERT_TRUE(model.forward(b, window, full_all).is_ok());
    for (size_t r = 0; r < window.size(); ++r)
      EXPECT_EQ(kernels::argmax(a.logits() + r * V, V), kernels::argmax(b.logits() + r * V, V)) << text << " row " << r;
  }
  // The screen must drop most entries, or it saves nothing.
  EXPECT_LE((double)kept, max_kept_share * (double)(rows * V)) << "kept " << (double)kept / (double)(rows * V);
  std::printf("kept %.4f of the entries over %lld rows; %lld rows screened, %lld of them fell back\n",
              (double)kept / (double)(rows * V), (long long)rows, (long long)screened, (long long)fallbacks);
}

TEST(ArgmaxHeadReal, Gemma3GreedyStepsAndWindows) {
  DSPARK_REQUIRE_REAL_MODEL();
  check_model(*real_model(), 0.05);  // measured 2026-12-05: 0.16 %
}

TEST(ArgmaxHeadReal, SmolLM2HasNoneAndGetsTheFullHead) {
  DSPARK_REQUIRE_SMOLLM2();
  const auto& model = *real_smollm2()->model;
  EXPECT_EQ(model.argmax_head(), nullptr);
  // argmax_only is then the full head: the same bits.
  const std::vector<int32_t> ids = real_smollm2()->tok->encode("The capital of France is", true, false);
  model::Session a(model, {.n_ctx = 64, .max_batch = 64}, &test_pool()), b(model, {.n_ctx = 64, .max_batch = 64}, &test_pool());
  ASSERT_TRUE(model.forward(a, ids, {model::LogitsMode::kLast, {}, true}).is_ok());
  ASSERT_TRUE(model.forward(b, ids, {model::LogitsMode::kLast, {}}).is_ok());
  EXPECT_EQ(std::memcmp(a.logits(), b.logits(), sizeof(float) * model.config().n_vocab), 0);
}

}  // namespace
}  // namespace dspark::testing
