// ab_stats on hand-built data: pooled summaries, bootstrap CIs that cover the true value on
// synthetic prompts with a known acceptance change and speed ratio, the verdict boundaries, and
// degenerate inputs (no drafts, one prompt, bad arguments).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "eval/ab_stats.h"

namespace dspark::eval {
namespace {

PromptRecord rec(int64_t tokens, double ms, int64_t drafted = 0, int64_t accepted = 0, int64_t rounds = 0) {
  PromptRecord r;
  r.tokens = tokens;
  r.ms = ms;
  r.drafted = drafted;
  r.accepted = accepted;
  r.rounds = rounds ? rounds : tokens;
  return r;
}

TEST(AbStats, SummarizePoolsRatiosOfSums) {
  std::vector<PromptRecord> p = {rec(10, 100, 8, 6, 4), rec(30, 100, 2, 0, 20)};
  p[0].drafted_by_pos = {4, 4};
  p[0].accepted_by_pos = {3, 2};
  p[1].drafted_by_pos = {2, 0, 0};
  p[1].accepted_by_pos = {0, 0, 0};
  const ArmSummary s = summarize(p);
  EXPECT_EQ(s.n_prompts, 2);
  EXPECT_EQ(s.tokens, 40);
  EXPECT_DOUBLE_EQ(s.tok_s(), 40 * 1e3 / 200);
  EXPECT_DOUBLE_EQ(s.tau(), 40.0 / 24);
  ASSERT_TRUE(s.acceptance());
  EXPECT_DOUBLE_EQ(*s.acceptance(), 6.0 / 10);  // not the mean of 0.75 and 0
  const auto by_pos = s.acceptance_by_pos();
  ASSERT_EQ(by_pos.size(), 3u);
  EXPECT_DOUBLE_EQ(*by_pos[0], 3.0 / 6);
  EXPECT_DOUBLE_EQ(*by_pos[1], 2.0 / 4);
  EXPECT_FALSE(by_pos[2]);  // never drafted
}

TEST(AbStats, SerialArmHasNoAcceptanceAndTauOne) {
  std::vector<PromptRecord> p = {rec(64, 1000), rec(64, 900)};
  const ArmSummary s = summarize(p);
  EXPECT_FALSE(s.acceptance());
  EXPECT_DOUBLE_EQ(s.tau(), 1.0);
  EXPECT_TRUE(s.acceptance_by_pos().empty());
}

TEST(AbStats, PercentileInterpolates) {
  const std::vector<double> v = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 1), 5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.125), 1.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(std::vector<double>{7}, 0.3), 7);
  EXPECT_DOUBLE_EQ(percentile_sorted(std::vector<double>{}, 0.3), 0);
}

// Synthetic prompts: arm A accepts each draft with p_i = 0.6 + e_i (e_i a prompt effect shared
// by both arms), arm B with p_i - 0.05, so the pooled change is -5 points; A spends 20 ms per
// token and B 16 ms, each times noise in [0.8, 1.2], so the speed ratio is 1.25.
constexpr double kTrueDeltaPts = -5.0, kTrueRatio = 1.25;

void synth(Rng& rng, int n, std::vector<PromptRecord>* a, std::vector<PromptRecord>* b) {
  a->clear();
  b->clear();
  for (int i = 0; i < n; ++i) {
    const int64_t drafted = 20 + (int64_t)(rng.uniform() * 60), tokens = 64;
    const double p = 0.6 + (rng.uniform() - 0.5) * 0.4;
    int64_t acc_a = 0, acc_b = 0;
    for (int64_t k = 0; k < drafted; ++k) {
      acc_a += rng.uniform() < p;
      acc_b += rng.uniform() < p - 0.05;
    }
    a->push_back(rec(tokens, tokens * 20 * (0.8 + 0.4 * rng.uniform()), drafted, acc_a, 30));
    b->push_back(rec(tokens, tokens * 16 * (0.8 + 0.4 * rng.uniform()), drafted, acc_b, 30));
  }
}

TEST(AbStats, BootstrapCiContainsTheTrueValues) {
  Rng rng(11);
  std::vector<PromptRecord> a, b;
  synth(rng, 80, &a, &b);
  auto s = paired_bootstrap(a, b, true, {.n_boot = 2000, .level = 0.95, .seed = 3});
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(s->accept_delta_pts);
  const Interval& d = *s->accept_delta_pts;
  EXPECT_EQ(d.n_valid, 2000);
  EXPECT_LT(d.lo, kTrueDeltaPts);
  EXPECT_GT(d.hi, kTrueDeltaPts);
  EXPECT_LE(d.lo, d.point);
  EXPECT_GE(d.hi, d.point);
  EXPECT_LT(s->speed_ratio.lo, kTrueRatio);
  EXPECT_GT(s->speed_ratio.hi, kTrueRatio);
  EXPECT_GT(s->speed_ratio.lo, 1.0);  // 80 prompts resolve a 25% speedup
}

TEST(AbStats, BootstrapCoverageIsNearNominal) {
  // Over many synthetic data sets the 95% interval should hold the truth about 95% of the time
  // (the percentile bootstrap runs a little narrow at small n; 0.88 leaves room for that and
  // for the 200-set sampling error, sd ~0.015).
  Rng rng(2024);
  std::vector<PromptRecord> a, b;
  int cover_d = 0, cover_r = 0;
  const int n_sets = 200;
  for (int t = 0; t < n_sets; ++t) {
    synth(rng, 40, &a, &b);
    auto s = paired_bootstrap(a, b, true, {.n_boot = 400, .level = 0.95, .seed = (uint64_t)t});
    ASSERT_TRUE(s);
    cover_d += s->accept_delta_pts->lo <= kTrueDeltaPts && kTrueDeltaPts <= s->accept_delta_pts->hi;
    cover_r += s->speed_ratio.lo <= kTrueRatio && kTrueRatio <= s->speed_ratio.hi;
  }
  EXPECT_GE(cover_d, 0.88 * n_sets);
  EXPECT_GE(cover_r, 0.88 * n_sets);
  EXPECT_LE(cover_d, n_sets);
}

TEST(AbStats, BootstrapIsReproducibleForASeed) {
  Rng rng(5);
  std::vector<PromptRecord> a, b;
  synth(rng, 30, &a, &b);
  auto s1 = paired_bootstrap(a, b, true, {.n_boot = 500, .seed = 9});
  auto s2 = paired_bootstrap(a, b, true, {.n_boot = 500, .seed = 9});
  auto s3 = paired_bootstrap(a, b, true, {.n_boot = 500, .seed = 10});
  ASSERT_TRUE(s1 && s2 && s3);
  EXPECT_EQ(s1->accept_delta_pts->lo, s2->accept_delta_pts->lo);
  EXPECT_EQ(s1->speed_ratio.hi, s2->speed_ratio.hi);
  EXPECT_NE(s1->speed_ratio.lo, s3->speed_ratio.lo);
}

TEST(AbStats, SerialComparisonSkipsAcceptance) {
  std::vector<PromptRecord> a = {rec(64, 2000), rec(64, 2100)}, b = {rec(64, 1000, 50, 40), rec(64, 1000, 50, 30)};
  auto s = paired_bootstrap(a, b, /*compare_acceptance=*/false, {.n_boot = 100});
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->accept_delta_pts);
  EXPECT_NEAR(s->speed_ratio.point, (128.0 / 2000) / (128.0 / 4100), 1e-12);
}

TEST(AbStats, DecodeSpeedRatioLeavesThePrefillOut) {
  // Both arms spend 600 ms on prefill; B decodes 64 tokens in 200 ms, A in 400 ms. Over the whole
  // call B is 1000 / 800 = 1.25x; after the prefill it is 2x. No prefill recorded: no decode ratio.
  std::vector<PromptRecord> a = {rec(64, 1000)}, b = {rec(64, 800, 40, 30)};
  a[0].prefill_ms = b[0].prefill_ms = 600;
  auto s = paired_bootstrap(a, b, true, {.n_boot = 50});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->speed_ratio.point, 1.25);
  ASSERT_TRUE(s->decode_speed_ratio);
  EXPECT_DOUBLE_EQ(s->decode_speed_ratio->point, 2.0);
  EXPECT_DOUBLE_EQ(s->decode_speed_ratio->lo, 2.0);
  EXPECT_EQ(s->decode_speed_ratio->n_valid, 50);
  EXPECT_DOUBLE_EQ(summarize(b).decode_tok_s(), 64 * 1e3 / 200);
  a[0].prefill_ms = 0;
  auto t = paired_bootstrap(a, b, true, {.n_boot = 50});
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->decode_speed_ratio);
}

TEST(AbStats, ZeroDraftedTokensLeaveTheDeltaUndefined) {
  std::vector<PromptRecord> a = {rec(64, 1000, 40, 20), rec(64, 1000, 40, 30)};
  std::vector<PromptRecord> b = {rec(64, 900), rec(64, 900)};  // speculative but never drafted
  auto s = paired_bootstrap(a, b, true, {.n_boot = 100});
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->accept_delta_pts);
  const Verdict v = decide(*s, true, {});
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(v.acceptance_checked);
  EXPECT_NE(v.reason.find("undefined"), std::string::npos);
}

TEST(AbStats, ResamplesWithoutDraftsAreSkipped) {
  // B drafts only on prompt 1; a resample of prompt 0 alone (p = 1/4) has no B acceptance.
  std::vector<PromptRecord> a = {rec(64, 1000, 40, 20), rec(64, 1000, 40, 30)};
  std::vector<PromptRecord> b = {rec(64, 900), rec(64, 900, 40, 25)};
  auto s = paired_bootstrap(a, b, true, {.n_boot = 2000, .seed = 1});
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->accept_delta_pts);
  EXPECT_LT(s->accept_delta_pts->n_valid, 2000);
  EXPECT_GT(s->accept_delta_pts->n_valid, 1200);
  EXPECT_EQ(s->speed_ratio.n_valid, 2000);
}

TEST(AbStats, OnePromptGivesADegenerateInterval) {
  std::vector<PromptRecord> a = {rec(64, 1000, 40, 20)}, b = {rec(64, 800, 40, 30)};
  auto s = paired_bootstrap(a, b, true, {.n_boot = 50});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->accept_delta_pts->point, 25.0);
  EXPECT_DOUBLE_EQ(s->accept_delta_pts->lo, 25.0);
  EXPECT_DOUBLE_EQ(s->accept_delta_pts->hi, 25.0);
  EXPECT_DOUBLE_EQ(s->speed_ratio.lo, 1.25);
  EXPECT_DOUBLE_EQ(s->speed_ratio.hi, 1.25);
}

TEST(AbStats, BadInputIsAnError) {
  std::vector<PromptRecord> one = {rec(64, 1000)}, two = {rec(64, 1000), rec(64, 1000)}, none;
  EXPECT_FALSE(paired_bootstrap(one, two, false, {}));
  EXPECT_FALSE(paired_bootstrap(none, none, false, {}));
  EXPECT_FALSE(paired_bootstrap(one, one, false, {.n_boot = 0}));
  EXPECT_FALSE(paired_bootstrap(one, one, false, {.level = 1.0}));
  std::vector<PromptRecord> untimed = {rec(64, 0)};
  EXPECT_FALSE(paired_bootstrap(untimed, one, false, {}));
  EXPECT_FALSE(paired_bootstrap(one, untimed, false, {}));
}

PairedStats stats(std::optional<double> delta_lo, double ratio_lo) {
  PairedStats s;
  s.n_prompts = 10;
  if (delta_lo) s.accept_delta_pts = Interval{*delta_lo + 1, *delta_lo, *delta_lo + 2, 100};
  s.speed_ratio = Interval{ratio_lo + 0.1, ratio_lo, ratio_lo + 0.2, 100};
  return s;
}

TEST(AbStats, VerdictBoundaries) {
  const VerdictRule rule;  // -3 points, ratio 1
  EXPECT_TRUE(decide(stats(-3.0, 1.01), true, rule).pass);    // acceptance bound is inclusive
  EXPECT_FALSE(decide(stats(-3.01, 1.01), true, rule).pass);
  EXPECT_FALSE(decide(stats(0.0, 1.0), true, rule).pass);     // speed bound is strict
  EXPECT_TRUE(decide(stats(0.0, 1.0001), true, rule).pass);
  EXPECT_FALSE(decide(stats(-10.0, 0.9), true, rule).pass);
  const Verdict v = decide(stats(-3.01, 1.2), true, rule);
  EXPECT_TRUE(v.acceptance_checked);
  EXPECT_NE(v.reason.find("-3.01 < -3 points"), std::string::npos) << v.reason;
  // Custom rule.
  EXPECT_TRUE(decide(stats(-4.5, 0.96), true, {.min_accept_delta_pts = -5, .min_speed_ratio = 0.95}).pass);
}

TEST(AbStats, VerdictWithASerialArmUsesTheSpeedRuleOnly) {
  const Verdict pass = decide(stats(std::nullopt, 1.05), false, {});
  EXPECT_TRUE(pass.pass);
  EXPECT_FALSE(pass.acceptance_checked);
  EXPECT_NE(pass.reason.find("speed rule only"), std::string::npos);
  EXPECT_TRUE(decide(stats(-50.0, 1.05), false, {}).pass);  // a delta, if any, is ignored
  EXPECT_FALSE(decide(stats(std::nullopt, 0.99), false, {}).pass);
}

}  // namespace
}  // namespace dspark::eval
