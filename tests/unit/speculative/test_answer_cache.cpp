// The answer cache (speculative/answer_cache.h): continuations of answers already stored, longest context
// match first and the latest occurrence of it; never text that is not in the pool behind the match
// (checked against the stream itself on random pools, through wrap-around and table collisions).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "speculative/answer_cache.h"
#include "speculative/drafter_ngram.h"
#include "speculative/drafter_suffix.h"

namespace dspark::speculative {
namespace {

using Ids = std::vector<int32_t>;

TEST(AnswerCache, ContinuesAStoredAnswerFromTheEndOfItsPrompt) {
  AnswerCache c({.capacity_tokens = 1024});
  Ids out;
  EXPECT_EQ(c.propose(Ids{1, 2, 3}, 4, &out), 0);
  EXPECT_TRUE(out.empty());
  c.add(Ids{9, 9, 1, 2, 3}, Ids{10, 11, 12, 13});
  // The prompt's tail (lead-in) and the first answer token: the rest of the answer, up to its end.
  EXPECT_EQ(c.propose(Ids{7, 2, 3, 10}, 8, &out), 3);
  EXPECT_EQ(out, (Ids{11, 12, 13}));
  EXPECT_EQ(c.propose(Ids{1, 2, 3, 10}, 2, &out), 4);  // the longest match; at most max_n tokens
  EXPECT_EQ(out, (Ids{11, 12}));
  EXPECT_EQ(c.propose(Ids{5, 5, 12, 13}, 4, &out), 0);  // 12 13 ends the answer: nothing follows
  EXPECT_EQ(c.propose(Ids{3, 10}, 4, &out), 0);          // shorter than min_match
  const auto st = c.stats();
  EXPECT_EQ(st["answers"], 1);
  EXPECT_EQ(st["hits"], 2);
  EXPECT_EQ(st["queries"], 5);
}

TEST(AnswerCache, ReportsTheWholeAgreementUpToMaxExtend) {
  AnswerCache c({.capacity_tokens = 1024});
  Ids prompt, answer;
  for (int i = 0; i < 20; ++i) prompt.push_back(100 + i);
  for (int i = 0; i < 40; ++i) answer.push_back(200 + i);
  c.add(prompt, answer);
  // The same question again: its last 16 tokens (the stored lead-in) and the pending answer token agree.
  Ids ctx = prompt;
  ctx.push_back(200);
  Ids out;
  EXPECT_EQ(c.propose(ctx, 2, &out), 17);
  EXPECT_EQ(out, (Ids{201, 202}));
  // Deep into the answer: capped at max_extend.
  ctx.insert(ctx.end(), answer.begin() + 1, answer.begin() + 35);
  EXPECT_EQ(c.propose(ctx, 2, &out), 32);
  EXPECT_EQ(out, (Ids{235, 236}));
  ctx[ctx.size() - 5] = 7;  // a disagreement 5 tokens back: the match is the 4 after it
  EXPECT_EQ(c.propose(ctx, 1, &out), 4);
}

TEST(AnswerCache, LongestMatchFirstThenTheLatestAnswer) {
  AnswerCache c({.capacity_tokens = 1024});
  c.add(Ids{}, Ids{1, 2, 3, 4, 5, 50});
  c.add(Ids{}, Ids{8, 3, 4, 5, 60});
  c.add(Ids{}, Ids{9, 3, 4, 5, 70});
  Ids out;
  EXPECT_EQ(c.propose(Ids{2, 3, 4, 5}, 1, &out), 4);  // 2 3 4 5 occurs in the first answer only
  EXPECT_EQ(out, (Ids{50}));
  EXPECT_EQ(c.propose(Ids{7, 3, 4, 5}, 1, &out), 3);  // 3 4 5: the latest answer's continuation
  EXPECT_EQ(out, (Ids{70}));
}

TEST(AnswerCache, OldAnswersLeaveWhenTheRingWraps) {
  AnswerCache c({.capacity_tokens = 64});
  c.add(Ids{}, Ids{100, 101, 102, 103, 104});
  Ids out;
  EXPECT_EQ(c.propose(Ids{100, 101, 102}, 2, &out), 3);
  for (int i = 0; i < 20; ++i) c.add(Ids{}, Ids{200 + i, 201 + i, 202 + i, 203 + i});  // 100 tokens more
  EXPECT_EQ(c.propose(Ids{100, 101, 102}, 2, &out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(c.propose(Ids{219, 220, 221}, 2, &out), 3);
  EXPECT_EQ(out, (Ids{222}));
  EXPECT_EQ(c.stats()["tokens"], 64);
}

TEST(AnswerCache, BudgetSizesTheCache) {
  EXPECT_EQ(AnswerCache::capacity_for(100), 0);
  const int64_t cap = AnswerCache::capacity_for(16 << 20);
  EXPECT_GE(cap, 64);
  EXPECT_LE(AnswerCache::bytes_for(cap), 16 << 20);
  EXPECT_GT(AnswerCache::bytes_for(cap * 2), 16 << 20);
  AnswerCache c({.capacity_tokens = cap});
  EXPECT_EQ(c.stats()["bytes"], AnswerCache::bytes_for(cap));
}

// Random pools over a small vocabulary (many equal k-grams, collisions in a small table, wrap-around):
// every proposal continues an occurrence of the matched context in the pool's live window.
TEST(AnswerCache, ProposesOnlyTextThatFollowsTheMatchInThePool) {
  std::mt19937 rng(3);
  AnswerCacheConfig cfg{.capacity_tokens = 256};
  AnswerCache c(cfg);
  Ids stream;  // what the ring holds: lead-in + answer + separator per add
  int hits = 0;
  for (int round = 0; round < 300; ++round) {
    Ids prompt, answer;
    for (int i = 0, n = (int)(rng() % 12); i < n; ++i) prompt.push_back((int32_t)(rng() % 6));
    for (int i = 0, n = 1 + (int)(rng() % 30); i < n; ++i) answer.push_back((int32_t)(rng() % 6));
    c.add(prompt, answer);
    const size_t lead = std::min<size_t>(prompt.size(), (size_t)cfg.lead_in);
    stream.insert(stream.end(), prompt.end() - (ptrdiff_t)lead, prompt.end());
    stream.insert(stream.end(), answer.begin(), answer.end());
    stream.push_back(-1);
    const size_t live_from = stream.size() > 256 ? stream.size() - 256 : 0;
    Ids ctx;
    for (int i = 0, n = 3 + (int)(rng() % 6); i < n; ++i) ctx.push_back((int32_t)(rng() % 6));
    Ids out;
    const int k = c.propose(ctx, 6, &out);
    if (k == 0) {
      EXPECT_TRUE(out.empty());
      continue;
    }
    ++hits;
    ASSERT_GE(k, cfg.min_match);
    ASSERT_FALSE(out.empty());
    bool found = false;
    for (size_t p = live_from; p + (size_t)k + out.size() <= stream.size() && !found; ++p) {
      found = std::equal(ctx.end() - k, ctx.end(), stream.begin() + (ptrdiff_t)p) &&
              std::equal(out.begin(), out.end(), stream.begin() + (ptrdiff_t)(p + (size_t)k));
      // The proposal stops at the answer's end or at max_n.
      if (found && out.size() < 6 && p + (size_t)k + out.size() < stream.size())
        found = stream[p + (size_t)k + out.size()] == -1 || p + (size_t)k + out.size() == stream.size();
    }
    EXPECT_TRUE(found) << "round " << round << " k " << k;
  }
  EXPECT_GT(hits, 50);
}

TEST(AnswerCache, NgramDrafterTriesItBetweenLongAndOneTokenLookups) {
  AnswerCache c({.capacity_tokens = 256});
  c.add(Ids{}, Ids{40, 41, 42, 43, 44});
  std::vector<int32_t> out;
  NgramDrafter d;
  d.use_answer_cache(&c);
  ASSERT_TRUE(d.begin(Ids{5, 6, 7, 5, 6, 40, 41}, {}).is_ok());
  DraftResult r;
  // Context ... 40 41 + pending 42: no own match of 2+, the cache continues 40 41 42 -> 43 44.
  ASSERT_TRUE(d.draft({42, 7, 4, {}, nullptr}, &r).is_ok());
  EXPECT_EQ(r.tokens, (Ids{43, 44}));
  ASSERT_TRUE(d.commit(Ids{42, 43}, 7, {}).is_ok());
  EXPECT_EQ(d.stats()["answer_cache"]["accepted"], 1);
  // Pending 6 after ... 43: own 2-token match "43 6"? none; the cache has no "44"-free match of 43 6
  // either; the one-token lookup "6" -> 40 (its latest occurrence in the context).
  ASSERT_TRUE(d.draft({6, 9, 3, {}, nullptr}, &r).is_ok());
  EXPECT_EQ(r.tokens, (Ids{40, 41, 42}));
  std::unique_ptr<Drafter> forked = d.fork();  // a fork carries no cache and no request
  ASSERT_TRUE(forked->begin(Ids{5, 6, 7, 5, 6, 40, 41}, {}).is_ok());
  ASSERT_TRUE(forked->draft({42, 7, 4, {}, nullptr}, &r).is_ok());
  EXPECT_TRUE(r.tokens.empty());
  NgramDrafter plain;  // the same without a cache: the one-token lookup at once
  ASSERT_TRUE(plain.begin(Ids{5, 6, 7, 5, 6, 40, 41}, {}).is_ok());
  ASSERT_TRUE(plain.draft({42, 7, 4, {}, nullptr}, &r).is_ok());
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_TRUE(plain.stats().empty());
}

TEST(AnswerCache, SuffixDrafterTriesItBeforeTheIndex) {
  Ids stream = {40, 41, 42, 90, kSuffixSeparator};
  auto index = SuffixIndex::from_arrays(stream, build_suffix_array(stream));
  AnswerCache c({.capacity_tokens = 256});
  Ids out;
  const Ids seq = {1, 2, 40, 41, 42};
  EXPECT_EQ(suffix_draft(seq, *index, {}, 3, &out, nullptr), SuffixSource::kIndex);
  EXPECT_EQ(out, (Ids{90}));
  c.add(Ids{}, Ids{7, 40, 41, 42, 77, 78});
  EXPECT_EQ(suffix_draft(seq, *index, {}, 3, &out, &c), SuffixSource::kCache);
  EXPECT_EQ(out, (Ids{77, 78}));
}

}  // namespace
}  // namespace dspark::speculative
