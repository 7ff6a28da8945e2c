// The draft-length governor on synthetic rounds: a simulated machine (verify cost by window size,
// drafter cost) and a simulated text (how many drafted tokens the target accepts), so every
// decision rule is checked without timing anything.
#include <gtest/gtest.h>

#include <functional>

#include "speculative/governor.h"

namespace dspark::speculative {
namespace {

using R = GovernorReason;

// A machine: V(n) = v1 + slope * (n - 1) ms, a drafter round costs draft ms, accept + commit rest ms.
struct Machine {
  double v1 = 3.0, slope = 0.5, draft = 0.5, rest = 0.1;
  double verify(int n) const { return v1 + slope * (n - 1); }
  std::vector<double> table(int n_max) const {
    std::vector<double> t(1, 0.0);
    for (int n = 1; n <= n_max; ++n) t.push_back(verify(n));
    return t;
  }
};

struct Sim {
  explicit Sim(Governor g) : gov(std::move(g)) {}
  Governor gov;
  Machine m;
  std::function<int(int round, int drafted)> accepted;  // the text: accepted tokens of a draft
  int64_t tokens = 0;
  double ms = 0;
  std::vector<Governor::Decision> decisions;

  void run(int rounds, int gamma) {
    for (int r = 0; r < rounds; ++r) {
      const Governor::Decision d = gov.decide(gamma);
      decisions.push_back(d);
      const int drafted = d.gamma;
      const int acc = drafted > 0 ? std::min(drafted, accepted((int)decisions.size(), drafted)) : 0;
      RoundObservation o{.gamma = d.gamma, .drafted = drafted, .accepted = acc,
                         .draft_ms = d.gamma > 0 ? m.draft : 0.0, .verify_ms = m.verify(1 + drafted), .rest_ms = m.rest};
      gov.observe(o);
      tokens += acc + 1;
      ms += o.draft_ms + o.verify_ms + o.rest_ms;
    }
  }
  int count(R reason, size_t from = 0) const {
    int n = 0;
    for (size_t i = from; i < decisions.size(); ++i) n += decisions[i].reason == reason;
    return n;
  }
};

GovernorConfig on() {
  GovernorConfig c;
  c.enabled = true;
  return c;
}

TEST(Governor, OffPassesTheBudgetThrough) {
  Governor g(GovernorConfig{}, 5);
  for (int max_n : {5, 3, 9, 0}) {
    const auto d = g.decide(max_n);
    EXPECT_EQ(d.gamma, std::min(max_n, 5));
    EXPECT_EQ(d.reason, max_n > 0 ? R::kOff : R::kLimit);
  }
  EXPECT_EQ(g.stats().drafting_rounds, 3);
  EXPECT_EQ(g.stats().plain_rounds, 1);
}

TEST(Governor, NoRoomIsAPlainRoundForItsOwnReason) {
  Governor g(on(), 4);
  EXPECT_EQ(g.decide(0).reason, R::kLimit);
  EXPECT_EQ(g.decide(0).gamma, 0);
  EXPECT_EQ(g.stats().rounds[(size_t)R::kLimit], 2);
}

// A drafter whose tokens are never accepted: after the warm-up the governor decodes plainly and
// drafts only to probe, at most once per max_backoff + 1 rounds; it loses little to plain decoding.
TEST(Governor, StopsADrafterThatLoses) {
  Sim s(Governor(on(), 4));
  s.accepted = [](int, int) { return 0; };
  s.run(200, 4);
  const GovernorConfig c = on();
  EXPECT_EQ(s.count(R::kWarmup), c.warmup_rounds);
  EXPECT_GT(s.count(R::kPlain), 150);
  EXPECT_LE(s.count(R::kProbeDraft, 50), 150 / (c.max_backoff + 1) + 1);
  EXPECT_EQ(s.count(R::kDraft), 0);
  const double plain_rate = 1.0 / (s.m.verify(1) + s.m.rest);
  EXPECT_GT(s.tokens / s.ms, 0.95 * plain_rate);
  EXPECT_GT(s.gov.plain_rate(), s.gov.draft_rate(4));
}

// A drafter whose every token is accepted: the governor drafts at full length, probing a plain
// round only every plain_refresh_rounds rounds.
TEST(Governor, KeepsADrafterThatWins) {
  Sim s(Governor(on(), 4));
  s.accepted = [](int, int d) { return d; };
  s.run(200, 4);
  EXPECT_EQ(s.count(R::kPlain), 0);
  EXPECT_GT(s.count(R::kDraft), 180);
  EXPECT_LE(s.count(R::kProbePlain), 200 / on().plain_refresh_rounds + 1);
  for (const auto& d : s.decisions) {
    if (d.reason == R::kDraft) {
      EXPECT_EQ(d.gamma, 4);
    }
  }
  EXPECT_GT(s.tokens / s.ms, 2.0 / (s.m.verify(1) + s.m.rest));
}

// Only the first slot is ever right and windows are steep: the counterfactual of shorter drafts
// (read from full-length rounds) makes gamma 1 the choice, with full-length refreshes.
TEST(Governor, PicksTheCapThatPays) {
  Sim s(Governor(on(), 4));
  s.m.slope = 2.0;
  s.accepted = [](int, int) { return 1; };
  s.run(120, 4);
  int cap1 = 0;
  for (size_t i = 20; i < s.decisions.size(); ++i) {
    cap1 += s.decisions[i].reason == R::kDraft && s.decisions[i].gamma == 1;
  }
  EXPECT_GT(cap1, 80);
  EXPECT_GT(s.count(R::kProbeDraft, 20), 0);  // the longer gammas are refreshed
  EXPECT_GT(s.gov.draft_rate(1), s.gov.draft_rate(4));
  EXPECT_GT(s.gov.draft_rate(1), s.gov.plain_rate());
}

// The text turns copy-friendly halfway: the governor, decoding plainly, notices within a few
// probes and drafts again; when it turns back, it stops again.
TEST(Governor, FollowsTheText) {
  Sim s(Governor(on(), 4));
  s.accepted = [](int round, int d) { return round > 60 && round <= 120 ? d : 0; };
  s.run(180, 4);
  EXPECT_EQ(s.decisions[59].gamma, 0);
  int first_draft = -1;
  for (int i = 60; i < 120 && first_draft < 0; ++i)
    if (s.decisions[(size_t)i].reason == R::kDraft) first_draft = i;
  ASSERT_GE(first_draft, 0);
  EXPECT_LE(first_draft - 60, on().max_backoff + 8) << "one backed-off probe, then quick ones";
  int plain_late = 0;
  for (size_t i = 150; i < 180; ++i) plain_late += s.decisions[i].reason == R::kPlain;
  EXPECT_GT(plain_late, 15);
}

// Deciding from constants (sampled requests): the same tokens give the same decisions whatever the
// rounds really cost.
TEST(Governor, ConstantsMakeDecisionsIndependentOfTiming) {
  Machine m;
  auto decisions = [&](double jitter) {
    Sim s(Governor({.enabled = true, .verify_ms = m.table(5), .draft_ms = 0.5, .deterministic = true}, 4));
    s.m.v1 = 3.0 * jitter;
    s.m.draft = 0.5 / jitter;
    s.accepted = [](int round, int d) { return (round * 7) % 5 < 2 ? d : round % 2; };
    s.run(100, 4);
    std::vector<int> gammas;
    for (const auto& d : s.decisions) gammas.push_back(d.gamma);
    return gammas;
  };
  EXPECT_EQ(decisions(1.0), decisions(3.0));
  EXPECT_EQ(decisions(1.0), decisions(0.4));
}

// Without a table the measured costs fill in: window sizes not seen yet borrow the nearest larger
// one measured; with a table they are the table scaled by how measured windows compare with it.
TEST(Governor, VerifyCostPriors) {
  Machine m;
  Governor g({.enabled = true, .verify_ms = m.table(5)}, 4);
  EXPECT_NEAR(g.estimates()["verify_ms"][2].get<double>(), m.verify(3), 1e-9);
  g.decide(4);
  g.observe({.gamma = 4, .drafted = 4, .accepted = 0, .draft_ms = 0.5, .verify_ms = 2 * m.verify(5), .rest_ms = 0});
  EXPECT_NEAR(g.estimates()["verify_ms"][2].get<double>(), 2 * m.verify(3), 1e-9);  // scaled x2
  EXPECT_NEAR(g.estimates()["verify_ms"][4].get<double>(), 2 * m.verify(5), 1e-9);  // measured

  // A token tree's forward (2 drafted in its chain, 5 rows in all) is a 5-row window's cost, not a
  // 3-row one's.
  Governor t({.enabled = true, .verify_ms = m.table(5)}, 4);
  t.decide(4);
  t.observe({.gamma = 4, .drafted = 2, .accepted = 0, .window = 5, .draft_ms = 0.5, .verify_ms = m.verify(5),
             .rest_ms = 0});
  EXPECT_NEAR(t.estimates()["verify_ms"][4].get<double>(), m.verify(5), 1e-9);  // measured at 5 rows
  EXPECT_NEAR(t.estimates()["verify_ms"][2].get<double>(), m.verify(3), 1e-9);  // 3 rows: the table, unscaled

  Governor n(on(), 4);
  n.decide(4);
  n.observe({.gamma = 4, .drafted = 2, .accepted = 0, .draft_ms = 0.5, .verify_ms = 7.0, .rest_ms = 0});
  EXPECT_EQ(n.estimates()["verify_ms"][1].get<double>(), 7.0);  // V(2) <- V(3), the nearest larger
  EXPECT_EQ(n.estimates()["verify_ms"][4].get<double>(), 7.0);  // V(5) <- V(3), the nearest smaller
  EXPECT_EQ(n.plain_rate(), 1.0 / 7.0);                         // c0 <- V(1) <- V(3)
}

// Telemetry: every round is counted once, under one reason, as plain or drafting.
TEST(Governor, StatsAddUp) {
  Sim s(Governor(on(), 4));
  s.accepted = [](int round, int d) { return round % 3 == 0 ? d : 0; };
  s.run(97, 4);
  const GovernorStats& st = s.gov.stats();
  int64_t sum = 0;
  for (int64_t n : st.rounds) sum += n;
  EXPECT_EQ(sum, 97);
  EXPECT_EQ(st.plain_rounds + st.drafting_rounds, 97);
  const auto j = st.to_json();
  EXPECT_EQ(j["rounds_by_reason"]["warmup"].get<int64_t>(), on().warmup_rounds);
  GovernorStats twice = st;
  twice.merge(st);
  EXPECT_EQ(twice.plain_rounds, 2 * st.plain_rounds);
}

}  // namespace
}  // namespace dspark::speculative

namespace dspark::speculative {
namespace {

// A server slot keeps its governor across requests: what it learned carries over (no new warm-up,
// plain decoding stays chosen), the counters restart; another gamma or constants start afresh.
TEST(Governor, CarriesOverAcrossRequests) {
  Sim s(Governor(on(), 4));
  s.accepted = [](int, int) { return 0; };
  s.run(60, 4);
  s.gov.begin_request(on(), 4);
  EXPECT_EQ(s.gov.stats().plain_rounds + s.gov.stats().drafting_rounds, 0);
  const auto d = s.gov.decide(4);
  EXPECT_EQ(d.reason, R::kPlain);
  s.gov.begin_request(on(), 3);
  EXPECT_EQ(s.gov.decide(3).reason, R::kWarmup);
  Machine m;
  GovernorConfig k{.enabled = true, .verify_ms = m.table(5), .deterministic = true};
  s.gov.begin_request(k, 4);
  s.gov.decide(4);
  s.gov.observe({.gamma = 4, .drafted = 4, .accepted = 0, .draft_ms = 1, .verify_ms = 5, .rest_ms = 0});
  s.gov.begin_request(k, 4);
  EXPECT_EQ(s.gov.decide(4).reason, R::kWarmup) << "deciding from constants: every request starts alike";
}

// While plain decoding leads by far, probes back off further than max_backoff.
TEST(Governor, BacksOffFurtherWhenFarBehind) {
  Sim s(Governor(on(), 4));
  s.m.slope = 3.0;  // steep windows: drafting is far behind
  s.accepted = [](int, int) { return 0; };
  s.run(400, 4);
  EXPECT_LE(s.count(R::kProbeDraft, 100), 300 / on().max_backoff_far + 2);
}

TEST(Governor, HoldIsAPlainRoundUnderItsOwnReason) {
  Governor g(on(), 4);
  const Governor::Decision d = g.hold(R::kBatchPlain);
  EXPECT_EQ(d.gamma, 0);
  g.observe({.gamma = 0, .drafted = 0, .accepted = 0, .draft_ms = 0, .verify_ms = 2.0, .rest_ms = 0.5});
  EXPECT_EQ(g.stats().rounds[(size_t)R::kBatchPlain], 1);
  EXPECT_EQ(g.stats().plain_rounds, 1);
  EXPECT_EQ(g.stats().drafting_rounds, 0);
  EXPECT_NEAR(g.plain_rate(), 1.0 / 2.5, 1e-12);  // it refreshed the plain cost
  EXPECT_EQ(g.stats().to_json()["rounds_by_reason"]["batch_plain"].get<int64_t>(), 1);
}

TEST(Governor, ASureDraftRecountsThePlainRound) {
  Governor g(on(), 4);
  const Governor::Decision plain = g.hold(GovernorReason::kBatchPlain);
  const Governor::Decision sure = g.sure(plain, 3);
  EXPECT_EQ(sure.gamma, 3);
  EXPECT_EQ(sure.reason, GovernorReason::kSure);
  const auto st = g.stats();
  EXPECT_EQ(st.rounds[(size_t)GovernorReason::kBatchPlain], 0);
  EXPECT_EQ(st.rounds[(size_t)GovernorReason::kSure], 1);
  EXPECT_EQ(st.plain_rounds, 0);
  EXPECT_EQ(st.drafting_rounds, 1);
  EXPECT_EQ(st.to_json()["rounds_by_reason"]["sure"].get<int64_t>(), 1);
  // The stepper does not observe a sure round, so the plain cost is still unknown.
  EXPECT_EQ(g.plain_rate(), 0.0);
  // A drafting decision with a gamma at least as long is left as it is; a longer sure draft replaces it.
  const Governor::Decision draft = g.decide(4);
  ASSERT_GT(draft.gamma, 0);
  EXPECT_EQ(g.sure(draft, draft.gamma).reason, draft.reason);
  const int drafting = g.stats().drafting_rounds;
  const Governor::Decision longer = g.sure(draft, 9);
  EXPECT_EQ(longer.gamma, 9);
  EXPECT_EQ(longer.reason, GovernorReason::kSure);
  EXPECT_EQ(g.stats().rounds[(size_t)GovernorReason::kSure], 2);
  EXPECT_EQ(g.stats().drafting_rounds, drafting);
}

}  // namespace
}  // namespace dspark::speculative
