// The two pieces that govern batched rounds in the server: the batched-forward cost model that
// charges each slot's governor (BatchCost) and the batch gate that holds a batch to plain steps
// when drafting does not pay for the batch as a whole (BatchGate). Driven with a simulated machine.
#include <gtest/gtest.h>

#include <cmath>

#include "serve/batch_cost.h"
#include "serve/batch_gate.h"

namespace dspark::serve {
namespace {

// A forward over r rows: a fixed part (reading the weights) plus a part per row.
double machine_ms(int64_t rows) { return 4.0 + 0.5 * (double)rows; }

TEST(BatchCost, ChargesShareThePlainForwardAndTheMarginOfDrafts) {
  BatchCost c({}, 64);
  for (int64_t r : {4, 5, 7, 8, 10})
    for (int k = 0; k < 5; ++k) c.observe(r, machine_ms(r));
  EXPECT_NEAR(c.cost(4), machine_ms(4), 1e-9);
  EXPECT_NEAR(c.cost(6), machine_ms(6), 1e-9);  // interpolated between 5 and 7
  // Four slots: one drafts 3 tokens (window 4), three step plainly (window 1): R = 7 rows.
  const std::vector<int64_t> windows = {4, 1, 1, 1};
  const std::vector<double> ch = c.charges(windows, machine_ms(7));
  ASSERT_EQ(ch.size(), 4u);
  const double base = machine_ms(4) / 4.0;  // 1.5 ms: the share of a draft-free forward
  EXPECT_NEAR(ch[1], base, 1e-9);
  EXPECT_NEAR(ch[2], base, 1e-9);
  EXPECT_NEAR(ch[0], base + 3 * 0.5, 1e-9);  // plus three rows at the margin
  // By rows the drafting slot would have paid 4/7 of 7.5 ms = 4.29 ms, the plain ones 1.07 ms.
}

TEST(BatchCost, UsesThePriorScaledToTheMeasuredForwards) {
  std::vector<double> prior = {0, 5, 6, 7, 8, 9, 10, 11, 12};  // 4 + r ms: twice the machine's slope
  BatchCost c(prior, 32);
  for (int k = 0; k < 5; ++k) c.observe(4, 2.0 * 8.0);  // the machine is twice as slow as the table
  EXPECT_NEAR(c.cost(4), 16.0, 1e-9);                    // measured
  EXPECT_NEAR(c.cost(6), 2.0 * 10.0, 1e-9);              // the prior, scaled
  EXPECT_NEAR(c.cost(12), 2.0 * 16.0, 1e-9);             // extrapolated past the table's end
}

TEST(BatchCost, SplitsByRowsWhileNothingIsKnown) {
  BatchCost c({}, 16);
  const std::vector<int64_t> windows = {3, 1};
  const std::vector<double> ch = c.charges(windows, 8.0);
  EXPECT_NEAR(ch[0], 6.0, 1e-9);
  EXPECT_NEAR(ch[1], 2.0, 1e-9);
}

// Runs `rounds` batched rounds of n slots on a machine where a drafting round commits
// `draft_tokens` in `draft_ms` and a plain one n tokens in `plain_ms`; returns the drafting share.
double run_gate(BatchGate& g, int n, int rounds, double draft_tokens, double draft_ms, double plain_ms) {
  int drafting = 0;
  for (int i = 0; i < rounds; ++i) {
    const bool d = g.drafting(n);
    drafting += d ? 1 : 0;
    g.observe(n, d ? (int64_t)std::lround(draft_tokens) : n, d ? draft_ms : plain_ms);
  }
  return (double)drafting / rounds;
}

TEST(BatchGate, HoldsTheBatchPlainWhenDraftingLoses) {
  BatchGate g(BatchGateConfig{}, 4);
  // Drafting: 5 tokens in 7 ms (0.71/ms); plain: 4 tokens in 5 ms (0.8/ms).
  const double share = run_gate(g, 4, 2000, 5, 7.0, 5.0);
  EXPECT_LT(share, 0.06);  // trials only, backed off
  const nlohmann::json st = g.stats();
  ASSERT_EQ(st["by_slots"].size(), 1u);
  EXPECT_EQ(st["by_slots"][0]["mode"], "plain");
  EXPECT_NEAR(st["by_slots"][0]["plain_tokens_per_ms"].get<double>(), 0.8, 1e-9);
}

TEST(BatchGate, DraftsWhenDraftingWinsAndFollowsAChange) {
  BatchGate g(BatchGateConfig{}, 4);
  EXPECT_GT(run_gate(g, 4, 1000, 8, 7.0, 5.0), 0.9);  // 1.14/ms against 0.8/ms
  // The text turns: drafting now loses; within a few hundred rounds the batch is plain again.
  run_gate(g, 4, 400, 4, 7.0, 5.0);
  EXPECT_LT(run_gate(g, 4, 1000, 4, 7.0, 5.0), 0.08);
  EXPECT_GE(g.stats()["by_slots"][0]["switches"].get<int64_t>(), 1);
}

// Rounds as a server sees them: a drafting round of 4 slots commits 4 to 20 tokens, and every
// round's time moves with what the batch holds (both modes alike, here in waves of 30 rounds, +-0.6 in
// the log). Drafting loses by 10 % on average, so the gate must stay plain: each mode's estimate
// remembers ~30 rounds (BatchGateConfig::alpha), so one 8-round trial in a fast stretch cannot turn
// it. (With alpha 0.15 this drafted 42 % of the rounds over 20 seeds.)
TEST(BatchGate, DriftingRoundsFollowTheAverageNotOneTrial) {
  double share = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    BatchGate g(BatchGateConfig{}, 4);
    uint64_t x = seed * 7919;
    auto next = [&x] {  // LCG in [0, 1)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return (double)(x >> 11) / 9007199254740992.0;
    };
    int drafting = 0;
    const int rounds = 3000;
    for (int i = 0; i < rounds; ++i) {
      const bool d = g.drafting(4);
      drafting += d ? 1 : 0;
      const double wave = std::exp(0.6 * std::sin(2 * 3.14159265358979 * (double)(i + 7 * (int)seed) / 30));
      const double load = (0.7 + 0.6 * next()) * wave;
      if (d) g.observe(4, 4 + (int64_t)(17 * next()), 12.0 / (0.8 * 0.9) * load);  // 0.72 tokens/ms
      else g.observe(4, 4, 5.0 * load);                                             // 0.8 tokens/ms
    }
    share += (double)drafting / rounds / 20;
  }
  EXPECT_LT(share, 0.15);
}

TEST(BatchGate, TieStaysPlainAndSizesAreSeparate) {
  BatchGate g(BatchGateConfig{}, 4);
  EXPECT_LT(run_gate(g, 4, 1000, 4, 5.0, 5.0), 0.08);  // equal rates: drafting needs a lead
  EXPECT_GT(run_gate(g, 2, 1000, 4, 4.0, 4.0 * 0.8), 0.9);  // 2 slots: 1.0/ms against 0.625/ms
}

TEST(BatchGate, OffAlwaysLetsSlotsDraft) {
  BatchGateConfig cfg;
  cfg.enabled = false;
  BatchGate g(cfg, 4);
  EXPECT_EQ(run_gate(g, 4, 100, 1, 100.0, 1.0), 1.0);
}

}  // namespace
}  // namespace dspark::serve
