// speculative::SuffixIndex (retrieval drafting): exact proposals on a hand-made corpus, the suffix array and
// queries against brute-force references, the file's round trip and every way a file is refused,
// and the suffix drafter's choice of source.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>

#include "speculative/drafter_suffix.h"
#include "speculative/suffix_index.h"

namespace dspark::speculative {
namespace {

constexpr int32_t S = kSuffixSeparator;
constexpr int32_t kVocab = 16;
const std::string kFp(64, 'a');  // a tokenizer fingerprint (hex digits)

// Four answers: 1 2 3 4 5 | 1 2 3 4 6 | 1 2 3 7 | 9 2 3 4 5.
std::vector<int32_t> tiny_stream() { return {1, 2, 3, 4, 5, S, 1, 2, 3, 4, 6, S, 1, 2, 3, 7, S, 9, 2, 3, 4, 5, S}; }

std::shared_ptr<const SuffixIndex> index_of(std::vector<int32_t> stream) {
  auto sa = build_suffix_array(stream);
  return SuffixIndex::from_arrays(std::move(stream), std::move(sa));
}

std::string tmp_path(const char* name) { return ::testing::TempDir() + name; }

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
}

TEST(SuffixIndex, TinyCorpusExactProposals) {
  auto ix = index_of(tiny_stream());
  SuffixQueryConfig cfg;  // contexts 2..8, min_prob 0.1
  // [8 2 3]: no 3-token match; [2 3] occurs 4 times, next 4 (3 of 4), then 5 (2 of 4), then the end.
  SuffixProposal p = ix->propose(std::vector<int32_t>{8, 2, 3}, cfg, 8);
  EXPECT_EQ(p.context_len, 2);
  EXPECT_EQ(p.context_count, 4u);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(p.support, (std::vector<uint32_t>{3, 2}));
  // The adaptive length: 2 of 4 is below 0.6, so the draft stops after 4.
  cfg.min_prob = 0.6;
  EXPECT_EQ(ix->propose(std::vector<int32_t>{8, 2, 3}, cfg, 8).tokens, (std::vector<int32_t>{4}));
  cfg.min_prob = 0.1;
  // [1 2 3]: 3 occurrences, 4 twice, then 5 and 6 once each: the tie goes to the smaller id.
  p = ix->propose(std::vector<int32_t>{1, 2, 3}, cfg, 8);
  EXPECT_EQ(p.context_len, 3);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(p.support, (std::vector<uint32_t>{2, 1}));
  EXPECT_EQ(ix->propose(std::vector<int32_t>{1, 2, 3}, cfg, 1).tokens, (std::vector<int32_t>{4}));  // max_n
  // max_context 3 matches [1 2 3] of [5 1 2 3] ([5 1 2 3] itself does not occur either).
  cfg.max_context = 3;
  EXPECT_EQ(ix->propose(std::vector<int32_t>{5, 1, 2, 3}, cfg, 8).context_len, 3);
  cfg.max_context = 8;
  // [3 7] occurs only at a sequence's end: no continuation; [7] alone is shorter than min_context.
  p = ix->propose(std::vector<int32_t>{3, 7}, cfg, 8);
  EXPECT_EQ(p.context_len, 0);
  EXPECT_TRUE(p.tokens.empty());
  // A match never crosses a separator: [5 1] is not in the corpus although "5 | 1" is.
  EXPECT_EQ(ix->propose(std::vector<int32_t>{5, 1}, cfg, 8).context_len, 0);
  // range(): [2 3 4] starts 3 suffixes.
  auto [lo, hi] = ix->range(std::vector<int32_t>{2, 3, 4});
  EXPECT_EQ(hi - lo, 3u);
}

// Every suffix of the stream as a vector (up to and including its separator), for the reference order.
std::vector<uint32_t> suffix_array_by_copies(const std::vector<int32_t>& s) {
  std::vector<std::pair<std::vector<int32_t>, uint32_t>> all;
  for (uint32_t p = 0; p < s.size(); ++p) {
    if (s[p] == S) continue;
    std::vector<int32_t> suf;
    for (uint32_t q = p; q < s.size(); ++q) {
      suf.push_back(s[q]);
      if (s[q] == S) break;
    }
    all.push_back({suf, p});
  }
  std::sort(all.begin(), all.end());
  std::vector<uint32_t> sa;
  for (const auto& a : all) sa.push_back(a.second);
  return sa;
}

std::vector<int32_t> random_stream(std::mt19937& rng, int n_seqs, int vocab) {
  std::vector<int32_t> s;
  for (int i = 0; i < n_seqs; ++i) {
    const int len = 1 + (int)(rng() % 30);
    for (int k = 0; k < len; ++k) s.push_back((int32_t)(rng() % (uint32_t)vocab));
    s.push_back(S);
  }
  return s;
}

TEST(SuffixIndex, ArrayAndQueriesMatchTheReferences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int vocab = 2 + trial % 5;  // small vocabularies: long, frequent matches
    const auto stream = random_stream(rng, 10 + trial * 3, vocab);
    const auto sa = build_suffix_array(stream);
    ASSERT_EQ(sa, suffix_array_by_copies(stream)) << trial;
    auto ix = SuffixIndex::from_arrays(stream, sa);
    for (int q = 0; q < 30; ++q) {
      std::vector<int32_t> ctx;
      const int len = 1 + (int)(rng() % 10);
      for (int k = 0; k < len; ++k) ctx.push_back((int32_t)(rng() % (uint32_t)(vocab + 1)));  // vocab: unseen id
      SuffixQueryConfig cfg;
      cfg.min_context = 1 + q % 3;
      cfg.max_context = cfg.min_context + q % 6;
      cfg.min_prob = 0.05 * (q % 5);
      const int max_n = 1 + q % 7;
      const SuffixProposal a = ix->propose(ctx, cfg, max_n), b = propose_by_scan(stream, ctx, cfg, max_n);
      EXPECT_EQ(a.tokens, b.tokens) << trial << "/" << q;
      EXPECT_EQ(a.support, b.support) << trial << "/" << q;
      EXPECT_EQ(a.context_len, b.context_len) << trial << "/" << q;
      EXPECT_EQ(a.context_count, b.context_count) << trial << "/" << q;
    }
  }
}

TEST(SuffixIndex, FileRoundTripIsByteReproducible) {
  const auto stream = tiny_stream();
  const auto sa = build_suffix_array(stream);
  const std::string a = tmp_path("sfx_a.sfx"), b = tmp_path("sfx_b.sfx");
  ASSERT_TRUE(write_suffix_index(a, stream, sa, kVocab, kFp, R"({"k":"meta"})"));
  ASSERT_TRUE(write_suffix_index(b, stream, build_suffix_array(stream), kVocab, kFp, R"({"k":"meta"})"));
  EXPECT_EQ(read_all(a), read_all(b));
  // header 176 + meta 12 bytes padded to 16 + 23 tokens + 19 suffixes, 4 bytes each
  EXPECT_EQ(read_all(a).size(), kSfxHeaderBytes + 16 + 4 * 23 + 4 * 19);
  auto ix = SuffixIndex::open(a, kVocab, kFp);
  ASSERT_TRUE(ix) << ix.message();
  EXPECT_TRUE(std::equal(stream.begin(), stream.end(), (*ix)->stream().begin(), (*ix)->stream().end()));
  EXPECT_TRUE(std::equal(sa.begin(), sa.end(), (*ix)->suffixes().begin(), (*ix)->suffixes().end()));
  EXPECT_EQ((*ix)->meta_json(), R"({"k":"meta"})");
  EXPECT_EQ((*ix)->propose(std::vector<int32_t>{8, 2, 3}, {}, 8).tokens, (std::vector<int32_t>{4, 5}));
  // Shared opens map a file once.
  auto s1 = SuffixIndex::open_shared(a, kVocab, kFp), s2 = SuffixIndex::open_shared(a, kVocab, kFp);
  ASSERT_TRUE(s1 && s2);
  EXPECT_EQ(s1->get(), s2->get());
}

// The error of opening `path` (empty if it opened).
std::string open_error(const std::string& path, int32_t vocab = kVocab, const std::string& fp = kFp) {
  auto ix = SuffixIndex::open(path, vocab, fp);
  return ix ? "" : ix.message();
}

TEST(SuffixIndex, BadFilesAreRefusedNamingTheFile) {
  const auto stream = tiny_stream();
  const std::string good = tmp_path("sfx_good.sfx"), bad = tmp_path("sfx_bad.sfx");
  ASSERT_TRUE(write_suffix_index(good, stream, build_suffix_array(stream), kVocab, kFp, "{}"));
  const std::vector<char> bytes = read_all(good);
  auto expect_refused = [&](const std::string& path, const std::string& needle, int32_t vocab = kVocab,
                            const std::string& fp = kFp) {
    const std::string e = open_error(path, vocab, fp);
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  };
  expect_refused(tmp_path("sfx_missing.sfx"), "cannot open");
  expect_refused(good, "vocabulary of 16 tokens, the target has 17", kVocab + 1);  // another model
  expect_refused(good, "another tokenizer", kVocab, std::string(64, 'b'));         // same size, other pieces
  std::vector<char> cut(bytes.begin(), bytes.end() - 1);  // truncated
  write_all(bad, cut);
  expect_refused(bad, "truncated or altered");
  write_all(bad, std::vector<char>(bytes.begin(), bytes.begin() + 100));  // not even a header
  expect_refused(bad, "truncated");
  std::vector<char> flip = bytes;  // one payload byte changed
  flip[kSfxHeaderBytes + 20] ^= 1;
  write_all(bad, flip);
  expect_refused(bad, "altered or corrupt");
  std::vector<char> magic = bytes;
  magic[0] = 'X';
  write_all(bad, magic);
  expect_refused(bad, "not a suffix index");
  std::vector<char> version = bytes;
  version[8] = 9;
  write_all(bad, version);
  expect_refused(bad, "format version 9");
  write_all(bad, {});
  expect_refused(bad, "truncated");
  EXPECT_EQ(open_error(good), "");
}

TEST(SuffixDrafter, OwnContextFirstThenTheIndexThenOneTokenLookup) {
  auto ix = index_of(tiny_stream());
  SuffixDrafterConfig cfg;
  std::vector<int32_t> out;
  // [10 11 12 10 11]: a 2-token match in the context itself wins (its continuation: 12 10 11).
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{10, 11, 12, 10, 11}, *ix, cfg, 4, &out), SuffixSource::kLookup);
  EXPECT_EQ(out, (std::vector<int32_t>{12, 10, 11}));
  // [2 3] occurs once in the context with a continuation, 2-token match: lookup (8), not the index (4).
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{2, 3, 8, 2, 3}, *ix, cfg, 4, &out), SuffixSource::kLookup);
  EXPECT_EQ(out, (std::vector<int32_t>{8, 2, 3}));
  // No 2-token match in the context: the index's [2 3] -> 4 5.
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{12, 2, 3}, *ix, cfg, 4, &out), SuffixSource::kIndex);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5}));
  // Neither: lookup's 1-token match (13 was followed by 14).
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{13, 14, 15, 13}, *ix, cfg, 4, &out), SuffixSource::kLookupOne);
  EXPECT_EQ(out, (std::vector<int32_t>{14, 15, 13}));
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{13, 14}, *ix, cfg, 4, &out), SuffixSource::kNone);
  EXPECT_TRUE(out.empty());
  // What each source saw, and the class it makes (Drafter::class_priors).
  SuffixDraftInfo info;
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{9, 10, 11, 12, 7, 9, 10, 11, 12}, *ix, cfg, 4, &out, nullptr, &info),
            SuffixSource::kLookup);
  EXPECT_EQ(info.match, 4);  // "9 10 11 12" agrees: 4 tokens
  EXPECT_EQ(suffix_class(SuffixSource::kLookup, info), (int)SuffixClass::kLookup4);
  EXPECT_EQ(suffix_draft(std::vector<int32_t>{12, 2, 3}, *ix, cfg, 4, &out, nullptr, &info), SuffixSource::kIndex);
  EXPECT_EQ(info.context_len, 2);
  EXPECT_GT(info.share, 0.0);
  EXPECT_LE(info.share, 1.0);
  EXPECT_EQ(suffix_class(SuffixSource::kLookup, {.match = 2}), (int)SuffixClass::kLookup2);
  EXPECT_EQ(suffix_class(SuffixSource::kLookup, {.match = 12}), (int)SuffixClass::kLookup10);
  EXPECT_EQ(suffix_class(SuffixSource::kIndex, {.context_len = 6, .share = 0.2}), (int)SuffixClass::kIndexLow);
  EXPECT_EQ(suffix_class(SuffixSource::kIndex, {.context_len = 6, .share = 0.5}), (int)SuffixClass::kIndexMid);
  EXPECT_EQ(suffix_class(SuffixSource::kIndex, {.context_len = 3, .share = 0.9}), (int)SuffixClass::kIndexHigh2);
  EXPECT_EQ(suffix_class(SuffixSource::kIndex, {.context_len = 4, .share = 0.9}), (int)SuffixClass::kIndexHigh4);
  EXPECT_EQ(suffix_class(SuffixSource::kIndex, {.context_len = 8, .share = 0.9}), (int)SuffixClass::kIndexHigh5);
  EXPECT_EQ(suffix_class(SuffixSource::kNone, {}), -1);
  EXPECT_EQ(SuffixDrafter(ix).class_priors().size(), (size_t)SuffixClass::kCount);
  SuffixDrafterConfig tree_cfg;
  tree_cfg.tree_width = 2;
  EXPECT_TRUE(SuffixDrafter(ix, tree_cfg).class_priors().empty()) << "trees carry their own estimates";
  // The drafter: q one-hot at T > 0, stats per source, accepted counted at commit.
  SuffixDrafter d(ix);
  ASSERT_TRUE(d.begin(std::vector<int32_t>{12, 2}, {}));
  DraftRequest req;
  req.pending = 3;
  req.pos = 2;
  req.max_n = 4;
  req.sampler.temperature = 0.7f;
  DraftResult r;
  ASSERT_TRUE(d.draft(req, &r));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5}));
  ASSERT_EQ(r.q.size(), 2u);
  EXPECT_EQ(r.q[0].size(), 1u);
  ASSERT_TRUE(d.commit(std::vector<int32_t>{3, 4}, 2, {}));
  EXPECT_FALSE(d.commit(std::vector<int32_t>{5}, 2, {}));  // wrong position
  const auto st = d.stats();
  EXPECT_EQ(st["index"]["rounds"], 1);
  EXPECT_EQ(st["index"]["tokens"], 2);
  EXPECT_EQ(st["index"]["accepted"], 1);
}

// Sure drafts (Drafter::sure_drafts): copies whose class prior is at least kSureAcceptance, cut where
// the chain at that prior falls under kSureChainFloor; nothing else, and a refused one leaves no trace.
TEST(SuffixDrafter, SureDraftsAreLongCopiesOnly) {
  using C = SuffixClass;
  EXPECT_EQ(suffix_sure_tokens((int)C::kLookup10, 16), 13);  // 0.95^13 = 0.513, 0.95^14 = 0.488
  EXPECT_EQ(suffix_sure_tokens((int)C::kLookup10, 5), 5);
  EXPECT_EQ(suffix_sure_tokens((int)C::kLookup6, 16), 3);    // 0.80^3 = 0.512
  EXPECT_EQ(suffix_sure_tokens((int)C::kCache, 16), 2);      // 0.75^2 = 0.5625, 0.75^3 = 0.42
  for (C c : {C::kLookupOne, C::kLookup2, C::kLookup3, C::kLookup4, C::kIndexLow, C::kIndexMid, C::kIndexHigh2,
              C::kIndexHigh4, C::kIndexHigh5})
    EXPECT_EQ(suffix_sure_tokens((int)c, 16), 0) << (int)c;
  EXPECT_EQ(suffix_sure_tokens(-1, 16), 0);
  EXPECT_EQ(suffix_sure_tokens((int)C::kCount, 16), 0);

  auto ix = index_of(tiny_stream());
  SuffixDrafterConfig tree_cfg;
  tree_cfg.tree_width = 2;
  EXPECT_FALSE(SuffixDrafter(ix, tree_cfg).sure_drafts());
  SuffixDrafter d(ix);
  EXPECT_TRUE(d.sure_drafts());
  // 1..12 then 1..11: the pending 11 completes an 11-token agreement (a lookup of 10+), whose copy is
  // 12 1 2 .. 11 (12 tokens): all of it is sure (<= 13).
  std::vector<int32_t> ctx;
  for (int r = 0; r < 2; ++r)
    for (int32_t t = 1; t <= 12; ++t) ctx.push_back(100 + t);
  ctx.resize(ctx.size() - 2);  // 101..112 101..110
  ASSERT_TRUE(d.begin(ctx, {}));
  DraftRequest req;
  req.pending = 111;
  req.pos = (int64_t)ctx.size();
  req.max_n = 16;
  req.sure_only = true;
  DraftResult r;
  ASSERT_TRUE(d.draft(req, &r));
  std::vector<int32_t> want = {112};
  for (int32_t t = 101; t <= 111; ++t) want.push_back(t);
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(r.draft_class, (int)C::kLookup10);
  EXPECT_EQ(d.stats()["lookup"]["rounds"], 1);
  req.sure_min = 12;  // the round already drafts 12: not taken, and not counted
  ASSERT_TRUE(d.draft(req, &r));
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(d.stats()["lookup"]["rounds"], 1);
  req.sure_min = 0;
  req.max_n = 4;  // the caller's room bounds it
  ASSERT_TRUE(d.draft(req, &r));
  EXPECT_EQ(r.tokens.size(), 4u);
  req.sampler.temperature = 0.7f;  // greedy only
  ASSERT_TRUE(d.draft(req, &r));
  EXPECT_TRUE(r.tokens.empty());
  // A 3-token lookup is not sure, and neither is the index: nothing, and no round counted.
  SuffixDrafter e(ix);
  ASSERT_TRUE(e.begin(std::vector<int32_t>{7, 10, 11, 12, 10, 11}, {}));
  req = {};
  req.pending = 12;
  req.pos = 6;
  req.max_n = 16;
  req.sure_only = true;
  ASSERT_TRUE(e.draft(req, &r));
  EXPECT_TRUE(r.tokens.empty());
  ASSERT_TRUE(e.begin(std::vector<int32_t>{12, 2}, {}));
  req.pending = 3;
  req.pos = 2;
  ASSERT_TRUE(e.draft(req, &r));
  EXPECT_TRUE(r.tokens.empty()) << "the index's [2 3] -> 4 5 is not a copy";
  EXPECT_EQ(e.stats()["lookup"]["rounds"], 0);
  EXPECT_EQ(e.stats()["index"]["rounds"], 0);
  req.sure_only = false;  // the same round drafted as usual
  ASSERT_TRUE(e.draft(req, &r));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5}));
}

}  // namespace
}  // namespace dspark::speculative
