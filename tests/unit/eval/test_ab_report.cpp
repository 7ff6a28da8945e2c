// ab_report on a hand-built run: comparisons with the baseline, the JSON layout plot_ab.py reads,
// and the markdown tables.
#include <gtest/gtest.h>

#include "eval/ab_report.h"

namespace dspark::eval {
namespace {

PromptRecord rec(int64_t tokens, double ms, int64_t drafted, int64_t accepted, int64_t rounds) {
  PromptRecord r;
  r.tokens = tokens;
  r.ms = ms;
  r.drafted = drafted;
  r.accepted = accepted;
  r.rounds = rounds;
  if (drafted) {
    r.drafted_by_pos = {drafted / 2, drafted / 2};
    r.accepted_by_pos = {accepted / 2 + 1, accepted / 2 - 1};
  }
  return r;
}

AbReport three_arms() {
  AbReport r;
  r.settings.bootstrap = {.n_boot = 300, .seed = 1};
  r.settings.max_tokens = 64;
  r.arms.push_back({*parse_arm_spec("A", "serial")});
  r.arms.push_back({*parse_arm_spec("B", "draft-kind=ngram,num-draft-tokens=2"), "ngram", 2});
  r.arms.push_back({*parse_arm_spec("C", "draft-kind=ngram,num-draft-tokens=2"), "ngram", 2});
  for (int i = 0; i < 6; ++i) r.prompts.push_back({i % 2 ? "math" : "writing", 20 + i});
  r.records.resize(3);
  for (int i = 0; i < 6; ++i) {
    r.records[0].push_back(rec(64, 2000 + 10 * i, 0, 0, 64));
    r.records[1].push_back(rec(64, 1000 + 10 * i, 40, 30, 34));
    r.records[2].push_back(rec(64, 2500 + 10 * i, 40, 10, 54));  // slower, much lower acceptance
  }
  r.identical.assign(3, std::vector<uint8_t>(6, 1));
  r.identical[2][4] = 0;
  return r;
}

TEST(AbReport, ComparesEveryArmWithTheBaseline) {
  AbReport r = three_arms();
  ASSERT_TRUE(compare_arms(r).is_ok());
  ASSERT_EQ(r.comparisons.size(), 2u);
  // B vs serial A: speed rule only, B is ~2x faster on every prompt.
  EXPECT_FALSE(r.comparisons[0].compare_acceptance);
  EXPECT_TRUE(r.comparisons[0].verdict.pass) << r.comparisons[0].verdict.reason;
  EXPECT_EQ(*r.comparisons[0].identical, 6);
  // C vs serial A: slower.
  EXPECT_FALSE(r.comparisons[1].verdict.pass);
  EXPECT_EQ(*r.comparisons[1].identical, 5);
  EXPECT_FALSE(r.pass());
}

TEST(AbReport, BothSpeculativeComparesAcceptance) {
  AbReport r = three_arms();
  r.arms.erase(r.arms.begin());
  r.records.erase(r.records.begin());
  r.identical.erase(r.identical.begin());
  ASSERT_TRUE(compare_arms(r).is_ok());
  ASSERT_EQ(r.comparisons.size(), 1u);
  const AbComparison& c = r.comparisons[0];
  EXPECT_TRUE(c.compare_acceptance);
  ASSERT_TRUE(c.stats.accept_delta_pts);
  EXPECT_DOUBLE_EQ(c.stats.accept_delta_pts->point, -50.0);
  EXPECT_FALSE(c.verdict.pass);
}

TEST(AbReport, JsonHasWhatThePlotReads) {
  AbReport r = three_arms();
  ASSERT_TRUE(compare_arms(r).is_ok());
  const nlohmann::json j = nlohmann::json::parse(to_json(r).dump());
  ASSERT_EQ(j["arms"].size(), 3u);
  EXPECT_TRUE(j["arms"][0]["acceptance"].is_null());
  EXPECT_TRUE(j["arms"][0]["acceptance_by_pos"].empty());
  EXPECT_DOUBLE_EQ(j["arms"][1]["acceptance"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["arms"][1]["acceptance_by_pos"][0].get<double>(), 16.0 / 20);
  EXPECT_DOUBLE_EQ(j["arms"][0]["tau"].get<double>(), 1.0);
  EXPECT_EQ(j["comparisons"][0]["arm"], "B");
  EXPECT_TRUE(j["comparisons"][0]["acceptance_delta_pts"].is_null());
  EXPECT_TRUE(j["comparisons"][0]["speed_ratio"].contains("lo"));
  EXPECT_TRUE(j["comparisons"][0]["verdict"]["pass"].get<bool>());
  EXPECT_FALSE(j["pass"].get<bool>());
  ASSERT_EQ(j["per_prompt"].size(), 6u);
  EXPECT_FALSE(j["per_prompt"][4]["arms"][2]["identical"].get<bool>());
}

TEST(AbReport, MarkdownTables) {
  AbReport r = three_arms();
  ASSERT_TRUE(compare_arms(r).is_ok());
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("| A | serial |"), std::string::npos) << md;
  EXPECT_NE(md.find("| n/a |"), std::string::npos);          // serial acceptance
  EXPECT_NE(md.find("n/a (serial arm)"), std::string::npos);
  EXPECT_NE(md.find("| 5 / 6 |"), std::string::npos);
  EXPECT_NE(md.find("verdict B vs A: PASS"), std::string::npos);
  EXPECT_NE(md.find("verdict C vs A: FAIL"), std::string::npos);
  EXPECT_NE(md.find("overall: FAIL"), std::string::npos);
}

// The cost-aware arms' verify table is reported with where it came from; no table, null.
TEST(AbReport, VerifyTableAndItsSource) {
  AbReport r = three_arms();
  ASSERT_TRUE(compare_arms(r).is_ok());
  nlohmann::json j = nlohmann::json::parse(to_json(r).dump());
  EXPECT_TRUE(j["verify_table_ms"].is_null());
  EXPECT_TRUE(j["verify_table_source"].is_null());
  EXPECT_EQ(to_markdown(r).find("Verify-cost table"), std::string::npos);
  r.verify_ms = {2.9, 3.1, 3.25};
  r.verify_ms_given = true;
  j = nlohmann::json::parse(to_json(r).dump());
  EXPECT_EQ(j["verify_table_ms"].get<std::vector<double>>(), r.verify_ms);
  EXPECT_EQ(j["verify_table_source"], "given");
  EXPECT_NE(to_markdown(r).find("(--verify-table), ms for 1..3 tokens: 2.90 3.10 3.25\n"), std::string::npos) << to_markdown(r);
  r.verify_ms_given = false;
  EXPECT_EQ(nlohmann::json::parse(to_json(r).dump())["verify_table_source"], "measured");
  EXPECT_NE(to_markdown(r).find("(measured at start-up)"), std::string::npos);
}

TEST(AbReport, NeedsTwoArms) {
  AbReport r = three_arms();
  r.arms.resize(1);
  r.records.resize(1);
  EXPECT_FALSE(compare_arms(r).is_ok());
}

TEST(AbReport, PerCategoryPairedIntervals) {
  // Arm B is twice as fast as A on the math prompts and half as fast on the writing ones.
  AbReport r;
  r.settings.bootstrap = {.n_boot = 400, .seed = 3};
  r.arms.push_back({*parse_arm_spec("A", "serial")});
  r.arms.push_back({*parse_arm_spec("B", "draft-kind=ngram,num-draft-tokens=2"), "ngram", 2});
  r.records.resize(2);
  for (int i = 0; i < 12; ++i) {
    const bool math = i % 2;
    r.prompts.push_back({math ? "math" : "writing", 20});
    const double a = 1000 + 17 * i;
    r.records[0].push_back(rec(64, a, 0, 0, 64));
    r.records[1].push_back(rec(64, math ? a / 2 : a * 2, 40, 20, 40));
  }
  ASSERT_TRUE(compare_arms(r).is_ok());
  const AbComparison& c = r.comparisons[0];
  ASSERT_EQ(c.per_category.size(), 2u);
  EXPECT_EQ(c.per_category[0].first, "writing");  // in order of first appearance
  EXPECT_EQ(c.per_category[1].first, "math");
  EXPECT_EQ(c.per_category[0].second.n_prompts, 6);
  // Each category's ratio is exactly 0.5 / 2 on every prompt, so its interval is that point.
  EXPECT_NEAR(c.per_category[0].second.speed_ratio.lo, 0.5, 1e-9);
  EXPECT_NEAR(c.per_category[0].second.speed_ratio.hi, 0.5, 1e-9);
  EXPECT_NEAR(c.per_category[1].second.speed_ratio.lo, 2.0, 1e-9);
  EXPECT_NEAR(c.per_category[1].second.speed_ratio.hi, 2.0, 1e-9);
  // The pooled interval spans the mix.
  EXPECT_LT(c.stats.speed_ratio.lo, 2.0);
  EXPECT_GT(c.stats.speed_ratio.hi, 0.5);
  const nlohmann::json j = to_json(r);
  const nlohmann::json& pc = j["comparisons"][0]["per_category"];
  ASSERT_EQ(pc.size(), 2u);
  EXPECT_EQ(pc[1]["category"], "math");
  EXPECT_EQ(pc[1]["n_prompts"], 6);
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("| math | 6 | 2.00x [2.00, 2.00]"), std::string::npos) << md;
  EXPECT_NE(md.find("| writing | 6 | 0.50x [0.50, 0.50]"), std::string::npos) << md;
}

TEST(AbReport, OneCategoryHasNoBreakdown) {
  AbReport r = three_arms();
  for (auto& p : r.prompts) p.category = "all";
  ASSERT_TRUE(compare_arms(r).is_ok());
  EXPECT_TRUE(r.comparisons[0].per_category.empty());
}

}  // namespace
}  // namespace dspark::eval
