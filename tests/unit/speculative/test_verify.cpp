// Pure acceptance rules and the n-gram matcher.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "speculative/drafter_ngram.h"
#include "speculative/verify.h"

namespace dspark::speculative {
namespace {

TEST(AcceptGreedy, LongestPrefixThenTargetToken) {
  const std::vector<int32_t> argmax = {5, 6, 9, 1};
  EXPECT_EQ(accept_greedy(argmax, std::vector<int32_t>{5, 6, 7}).n_accept, 2);
  EXPECT_EQ(accept_greedy(argmax, std::vector<int32_t>{5, 6, 7}).next, 9);   // correction
  EXPECT_EQ(accept_greedy(argmax, std::vector<int32_t>{5, 6, 9}).n_accept, 3);
  EXPECT_EQ(accept_greedy(argmax, std::vector<int32_t>{5, 6, 9}).next, 1);   // bonus
  EXPECT_EQ(accept_greedy(argmax, std::vector<int32_t>{4, 6, 9}).n_accept, 0);
  const std::vector<int32_t> one = {3};
  EXPECT_EQ(accept_greedy(one, std::vector<int32_t>{}).next, 3);             // empty draft
}

// The emitted token at the first position must follow p exactly, whatever q proposes.
TEST(AcceptRejection, FirstTokenFollowsTargetDistribution) {
  const std::vector<sample::TokenProb> p0 = {{0, 0.5f}, {1, 0.3f}, {2, 0.15f}, {3, 0.05f}};
  const std::vector<sample::TokenProb> p1 = {{0, 0.25f}, {1, 0.25f}, {2, 0.25f}, {3, 0.25f}};
  const SparseDist q0 = {{0, 0.1f}, {1, 0.1f}, {2, 0.1f}, {3, 0.7f}};  // disagrees with p0
  Rng rng(1);
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    // Draft drawn from q0.
    const double u = rng.uniform();
    const int32_t d = u < 0.1 ? 0 : u < 0.2 ? 1 : u < 0.3 ? 2 : 3;
    std::vector<std::vector<sample::TokenProb>> p = {p0, p1};
    std::vector<SparseDist> q = {q0};
    const Acceptance a = accept_rejection_ref(p, std::vector<int32_t>{d}, q, rng);
    counts[a.n_accept == 1 ? d : a.next]++;
  }
  double chi2 = 0;
  for (const auto& tp : p0) chi2 += std::pow(counts[tp.id] - n * tp.p, 2) / (n * tp.p);
  EXPECT_LT(chi2, 16.27);  // 3 degrees of freedom, p = 0.001
}

TEST(AcceptRejection, OneHotDraftAcceptsWithTargetProbability) {
  const std::vector<sample::TokenProb> p0 = {{7, 0.8f}, {8, 0.2f}};
  Rng rng(2);
  int accepted = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<std::vector<sample::TokenProb>> p = {p0, p0};
    std::vector<SparseDist> q = {{{7, 1.0f}}};
    const Acceptance a = accept_rejection_ref(p, std::vector<int32_t>{7}, q, rng);
    accepted += a.n_accept;
    if (a.n_accept == 0) {
      EXPECT_EQ(a.next, 8);  // the residual excludes the rejected draft
    }
  }
  EXPECT_NEAR((double)accepted / n, 0.8, 0.015);
}

TEST(Ngram, LatestLongestMatch) {
  const std::vector<int32_t> seq = {1, 2, 3, 9, 1, 2, 3, 4, 5, 7, 1, 2, 3};
  const NgramConfig cfg{3, 1};
  EXPECT_EQ(ngram_lookup(seq, cfg, 3), (std::vector<int32_t>{4, 5, 7}));  // latest "1 2 3" is at 4
  EXPECT_EQ(ngram_lookup(seq, cfg, 1), (std::vector<int32_t>{4}));
  const std::vector<int32_t> none = {1, 2, 3, 4};
  EXPECT_TRUE(ngram_lookup(none, cfg, 3).empty());
  const std::vector<int32_t> short_match = {5, 6, 8, 6};  // only the 1-gram "6" repeats
  EXPECT_EQ(ngram_lookup(short_match, cfg, 2), (std::vector<int32_t>{8, 6}));
}

// The match's extent: how far back the agreement goes (the latest match, not the longest).
TEST(Ngram, MatchExtent) {
  // The latest "2 3 4" before the end starts at 8 (its continuation at 11). The token before it, 1,
  // equals the one before the final "2 3 4"; the one before that (8 against 5) does not: extent 4.
  const std::vector<int32_t> seq = {7, 1, 2, 3, 4, 9, 8, 1, 2, 3, 4, 5, 1, 2, 3, 4};
  const NgramMatch m = ngram_match(seq, {3, 2}, 16);
  EXPECT_EQ(m.from, 11);
  EXPECT_EQ(m.n, 3);
  EXPECT_EQ(m.extent, 4);
  EXPECT_EQ(ngram_match(seq, {3, 2}, 0).extent, 3) << "a cap at or below n counts n";
  EXPECT_EQ(ngram_match(seq, {3, 2}, 4).extent, 4);
  // Agreement to the start of the sequence: [1 2 3 4 | 1 2 3 4] -> the match at 1, extent 3 + 1.
  const std::vector<int32_t> rep = {1, 2, 3, 4, 1, 2, 3, 4};
  EXPECT_EQ(ngram_match(rep, {3, 2}, 16).extent, 4);
  EXPECT_EQ(ngram_match(std::vector<int32_t>{1, 2, 3}, {3, 2}, 16).from, -1);
}

TEST(Ngram, DrafterTracksHistory) {
  NgramDrafter d;
  const std::vector<int32_t> prompt = {10, 11, 12, 10};
  ASSERT_TRUE(d.begin(prompt, {}).is_ok());
  DraftResult out;
  ASSERT_TRUE(d.draft({11, 4, 4, {}, nullptr}, &out).is_ok());  // history 10 11 12 10 + pending 11
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{12, 10, 11}));
  ASSERT_TRUE(d.commit(std::vector<int32_t>{11, 12}, 4, {}).is_ok());
  EXPECT_FALSE(d.commit(std::vector<int32_t>{1}, 99, {}).is_ok());
}

}  // namespace
}  // namespace dspark::speculative
