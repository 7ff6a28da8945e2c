// The DSpark copy head: lookups over history + pending + drafts, longest match first, and the
// online acceptance counts (only slots the target evaluated count).
#include <gtest/gtest.h>

#include <vector>

#include "dspark/copy_head.h"

namespace dspark::net {
namespace {

CopyHeadConfig cfg(int max_ngram, int min_ngram) {
  CopyHeadConfig c;
  c.max_ngram = max_ngram;
  c.min_ngram = min_ngram;
  return c;
}

// The same with priors: prior_acceptance (empty: uninformed), their weight and the exploration count.
CopyHeadConfig cfg(int max_ngram, int min_ngram, std::vector<double> prior, double weight, int explore = 8) {
  CopyHeadConfig c = cfg(max_ngram, min_ngram);
  c.prior_acceptance = std::move(prior);
  c.prior_weight = weight;
  c.explore_evaluations = explore;
  return c;
}

TEST(CopyHead, ProposesTheSuccessorOfTheLatestLongestMatch) {
  CopyHead h(cfg(3, 1));
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 5, 6};
  h.begin(prompt);
  h.start_draft(7);  // ... 5 6 7 -> matches [0, 3): successor 8
  CopyProposal p = h.propose();
  EXPECT_EQ(p.token, 8);
  EXPECT_EQ(p.n, 3);
  h.push(8, p.n);  // ... 5 6 7 8 -> successor 9
  p = h.propose();
  EXPECT_EQ(p.token, 9);
  EXPECT_EQ(p.n, 3);
  h.push(42, 0);  // a drafter token nobody saw before: no match of any length
  p = h.propose();
  EXPECT_EQ(p.token, -1);
  EXPECT_EQ(p.n, 0);
}

TEST(CopyHead, ShorterMatchWhenTheLongOneIsAbsentAndLatestOccurrenceWins) {
  CopyHead h(cfg(3, 2));
  h.begin(std::vector<int32_t>{1, 2, 3, 9, 2, 3, 4});
  h.start_draft(2);  // suffix "4 2": absent; "... 3 4 2"? absent; n = 2 "4 2" absent -> none (min 2)
  EXPECT_EQ(h.propose().token, -1);
  h.start_draft(3);  // suffix "4 3" absent; n = 2 fails; min_ngram 2 -> none
  EXPECT_EQ(h.propose().token, -1);
  CopyHead h1(cfg(3, 1));
  h1.begin(std::vector<int32_t>{1, 2, 3, 9, 2, 3, 4});
  h1.start_draft(3);  // n = 1: latest earlier "3" is at index 5 -> successor 4
  const CopyProposal p = h1.propose();
  EXPECT_EQ(p.token, 4);
  EXPECT_EQ(p.n, 1);
}

TEST(CopyHead, RetrievalKindsFollowTheMatchLengthsWithTheirOwnPriors) {
  CopyHeadConfig c = cfg(3, 1);
  c.prior_acceptance = {0.5, 0.2, 0.5, 0.8};
  c.index_share_edges = {0.1, 0.3, 0.6};
  c.index_prior = {0.25, 0.4, 0.6};
  CopyHead h(c);
  EXPECT_EQ(h.kinds(), 7);
  EXPECT_TRUE(h.has_index_kinds());
  EXPECT_EQ(h.index_kind(0.05), -1);
  EXPECT_EQ(h.index_kind(0.1), 4);
  EXPECT_EQ(h.index_kind(0.45), 5);
  EXPECT_EQ(h.index_kind(1.0), 6);
  EXPECT_DOUBLE_EQ(h.confidence(6), 0.6);
  EXPECT_DOUBLE_EQ(h.confidence(3), 0.8);
  // A copied slot of a retrieval kind is counted under that kind.
  h.begin(std::vector<int32_t>{1, 2, 3});
  h.start_draft(4);
  h.push(7, 6);
  h.push(8, 6);
  ASSERT_TRUE(h.commit(std::vector<int32_t>{4, 7}, 3));  // pending 4, then 7 accepted; 8 rejected
  EXPECT_DOUBLE_EQ(h.confidence(6), (20 * 0.6 + 1) / (20 + 2));
  const auto st = h.stats()["by_index_share"];
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[2]["evaluated"], 2.0);
  EXPECT_EQ(st[2]["accepted"], 1.0);
  EXPECT_FALSE(CopyHead(cfg(3, 1)).has_index_kinds());
}

TEST(CopyHead, CountsOnlyEvaluatedCopiedSlots) {
  CopyHead h(cfg(3, 1));
  EXPECT_DOUBLE_EQ(h.confidence(3), 0.5);
  h.begin(std::vector<int32_t>{1, 2, 3, 1, 2});
  h.start_draft(3);
  h.push(1, 3);
  h.push(2, 3);
  h.push(50, 0);
  h.push(3, 2);
  // Target accepted 2 drafts: slots 0, 1 accepted; slot 2 (drafter) rejected; slot 3 unseen.
  const std::vector<int32_t> committed = {3, 1, 2};
  ASSERT_TRUE(h.commit(committed, 5));
  EXPECT_DOUBLE_EQ(h.confidence(3), (2.0 + 1.0) / (2.0 + 2.0));
  EXPECT_DOUBLE_EQ(h.confidence(2), 0.5);  // slot 3 was never evaluated
  EXPECT_DOUBLE_EQ(h.confidence(0), 1.0 / 3.0);  // the drafter's slot 2: evaluated, rejected
  EXPECT_DOUBLE_EQ(h.schedule_confidence(3), 1.0) << "2 evaluations < 8: still exploring";
  EXPECT_EQ(h.history_len(), 8);
  // A rejected copied slot at position 0.
  h.start_draft(7);
  h.push(3, 3);
  ASSERT_TRUE(h.commit(std::vector<int32_t>{7}, 8));
  EXPECT_DOUBLE_EQ(h.confidence(3), (2.0 + 1.0) / (3.0 + 2.0));
  EXPECT_FALSE(h.commit(std::vector<int32_t>{7}, 3)) << "a commit that does not continue the history";
  const auto j = h.stats();
  EXPECT_EQ(j["slots_copied"], 4u);
  EXPECT_EQ(j["slots_copied_accepted"], 2u);
  EXPECT_EQ(j["slots_drafter"], 1u);
}

TEST(CopyHead, ScheduleUsesTheEstimateOnceExplored) {
  CopyHead h(cfg(2, 1, {}, 20, 2));
  h.begin(std::vector<int32_t>{1, 2});
  for (int r = 0; r < 2; ++r) {  // two rejected copied slots of match length 1
    h.start_draft(1);
    EXPECT_DOUBLE_EQ(h.schedule_confidence(1), 1.0);
    h.push(2, 1);
    ASSERT_TRUE(h.commit(std::vector<int32_t>{1}, h.history_len()));
  }
  EXPECT_DOUBLE_EQ(h.schedule_confidence(1), 0.25);
  EXPECT_DOUBLE_EQ(h.schedule_confidence(1), h.confidence(1));
}

TEST(CopyHead, CalibratedPriorsAndNoExploration) {
  CopyHead h(cfg(2, 1, {0.2, 0.3, 0.9}, 10, 8));
  EXPECT_DOUBLE_EQ(h.confidence(0), 0.2);
  EXPECT_DOUBLE_EQ(h.schedule_confidence(2), 0.9) << "a calibrated prior needs no exploration";
  h.begin(std::vector<int32_t>{1, 2, 1});
  h.start_draft(2);
  h.push(1, 2);
  ASSERT_TRUE(h.commit(std::vector<int32_t>{2}, 3));  // rejected
  EXPECT_DOUBLE_EQ(h.confidence(2), 9.0 / 11.0);
}

TEST(CopyHead, ShadowScoresBothProposersAtEvaluatedSlots) {
  CopyHead h(cfg(3, 1));
  h.begin(std::vector<int32_t>{1, 2, 3});
  h.start_draft(4);
  h.push(10, 3, 3, 11);  // copied (match 3); the network would have drafted 11
  h.push(20, 0, 1, 21);  // the network's slot; the copy had 21 (match 1)
  h.push(30, 0, 0, -1);  // the network's slot, no copy: no alternative
  h.push(40, 2, 2, 41);  // never evaluated
  // Slots 0 and 1 accepted, slot 2 rejected: the target's token there is the next pending (30 is wrong).
  ASSERT_TRUE(h.commit(std::vector<int32_t>{4, 10, 20}, 3));
  auto cells = h.stats()["shadow"];
  ASSERT_EQ(cells.size(), 2u) << "the rejected slot waits for the target's token";
  h.start_draft(31);
  cells = h.stats()["shadow"];
  ASSERT_EQ(cells.size(), 3u);
  auto cell = [&](const std::string& by, int n) {
    for (const auto& c : cells)
      if (c["drafted_by"] == by && c["copy_match"] == n) return c;
    ADD_FAILURE() << by << " " << n;
    return nlohmann::json{};
  };
  EXPECT_EQ(cell("copy", 3)["evaluated"], 1u);
  EXPECT_EQ(cell("copy", 3)["accepted"], 1u);
  EXPECT_EQ(cell("copy", 3)["alt_seen"], 1u);
  EXPECT_EQ(cell("copy", 3)["alt_right"], 0u);
  EXPECT_EQ(cell("drafter", 1)["accepted"], 1u);
  EXPECT_EQ(cell("drafter", 1)["alt_right"], 0u);
  EXPECT_EQ(cell("drafter", 0)["evaluated"], 1u);
  EXPECT_EQ(cell("drafter", 0)["accepted"], 0u);
  EXPECT_EQ(cell("drafter", 0)["alt_seen"], 0u);
  // A rejected slot whose alternative was the target's token.
  h.push(7, 0, 2, 8);
  ASSERT_TRUE(h.commit(std::vector<int32_t>{31}, 6));
  h.start_draft(8);
  cells = h.stats()["shadow"];
  EXPECT_EQ(cell("drafter", 2)["evaluated"], 1u);
  EXPECT_EQ(cell("drafter", 2)["accepted"], 0u);
  EXPECT_EQ(cell("drafter", 2)["alt_right"], 1u);
}

TEST(CopyHead, SampledRequestsStartFromTheSampledPriors) {
  CopyHeadConfig c = cfg(2, 1, {0.4, 0.3, 0.8}, 10);
  c.prior_acceptance_sampled = {0.25, 0.2, 0.5};
  CopyHead h(c);
  EXPECT_DOUBLE_EQ(h.confidence(0), 0.4);
  h.use_sampled_priors(true);
  EXPECT_DOUBLE_EQ(h.confidence(0), 0.25);
  EXPECT_DOUBLE_EQ(h.schedule_confidence(2), 0.5);
  h.use_sampled_priors(false);
  EXPECT_DOUBLE_EQ(h.confidence(2), 0.8);
  CopyHead g(cfg(2, 1, {0.4, 0.3, 0.8}, 10));
  g.use_sampled_priors(true);
  EXPECT_DOUBLE_EQ(g.confidence(0), 0.4) << "no sampled set: the greedy priors";
}

TEST(CopyHead, CommitWithoutDraftAppends) {
  CopyHead h;
  h.begin(std::vector<int32_t>{4, 5});
  ASSERT_TRUE(h.commit(std::vector<int32_t>{4}, 2));
  h.start_draft(5);  // 4 5 4 5 -> successor of the latest earlier "4 5"... is 4
  EXPECT_EQ(h.propose().token, 4);
}

}  // namespace
}  // namespace dspark::net
