// SpecStepper on a tiny random Gemma 3 (window 8, max_batch 4: the sliding rings wrap after 12
// positions): chunked prefill, serial mode and a reused KV prefix all give exactly the tokens of
// a fresh serial generation; the history mirrors the KV; the ring limit on prefix reuse holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../model/tiny_gemma3.h"
#include "../tokenizer/tiny_vocab.h"
#include "generate/generate.h"
#include "random_drafter.h"
#include "speculative/drafter_ngram.h"
#include "speculative/spec_stepper.h"

namespace dspark {
namespace {

constexpr int kVocab = 300;
const model::SessionOptions kSession{.n_ctx = 256, .max_batch = 4};

class StepperTiny : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("stepper_tiny_" + std::to_string(getpid()) + ".gguf")).string();
    ASSERT_TRUE(testing::TinyGemma3(21, kVocab).write(path_).is_ok());
    model_ = std::move(model::load_model(path_)).value();
    tok_ = tokenizer::testing::make_padded_tiny_tokenizer(kVocab);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<int32_t> serial(const std::vector<int32_t>& prompt, int n) {
    model::Session s(*model_, kSession, &pool_);
    generate::GenerateParams gp;
    gp.max_tokens = n;
    gp.ignore_eos = true;
    return std::move(generate::generate(*model_, s, *tok_, prompt, gp, {})).value().tokens;
  }

  // Runs a stepper to the end; returns its result and the reused prefix length.
  std::pair<speculative::SpecResult, int64_t> run(model::Session& s, const std::vector<int32_t>& prompt, int n,
                                           speculative::Drafter* d, speculative::SeqHistory* h, int64_t chunk) {
    speculative::SpecParams sp;
    sp.gen.max_tokens = n;
    sp.gen.ignore_eos = true;
    sp.gamma = d ? 4 : 0;
    auto st = speculative::SpecStepper::create(*model_, s, *tok_, prompt, sp, d, h, {}, {.prefill_chunk = chunk});
    EXPECT_TRUE(st.is_ok()) << st.message();
    while (!(*st)->done()) EXPECT_TRUE((*st)->step().is_ok());
    if (h) {
      EXPECT_EQ((int64_t)h->tokens.size(), s.n_past());
    }
    return {(*st)->take_result(), (*st)->reused_tokens()};
  }

  std::string path_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  ThreadPool pool_{2};
};

std::vector<int32_t> make_prompt(int n, int32_t seed) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < n; ++i) p.push_back(30 + (seed + i * 7) % 50);
  return p;
}

TEST_F(StepperTiny, ChunkedSerialEqualsGenerate) {
  const auto prompt = make_prompt(23, 1);
  const auto want = serial(prompt, 20);
  for (int64_t chunk : {0, 1, 3, 4, 7}) {
    model::Session s(*model_, kSession, &pool_);
    auto [r, reused] = run(s, prompt, 20, nullptr, nullptr, chunk);
    EXPECT_EQ(r.out.tokens, want) << "chunk " << chunk;
    EXPECT_EQ(reused, 0);
  }
}

TEST_F(StepperTiny, ReusedPrefixGivesTheSameTokens) {
  // Turn 1, then turn 2 = turn 1's prompt + its answer + new tokens: only the new part is prefilled.
  const auto p1 = make_prompt(9, 3);
  for (int kind = 0; kind < 3; ++kind) {
    speculative::NgramDrafter ngram;
    testing::RandomDrafter random(0, kVocab, 5);
    speculative::Drafter* d = kind == 0 ? nullptr : kind == 1 ? (speculative::Drafter*)&ngram : &random;
    model::Session s(*model_, kSession, &pool_);
    speculative::SeqHistory h;
    auto [r1, reused1] = run(s, p1, 6, d, &h, 3);
    EXPECT_EQ(reused1, 0);
    EXPECT_EQ(r1.out.tokens, serial(p1, 6));
    auto p2 = p1;
    p2.insert(p2.end(), r1.out.tokens.begin(), r1.out.tokens.end());
    for (int32_t t : {44, 45, 46}) p2.push_back(t);
    auto [r2, reused2] = run(s, p2, 8, d, &h, 3);
    EXPECT_EQ(r2.out.tokens, serial(p2, 8)) << "drafter kind " << kind;
    // KV held p1 + answer minus its last token (never forwarded): all of it is reused.
    EXPECT_EQ(reused2, (int64_t)(p1.size() + r1.out.tokens.size() - 1)) << "drafter kind " << kind;
    // A prompt sharing only the first 4 tokens reuses them when the rings still hold their keys,
    // else nothing; either way the answer is exact.
    auto p3 = std::vector<int32_t>(p1.begin(), p1.begin() + 4);
    for (int32_t t : {60, 61, 62, 63}) p3.push_back(t);
    const int64_t lo = s.kv().min_restorable_length();
    auto [r3, reused3] = run(s, p3, 5, d, &h, 0);
    EXPECT_EQ(r3.out.tokens, serial(p3, 5)) << "drafter kind " << kind;
    EXPECT_EQ(reused3, 4 >= lo ? 4 : 0);
  }
}

TEST_F(StepperTiny, LongHistoryTrimmedFarBackRestartsCleanly) {
  // 40 positions written with window 8 and ring capacity 12: going back to position 10 is not
  // restorable (its keys were overwritten), so the stepper must prefill from 0 and stay exact.
  const auto p1 = make_prompt(30, 5);
  model::Session s(*model_, kSession, &pool_);
  speculative::SeqHistory h;
  speculative::NgramDrafter ngram;
  run(s, p1, 10, &ngram, &h, 0);
  const int64_t lo = s.kv().min_restorable_length();
  EXPECT_GT(lo, 10);
  auto p2 = std::vector<int32_t>(p1.begin(), p1.begin() + 10);
  p2.push_back(77);
  auto [r, reused] = run(s, p2, 12, &ngram, &h, 0);
  EXPECT_EQ(reused, 0);
  EXPECT_EQ(r.out.tokens, serial(p2, 12));
  // Going back a little (within the ring) is restorable and reused.
  auto p3 = h.tokens;
  p3.resize(p3.size() - 2);
  p3.push_back(78);
  p3.push_back(79);
  EXPECT_GE((int64_t)p3.size() - 3, s.kv().min_restorable_length());
  auto [r3, reused3] = run(s, p3, 6, &ngram, &h, 0);
  EXPECT_EQ(reused3, (int64_t)p3.size() - 2);
  EXPECT_EQ(r3.out.tokens, serial(p3, 6));
}

// Records the tap rows a drafter receives; greedy "drafts" repeat the pending token.
class TapRecorder : public speculative::Drafter {
 public:
  std::string kind() const override { return "tap-recorder"; }
  std::unique_ptr<speculative::Drafter> fork() const override { return std::make_unique<TapRecorder>(); }
  std::vector<int> required_taps() const override { return {model::kTapEmbedding, 2, 4}; }
  Status begin(std::span<const int32_t> prompt, const speculative::TapRows& taps) override {
    rows_.clear();
    append(taps);
    tokens_.assign(prompt.begin(), prompt.end());
    return Status::ok();
  }
  Status draft(const speculative::DraftRequest& req, speculative::DraftResult* out) override {
    out->clear();
    for (int i = 0; i < req.max_n; ++i) out->tokens.push_back(req.pending);
    return Status::ok();
  }
  Status commit(std::span<const int32_t> committed, int64_t, const speculative::TapRows& taps) override {
    append(taps);
    tokens_.insert(tokens_.end(), committed.begin(), committed.end());
    return Status::ok();
  }
  std::vector<float> rows_;     // every received row of every tap, in position order per tap
  std::vector<int32_t> tokens_;

 private:
  void append(const speculative::TapRows& t) {
    for (int64_t r = 0; r < t.n_rows; ++r)
      for (const float* tap : t.taps) rows_.insert(rows_.end(), tap + r * t.n_embd, tap + (r + 1) * t.n_embd);
  }
};

TEST_F(StepperTiny, DrafterTapsFromAReusedPrefixEqualAFreshPrefill) {
  const auto p1 = make_prompt(9, 8);
  TapRecorder fresh, reused;
  model::Session s1(*model_, kSession, &pool_), s2(*model_, kSession, &pool_);
  speculative::SeqHistory h;
  h.tap_ids = reused.required_taps();
  auto [r1, n1] = run(s2, p1, 5, &reused, &h, 2);
  auto p2 = p1;
  p2.insert(p2.end(), r1.out.tokens.begin(), r1.out.tokens.end());
  p2.push_back(70);
  auto [rb, nb] = run(s2, p2, 6, &reused, &h, 2);   // begins from history taps + new prefill rows
  auto [ra, na] = run(s1, p2, 6, &fresh, nullptr, 0);  // begins from one full prefill
  EXPECT_GT(nb, 0);
  EXPECT_EQ(na, 0);
  EXPECT_EQ(ra.out.tokens, rb.out.tokens);
  EXPECT_EQ(fresh.tokens_, reused.tokens_);
  ASSERT_EQ(fresh.rows_.size(), reused.rows_.size());
  EXPECT_TRUE(fresh.rows_ == reused.rows_) << "tap rows differ (bitwise)";
}

TEST(KvCacheRing, MinRestorableLength) {
  model::ModelConfig c;
  c.n_layer = 6;
  c.n_head_kv = 1;
  c.head_dim = 16;
  c.sliding_window = 8;
  model::KvCache kv(kernels::default_backend(), c, 256, 4);  // sliding capacity 12
  kv.advance(12);
  EXPECT_EQ(kv.min_restorable_length(), 0);
  kv.advance(18);  // 30 written
  EXPECT_EQ(kv.min_restorable_length(), 30 - 12 + 8 - 1);
  kv.trim(3);      // rollback keeps the high-water mark
  EXPECT_EQ(kv.min_restorable_length(), 25);
  kv.clear();
  EXPECT_EQ(kv.min_restorable_length(), 0);
}

}  // namespace
}  // namespace dspark
