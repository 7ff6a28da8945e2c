// Teacher-forced next-token distributions vs llama.cpp over > 4,000 positions of real text
// (tests/goldens/teacher_forced.{bin,json}, written by scripts/gen_goldens.py).
#include <cmath>
#include <cstring>

#include "real_model.h"

namespace dspark::testing {
namespace {

// Mean KL(llama.cpp || dspark) bar from issue #2; measured 0.0050 (2026-11-29).
constexpr double kMaxMeanKl = 0.01;
// Overall top-1 agreement. Issue #2 asked for 0.99; loosened with cause: this Q4_K_M model under
// 8-bit activation quantization is chaotic at the ulp level. llama.cpp against itself (batch 512
// vs token by token, same build, scripts/llama_noise_floor.py) agrees on only 94.5% of top-1s
// (mean KL 0.0067), and a 1-ulp change of one RMSNorm scale in our own forward gives 94.3%. We
// measure 94.8% against llama.cpp, i.e. at that floor; 0.93 keeps a margin below it.
constexpr double kMinTop1Agreement = 0.93;
// Where llama.cpp's top-1 leads top-2 by at least this many logits the choice is not a
// rounding artefact, and there we require agreement (measured: 1 flip in 1,929 positions).
constexpr double kStableMargin = 1.0;
constexpr double kMinStableTop1Agreement = 0.999;
// Positions whose llama.cpp top-1/top-2 logit margin is below this are near-ties: a flipped
// argmax there is expected from rounding differences and counted separately.
constexpr double kNearTieMargin = 0.05;

// SmolLM2 bounds. llama.cpp against itself (batch 512 vs token by token, 512 positions,
// scripts/llama_noise_floor.py --goldens smollm2): top-1 0.9746, mean KL 0.00319. We measure
// (2026-12-02, 4,188 positions) top-1 0.9553, mean KL 0.00288, and 1.0000 where llama.cpp's
// margin >= 1. The same bars as Gemma's keep a margin below both.
constexpr double kSmolMaxMeanKl = 0.01;
constexpr double kSmolMinTop1Agreement = 0.93;

struct TeacherForced {
  uint32_t n_seq = 0, top_k = 0, n_pos = 0, n_vocab = 0;
  std::vector<uint32_t> seq_len;
  std::vector<int32_t> tokens, top_ids;
  std::vector<float> top_lp, margin;
};

// dir: "" for the default model's goldens, "smollm2/" for tests/goldens/smollm2/.
bool read_golden(const std::string& dir, TeacherForced* g) {
  std::ifstream in(golden_path(dir + "teacher_forced.bin"), std::ios::binary);
  if (!in) return false;
  const auto meta = nlohmann::json::parse(std::ifstream(golden_path(dir + "teacher_forced.json")));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 24 || std::memcmp(bytes.data(), "DSTF", 4) != 0) return false;
  auto u32 = [&](size_t off) { uint32_t v; std::memcpy(&v, bytes.data() + off, 4); return v; };
  if (u32(4) != 1) return false;
  g->n_seq = u32(8); g->top_k = u32(12); g->n_pos = u32(16); g->n_vocab = u32(20);
  for (uint32_t i = 0; i < g->n_seq; ++i) g->seq_len.push_back(u32(24 + 4 * i));
  for (const auto& s : meta["sections"]) {
    const size_t off = s["offset"], nb = s["nbytes"];
    if (off + nb > bytes.size()) return false;
    const std::string name = s["name"];
    auto copy = [&](auto& v) { v.resize(nb / sizeof(v[0])); std::memcpy(v.data(), bytes.data() + off, nb); };
    if (name == "tokens") copy(g->tokens);
    else if (name == "top_ids") copy(g->top_ids);
    else if (name == "top_logprobs") copy(g->top_lp);
    else if (name == "top1_top2_logit_margin") copy(g->margin);
  }
  return g->tokens.size() == g->n_pos && g->top_ids.size() == (size_t)g->n_pos * g->top_k;
}

struct TfBounds {
  double max_mean_kl, min_top1, min_stable_top1;
};

void check_teacher_forced(const runtime::LoadedModel& lm, const std::string& dir, const TfBounds& b) {
  TeacherForced g;
  ASSERT_TRUE(read_golden(dir, &g)) << "cannot read tests/goldens/" << dir << "teacher_forced.bin";
  const auto& model = *lm.model;
  const int64_t n_vocab = model.config().n_vocab;
  ASSERT_EQ(g.n_vocab, (uint32_t)n_vocab);
  constexpr int64_t kChunk = 64;  // all-position logits for 64 rows = 64 MiB
  model::Session s(model, {.n_ctx = 2048, .max_batch = kChunk}, &test_pool());
  double kl_sum = 0, kl_max = 0;
  int64_t agree = 0, n = 0, flips_near_tie = 0, flips_clear = 0, n_stable = 0, agree_stable = 0;
  std::vector<double> lp_ours(g.top_k);
  size_t start = 0;
  for (uint32_t q = 0; q < g.n_seq; ++q) {
    s.kv().clear();
    const uint32_t len = g.seq_len[q];
    for (uint32_t c0 = 0; c0 < len; c0 += kChunk) {
      const uint32_t m = std::min<uint32_t>(kChunk, len - c0);
      ASSERT_TRUE(model.forward(s, std::span<const int32_t>(g.tokens.data() + start + c0, m),
                                {model::LogitsMode::kAll, {}}).is_ok());
      for (uint32_t r = 0; r < m; ++r) {
        const size_t p = start + c0 + r;
        const float* lg = s.logits() + (size_t)r * n_vocab;
        float mx = lg[0];
        int64_t arg = 0;
        for (int64_t v = 1; v < n_vocab; ++v)
          if (lg[v] > mx) { mx = lg[v]; arg = v; }
        double z = 0;
        for (int64_t v = 0; v < n_vocab; ++v) z += std::exp((double)lg[v] - mx);
        const double lse = mx + std::log(z);
        // KL(llama || ours) over llama's top-k plus one bucket for the rest: a lower bound of the
        // full KL by the data-processing inequality, exact when the rest carries no mass.
        double kl = 0, pl_top = 0, pd_top = 0;
        for (uint32_t k = 0; k < g.top_k; ++k) {
          const double lpl = g.top_lp[p * g.top_k + k];
          const double lpd = lg[g.top_ids[p * g.top_k + k]] - lse;
          kl += std::exp(lpl) * (lpl - lpd);
          pl_top += std::exp(lpl);
          pd_top += std::exp(lpd);
        }
        const double pl_rest = std::max(0.0, 1 - pl_top), pd_rest = std::max(1e-12, 1 - pd_top);
        if (pl_rest > 1e-12) kl += pl_rest * std::log(pl_rest / pd_rest);
        kl_sum += kl;
        kl_max = std::max(kl_max, kl);
        ++n;
        // Test diagnostics: DSPARK_TF_VERBOSE=1 lists every flip.
        if (std::getenv("DSPARK_TF_VERBOSE") && arg != g.top_ids[p * g.top_k])
          std::printf("seq %u pos %u: ours %lld llama %d margin %.3f kl %.4f\n", q, c0 + r, (long long)arg,
                      g.top_ids[p * g.top_k], g.margin[p], kl);
        const bool same = arg == g.top_ids[p * g.top_k];
        if (same) ++agree;
        else if (g.margin[p] < kNearTieMargin) ++flips_near_tie;
        else ++flips_clear;
        if (g.margin[p] >= kStableMargin) {
          ++n_stable;
          agree_stable += same;
        }
      }
    }
    start += len;
  }
  const double top1 = (double)agree / n, mean_kl = kl_sum / n, top1_stable = (double)agree_stable / n_stable;
  std::printf("teacher-forced: %lld positions, top-1 agreement %.4f (%lld flips at near-ties < %.2f, %lld clear), "
              "mean KL %.5f, max KL %.4f; top-1 agreement where llama.cpp's margin >= %.1f: %.4f of %lld\n",
              (long long)n, top1, (long long)flips_near_tie, kNearTieMargin, (long long)flips_clear, mean_kl, kl_max,
              kStableMargin, top1_stable, (long long)n_stable);
  EXPECT_GE(n, 4000);
  EXPECT_GE(top1, b.min_top1);
  EXPECT_LE(mean_kl, b.max_mean_kl);
  EXPECT_GE(top1_stable, b.min_stable_top1);
}

TEST(TeacherForcedGolden, Top1AgreementAndKlVsLlamaCpp) {
  DSPARK_REQUIRE_REAL_MODEL();
  check_teacher_forced(*real_model(), "", {kMaxMeanKl, kMinTop1Agreement, kMinStableTop1Agreement});
}

// SmolLM2-135M-Instruct Q4_1 (tests/goldens/smollm2/). Bounds from its own noise floor
// (scripts/llama_noise_floor.py --goldens smollm2), see docs/TESTING.md.
TEST(TeacherForcedGolden, Smollm2Top1AgreementAndKlVsLlamaCpp) {
  DSPARK_REQUIRE_SMOLLM2();
  check_teacher_forced(*real_smollm2(), "smollm2/", {kSmolMaxMeanKl, kSmolMinTop1Agreement, kMinStableTop1Agreement});
}

}  // namespace
}  // namespace dspark::testing
