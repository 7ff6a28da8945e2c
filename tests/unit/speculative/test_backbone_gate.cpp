// The cost-aware schedule's backbone gate (DSparkOptions::backbone_gate) on a synthetic drafter
// (tests/goldens/dspark_synth/a_vanilla_conf_bf16): rounds whose recent backbone passes delivered
// fewer tokens per ms than plain decoding skip the network, with probe rounds after 1, 2, 4, ...
// skipped rounds; good rounds open it again. Which rounds run is all the gate changes: the tokens
// of a round that runs are the same as without the gate. Also the schedule's static costs
// (DSparkOptions::static_costs): greedy rounds then ignore the online verify timings. And the
// network-calibration counters of stats().
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "speculative/drafter_dspark.h"

namespace dspark::speculative {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(DSPARK_SOURCE_DIR) / "tests/goldens/dspark_synth/a_vanilla_conf_bf16";
const TargetShape kTarget{6, 40, 192};  // the synthetic drafters' target: 6 layers, H 40, V 192
constexpr int kGamma = 4;               // the checkpoint's block_size
constexpr int kWarmup = 4;              // rounds before the gate may close (drafter_dspark.cpp)

// Zero taps for n rows (3 tap points of width 40).
struct ZeroTaps {
  std::vector<float> zeros;
  TapRows rows;
  explicit ZeroTaps(int64_t n) : zeros((size_t)(n * kTarget.n_embd), 0.0f) {
    rows.taps.assign(3, zeros.data());
    rows.n_rows = n;
    rows.n_embd = kTarget.n_embd;
  }
};

std::unique_ptr<DSparkDrafter> make(bool gate, bool static_costs = false) {
  DSparkOptions opt;
  opt.schedule = true;
  opt.backbone_gate = gate;
  opt.static_costs = static_costs;
  opt.draft_ms = 1.0;
  // A verify that costs the same for any window makes every confident slot worth drafting, so
  // the drafter drafts; the gate decides from what the rounds then deliver.
  opt.verify_ms.assign(kGamma + 2, 10.0);
  auto d = DSparkDrafter::load(kDir.string(), kTarget, nullptr, opt, nullptr);
  EXPECT_TRUE(d.is_ok()) << d.message();
  return d.is_ok() ? std::move(d.value()) : nullptr;
}

// One round: draft at the current position, then commit `accepted` of the drafted tokens (capped
// at what was drafted) plus one target token. Returns whether the backbone ran.
bool round(DSparkDrafter& d, int64_t* pos, int accepted) {
  DraftRequest req;
  req.pending = 7;
  req.pos = *pos;
  req.max_n = kGamma;
  DraftResult out;
  const Status s = d.draft(req, &out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  const bool ran = d.last_backbone_ran();
  if (!ran) {
    EXPECT_TRUE(out.tokens.empty()) << "a skipped round drafts nothing";
  }
  const int a = std::min<int>(accepted, (int)out.tokens.size());
  std::vector<int32_t> committed(out.tokens.begin(), out.tokens.begin() + a);
  committed.insert(committed.begin(), req.pending);
  ZeroTaps t((int64_t)committed.size());
  EXPECT_TRUE(d.commit(committed, *pos, t.rows).is_ok());
  *pos += (int64_t)committed.size();
  return ran;
}

// begin() on an 8-token prompt; returns the next position.
int64_t start(DSparkDrafter& d) {
  const std::vector<int32_t> prompt(8, 5);
  ZeroTaps pt((int64_t)prompt.size());
  EXPECT_TRUE(d.begin(prompt, pt.rows).is_ok());
  return (int64_t)prompt.size();
}

TEST(BackboneGate, ClosesOnLosingRoundsProbesWithBackoffAndReopens) {
  auto d = make(true);
  ASSERT_TRUE(d);
  int64_t pos = start(*d);
  // Nothing accepted: each backbone round yields 1 token for more than one plain step's cost.
  for (int r = 0; r < kWarmup; ++r) EXPECT_TRUE(round(*d, &pos, 0)) << "warm-up round " << r;
  std::vector<bool> ran;
  for (int r = 0; r < 14; ++r) ran.push_back(round(*d, &pos, 0));
  // skip 1, probe, skip 2, probe, skip 4, probe, skip 4 of the next 8
  const std::vector<bool> want = {false, true, false, false, true, false, false, false, false, true,
                                  false, false, false, false};
  EXPECT_EQ(ran, want);
  const auto st = d->stats()["backbone_gate"];
  EXPECT_EQ(st["rounds_skipped"].get<int64_t>(), 11);
  EXPECT_EQ(st["probes"].get<int64_t>(), 3);
  // Rounds that deliver their whole draft reopen it at the next probe.
  int until_probe = 0;
  while (!round(*d, &pos, kGamma)) ++until_probe;
  EXPECT_LE(until_probe, 8);
  for (int r = 0; r < 6; ++r) EXPECT_TRUE(round(*d, &pos, kGamma)) << "open again, round " << r;
}

TEST(BackboneGate, UngatedScheduleRunsEveryRound) {
  auto d = make(false);
  ASSERT_TRUE(d);
  int64_t pos = start(*d);
  for (int r = 0; r < 20; ++r) EXPECT_TRUE(round(*d, &pos, 0)) << "round " << r;
  EXPECT_FALSE(d->stats().contains("backbone_gate"));
}

TEST(BackboneGate, BeginResetsTheGate) {
  auto d = make(true);
  ASSERT_TRUE(d);
  for (int req = 0; req < 2; ++req) {
    int64_t pos = start(*d);
    for (int r = 0; r < kWarmup; ++r) EXPECT_TRUE(round(*d, &pos, 0)) << "request " << req << " round " << r;
    EXPECT_FALSE(round(*d, &pos, 0)) << "request " << req << ": closed after the warm-up";
  }
}

// Online verify timings that make every window longer than one token ruinous shorten greedy drafts
// under the cost schedule, and change nothing under static costs (the start-up table decides).
TEST(StaticCosts, GreedyDraftsIgnoreOnlineTimings) {
  for (bool static_costs : {false, true}) {
    auto d = make(false, static_costs);
    ASSERT_TRUE(d);
    int64_t pos = start(*d);
    DraftRequest req;
    req.pending = 7;
    req.pos = pos;
    req.max_n = kGamma;
    DraftResult before, after;
    ASSERT_TRUE(d->draft(req, &before).is_ok());
    ASSERT_GT(before.tokens.size(), 0u) << "the flat start-up table drafts";
    for (int i = 0; i < 200; ++i)
      for (int n = 2; n <= kGamma + 1; ++n) d->observe_verify(n, 1000.0);
    ASSERT_TRUE(d->draft(req, &after).is_ok());
    if (static_costs)
      EXPECT_EQ(after.tokens, before.tokens);
    else
      EXPECT_TRUE(after.tokens.empty()) << "online costs of 1 s per window: nothing is worth drafting";
  }
}

// stats()["network_calibration"]: over the network slots the target evaluated (slot i of a round
// is evaluated iff slots < i were accepted), the sum of their calibrated confidences and the count
// accepted. Rounds that accept nothing evaluate slot 0 alone; rounds that accept all, every slot.
TEST(NetworkCalibration, CountsEvaluatedSlotsTheirConfidenceAndAcceptances) {
  for (int accepted : {0, kGamma}) {
    auto d = make(false);
    ASSERT_TRUE(d);
    int64_t pos = start(*d);
    int64_t drafted = 0;
    constexpr int kRounds = 6;
    for (int r = 0; r < kRounds; ++r) {
      const int64_t before = pos;
      ASSERT_TRUE(round(*d, &pos, accepted));
      drafted += pos - before - 1;  // accepted tokens committed this round
    }
    const auto cal = d->stats()["network_calibration"];
    const int64_t evaluated = cal["evaluated"].get<int64_t>();
    const double predicted = cal["predicted"].get<double>();
    if (accepted == 0) {
      EXPECT_EQ(evaluated, kRounds) << "slot 0 of each round";
      EXPECT_EQ(cal["accepted"].get<double>(), 0.0);
    } else {
      EXPECT_EQ(evaluated, drafted) << "every drafted slot was evaluated and accepted";
      EXPECT_EQ(cal["accepted"].get<double>(), (double)drafted);
    }
    EXPECT_GT(predicted, 0.0);
    EXPECT_LE(predicted, (double)evaluated);
  }
}

}  // namespace
}  // namespace dspark::speculative
