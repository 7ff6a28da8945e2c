// The governor by class (speculative/governor.h, "By class") on synthetic rounds: a drafter whose
// drafts come in classes the target takes at very different rates, a machine with a known verify
// cost, and checks that each class keeps the length it pays at.
#include <gtest/gtest.h>

#include <functional>

#include "speculative/governor.h"

namespace dspark::speculative {
namespace {

using R = GovernorReason;

// V(n) = 3 + 0.5 (n - 1) ms; accept + commit 0.1 ms; drafting 0.05 ms.
double verify(int n) { return 3.0 + 0.5 * (n - 1); }

GovernorConfig by_class_on() {
  GovernorConfig c;
  c.enabled = true;
  for (int n = 0; n <= 9; ++n) c.verify_ms.push_back(n == 0 ? 0.0 : verify(n));
  return c;
}

// The stepper's round by class: decide, draft the whole room (`drafted` tokens of class `cls`),
// cut, verify, observe. `accepted(cls, kept)`: what the target takes of the kept draft.
struct ClassSim {
  explicit ClassSim(Governor g) : gov(std::move(g)) {}
  Governor gov;
  std::vector<Governor::Decision> decisions;
  int64_t tokens = 0;
  double ms = 0;
  void round(int cls, int drafted, const std::function<int(int, int)>& accepted, int room = 4) {
    Governor::Decision d = gov.decide(room);
    if (gov.by_class()) d = gov.cut(d, cls, drafted);
    decisions.push_back(d);
    const int kept = std::min(d.gamma, drafted);
    const int acc = std::min(kept, accepted(cls, kept));
    const RoundObservation o{.gamma = d.gamma, .drafted = kept, .accepted = acc, .draft_ms = 0.05,
                             .verify_ms = verify(1 + kept), .rest_ms = 0.1, .cls = gov.by_class() ? cls : -1};
    gov.observe(o);
    tokens += acc + 1;
    ms += o.draft_ms + o.verify_ms + o.rest_ms;
  }
};

// Class 0 is always taken whole, class 1 never: once learned, class 0 drafts its whole draft and
// class 1 is a plain step, whatever the mixture.
TEST(GovernorByClass, EachClassKeepsTheLengthItPays) {
  ClassSim s(Governor(by_class_on(), 4));
  s.gov.use_classes({0.5, 0.5});
  ASSERT_TRUE(s.gov.by_class());
  auto text = [](int cls, int kept) { return cls == 0 ? kept : 0; };
  for (int r = 0; r < 200; ++r) s.round(r % 2, 4, text);
  int class0_full = 0, class1_plain = 0;
  for (size_t i = 100; i < s.decisions.size(); ++i) {
    const Governor::Decision& d = s.decisions[i];
    if (i % 2 == 0) class0_full += d.gamma == 4 && d.reason == R::kClassDraft;
    else class1_plain += d.gamma == 0 && d.reason == R::kClassPlain;
  }
  EXPECT_GE(class0_full, 45);  // of 50; refresh probes may take a few
  EXPECT_GE(class1_plain, 45);
  // The pooled governor, on the same text, cannot tell them apart: fewer tokens per ms.
  GovernorConfig pooled_cfg = by_class_on();
  pooled_cfg.by_class = false;
  ClassSim pooled(Governor(pooled_cfg, 4));
  pooled.gov.use_classes({0.5, 0.5});
  EXPECT_FALSE(pooled.gov.by_class());
  for (int r = 0; r < 200; ++r) pooled.round(r % 2, 4, text);
  EXPECT_GT(s.tokens / s.ms, 1.05 * (pooled.tokens / pooled.ms));
}

// A class taken for 2 tokens then never: the cut keeps 2 (the third token costs a row and gains nothing).
TEST(GovernorByClass, CutsWhereTheClassStopsBeingTaken) {
  ClassSim s(Governor(by_class_on(), 4));
  s.gov.use_classes({0.5});
  for (int r = 0; r < 150; ++r) s.round(0, 4, [](int, int kept) { return std::min(kept, 2); });
  int two = 0;
  for (size_t i = 50; i < s.decisions.size(); ++i) two += s.decisions[i].gamma == 2;
  EXPECT_GE(two, 85);  // of 100; refresh probes draft all 4 now and then
  EXPECT_GT(s.gov.class_rate(0, 2), s.gov.class_rate(0, 4));
  EXPECT_GT(s.gov.class_rate(0, 2), s.gov.plain_rate());
}

// The draft is never lengthened past what was drafted or the governor's gamma; warm-up and probes
// keep their decision; an unknown class changes nothing; every round is counted once.
TEST(GovernorByClass, OnlyRateDecisionsAreCut) {
  Governor g(by_class_on(), 4);
  g.use_classes({0.9, 0.1});
  const Governor::Decision warm = g.decide(4);
  ASSERT_EQ(warm.reason, R::kWarmup);
  EXPECT_EQ(g.cut(warm, 0, 4).reason, R::kWarmup);
  g.observe({.gamma = 4, .drafted = 4, .accepted = 4, .draft_ms = 0.05, .verify_ms = verify(5), .rest_ms = 0.1, .cls = 0});
  g.observe({.gamma = 4, .drafted = 4, .accepted = 4, .draft_ms = 0.05, .verify_ms = verify(5), .rest_ms = 0.1, .cls = 0});
  const Governor::Decision d = g.decide(4);
  ASSERT_TRUE(d.reason == R::kDraft || d.reason == R::kPlain);
  EXPECT_EQ(g.cut(d, 7, 4).reason, d.reason) << "an unknown class";
  const Governor::Decision c = g.cut(d, 0, 2);
  EXPECT_EQ(c.gamma, 2) << "class 0 pays; its draft had 2 tokens";
  EXPECT_EQ(c.reason, R::kClassDraft);
  const GovernorStats& st = g.stats();
  int64_t sum = 0;
  for (int64_t n : st.rounds) sum += n;
  EXPECT_EQ(sum, 2);  // the warm-up round and the cut one
  EXPECT_EQ(st.plain_rounds + st.drafting_rounds, 2);
  EXPECT_EQ(st.to_json()["rounds_by_reason"]["class_draft"].get<int64_t>(), 1);
  EXPECT_EQ(g.cut(g.decide(4), 1, 4).gamma, 0) << "class 1 (prior 0.1) does not pay";
  EXPECT_EQ(g.stats().to_json()["rounds_by_reason"]["class_plain"].get<int64_t>(), 1);
}

// By class needs classes and the switch on; deciding from constants (sampled requests) it weighs the
// table's costs alone. The same priors on a later request keep what was learned, others start afresh.
TEST(GovernorByClass, WhenItApplies) {
  Governor g(by_class_on(), 4);
  EXPECT_FALSE(g.by_class()) << "no classes";
  g.use_classes({0.5, 0.5});
  EXPECT_TRUE(g.by_class());
  GovernorConfig pooled = by_class_on();
  pooled.by_class = false;
  Governor p(pooled, 4);
  p.use_classes({0.5});
  EXPECT_FALSE(p.by_class());
  GovernorConfig constants = by_class_on();
  constants.deterministic = true;  // sampled requests decide from constants only
  Governor k(constants, 4);
  k.use_classes({0.5});
  EXPECT_TRUE(k.by_class());
  k.observe({.gamma = 4, .drafted = 4, .accepted = 0, .draft_ms = 9, .verify_ms = 99, .rest_ms = 9, .cls = 0});
  EXPECT_NEAR(k.class_rate(0, 1), (1.0 + 2.0 / 5.0) / verify(2), 1e-12) << "the table's V(2), no measured rest";

  ClassSim s(Governor(by_class_on(), 4));
  s.gov.use_classes({0.5, 0.5});
  for (int r = 0; r < 60; ++r) s.round(1, 4, [](int, int) { return 0; });
  const double learned = s.gov.class_rate(1, 1);
  s.gov.begin_request(by_class_on(), 4);
  s.gov.use_classes({0.5, 0.5});
  EXPECT_EQ(s.gov.class_rate(1, 1), learned);
  s.gov.use_classes({0.5, 0.6});
  EXPECT_GT(s.gov.class_rate(1, 1), learned);
}

}  // namespace
}  // namespace dspark::speculative
