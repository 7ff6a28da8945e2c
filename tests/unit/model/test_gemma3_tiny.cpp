// The engine's Gemma 3 forward against a naive f32 reference on a tiny random model, and the
// KV-cache properties speculative decoding relies on: batched == serial, rollback (trim) across
// the sliding-window ring, taps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/model.h"
#include "tiny_gemma3.h"

namespace dspark {
namespace {

// The engine stores K/V in f16, rounds Q and attention probabilities to f16 and takes GELU from
// an f16 table (llama.cpp's CPU numerics); the reference is f32/f64 throughout. Measured max
// |diff| on this model: 6.8e-3 (2026-11-29); 5e-2 leaves ~7x headroom.
constexpr float kTolLogitsVsNaive = 5e-2f;
// Same engine, same numerics, different batch split: only summation order may differ.
constexpr float kTolBatchVsSerial = 1e-3f;

class TinyModel : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("tiny_gemma3_" + std::to_string(getpid()) + ".gguf")).string();
    ASSERT_TRUE(tiny_.write(path_).is_ok());
    auto m = model::load_model(path_);
    ASSERT_TRUE(m.is_ok()) << m.message();
    model_ = std::move(m).value();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<int32_t> tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = (int32_t)(rng() % tiny_.n_vocab);
    return t;
  }

  testing::TinyGemma3 tiny_{42};
  std::string path_;
  std::unique_ptr<model::Model> model_;
  ThreadPool pool_{2};
};

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_F(TinyModel, MatchesNaiveReferenceAcrossSlidingWindow) {
  const int n = 30;  // window is 8: most positions see a truncated window
  const auto toks = tokens(n, 1);
  std::vector<float> ref_logits;
  std::vector<std::vector<float>> ref_hidden;
  tiny_.reference(toks, &ref_logits, &ref_hidden);
  model::Session s(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);  // forces 8 chunks and ring wrap
  ASSERT_TRUE(model_->forward(s, toks, {model::LogitsMode::kAll, {0, 5}}).is_ok());
  EXPECT_EQ(s.n_past(), n);
  const float d = max_abs_diff(s.logits(), ref_logits.data(), ref_logits.size());
  std::printf("max |logit diff| vs naive reference: %g\n", d);
  EXPECT_LT(d, kTolLogitsVsNaive);
  EXPECT_LT(max_abs_diff(s.tap(0).data(), ref_hidden[0].data(), ref_hidden[0].size()), kTolLogitsVsNaive);
  EXPECT_LT(max_abs_diff(s.tap(1).data(), ref_hidden[5].data(), ref_hidden[5].size()), kTolLogitsVsNaive);
}

// Bitwise: the products are batch-invariant (kernels/kernels.h) and a row's attention has the same
// bits whether its forward's rows go to attention_f16kv_rows together (20 rows here, on AVX-512) or
// one call each (kernels/attention.h), which is what makes speculative output equal serial output.
TEST_F(TinyModel, BatchedEqualsSerial) {
  const auto toks = tokens(20, 2);
  model::Session a(*model_, {.n_ctx = 64, .max_batch = 32}, &pool_), b(*model_, {.n_ctx = 64, .max_batch = 32}, &pool_);
  ASSERT_TRUE(model_->forward(a, toks, {model::LogitsMode::kAll, {}}).is_ok());
  std::vector<float> serial;
  for (int32_t t : toks) {
    ASSERT_TRUE(model_->forward(b, std::span<const int32_t>(&t, 1), {model::LogitsMode::kLast, {}}).is_ok());
    serial.insert(serial.end(), b.logits(), b.logits() + tiny_.n_vocab);
  }
  EXPECT_EQ(0, std::memcmp(a.logits(), serial.data(), serial.size() * sizeof(float)));
}

// A prefill long enough that its per-row steps (norms, q/k norms, RoPE, KV stores, adds, GeGLU) run
// on both threads of the pool gives the bits of the same forward on the calling thread alone.
TEST_F(TinyModel, PrefillRowsOnThePoolEqualOneThreadBitwise) {
  constexpr int kRows = 48;
  static_assert(kRows >= model::Model::kParallelRowsMin);
  const auto toks = tokens(kRows, 5);
  model::Session pooled(*model_, {.n_ctx = 64, .max_batch = 64}, &pool_);
  model::Session alone(*model_, {.n_ctx = 64, .max_batch = 64}, nullptr);
  ASSERT_TRUE(model_->forward(pooled, toks, {model::LogitsMode::kAll, {}}).is_ok());
  ASSERT_TRUE(model_->forward(alone, toks, {model::LogitsMode::kAll, {}}).is_ok());
  EXPECT_EQ(max_abs_diff(pooled.logits(), alone.logits(), (size_t)kRows * tiny_.n_vocab), 0.0f);
}

// Speculative rollback: write a window of drafts, keep some, trim the rest, continue. The result
// must equal a fresh run over the committed tokens, including after the sliding ring wraps.
TEST_F(TinyModel, TrimRollbackAcrossRingWrap) {
  const auto committed = tokens(40, 3);
  const auto junk = tokens(4, 4);
  model::Session fresh(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  ASSERT_TRUE(model_->forward(fresh, committed, {model::LogitsMode::kAll, {}}).is_ok());

  model::Session spec(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  std::vector<float> got;
  size_t i = 0;
  int round = 0;
  while (i < committed.size()) {
    // Window = [next committed token, up to 3 more]; accept a varying number, replace the rest with junk.
    const size_t keep = std::min<size_t>(1 + round % 4, committed.size() - i);
    std::vector<int32_t> window(committed.begin() + i, committed.begin() + i + keep);
    while (window.size() < 4) window.push_back(junk[window.size()]);
    ASSERT_TRUE(model_->forward(spec, window, {model::LogitsMode::kAll, {}}).is_ok());
    got.insert(got.end(), spec.logits(), spec.logits() + keep * tiny_.n_vocab);
    spec.kv().trim((int64_t)(window.size() - keep));
    i += keep;
    ++round;
    ASSERT_EQ(spec.n_past(), (int64_t)i);  // KV length == committed tokens after every round
  }
  EXPECT_LT(max_abs_diff(fresh.logits(), got.data(), got.size()), kTolBatchVsSerial);
}

// A token tree in one forward: each row's logits are what a chain forward of its own branch gives
// (bitwise: rows of one forward do not change each other's bits), the prefix reaching past the
// sliding window; after the accepted branch is moved into place and the rest trimmed, decoding on
// continues exactly as after the branch alone.
TEST_F(TinyModel, TokenTreeRowsEqualTheirBranchesBitwise) {
  const auto prefix = tokens(11, 6);  // > window (8): sliding layers see part of it
  const auto tree = tokens(6, 7);
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 2, 4};  // branches 0-1-3 and 0-2-4-5
  const model::SessionOptions opt{.n_ctx = 64, .max_batch = 8};
  model::Session t(*model_, opt, &pool_);
  ASSERT_TRUE(model_->forward(t, prefix, {model::LogitsMode::kLast, {}}).is_ok());
  model::ForwardOptions fo{model::LogitsMode::kAll, {}};
  fo.tree_parent = parent;
  ASSERT_TRUE(model_->forward(t, tree, fo).is_ok());
  ASSERT_EQ(t.n_past(), 11 + 6);
  std::vector<float> tree_logits(t.logits(), t.logits() + 6 * tiny_.n_vocab);
  auto branch = [&](int i) {
    std::vector<int32_t> b;
    for (int r = i; r >= 0; r = parent[(size_t)r]) b.insert(b.begin(), tree[(size_t)r]);
    return b;
  };
  for (int i = 0; i < 6; ++i) {
    model::Session c(*model_, opt, &pool_);
    ASSERT_TRUE(model_->forward(c, prefix, {model::LogitsMode::kLast, {}}).is_ok());
    const auto b = branch(i);
    ASSERT_TRUE(model_->forward(c, b, {model::LogitsMode::kAll, {}}).is_ok());
    EXPECT_EQ(0, std::memcmp(c.logits() + (b.size() - 1) * tiny_.n_vocab, tree_logits.data() + i * tiny_.n_vocab,
                             sizeof(float) * tiny_.n_vocab))
        << "row " << i;
  }
  // Accept branch 0-2-4: rows 2 and 4 move to positions P+1, P+2; the rest is trimmed.
  t.kv().move_row(11 + 2, 11 + 1);
  t.kv().move_row(11 + 4, 11 + 2);
  t.kv().trim(3);
  model::Session c(*model_, opt, &pool_);
  ASSERT_TRUE(model_->forward(c, prefix, {model::LogitsMode::kLast, {}}).is_ok());
  ASSERT_TRUE(model_->forward(c, branch(4), {model::LogitsMode::kLast, {}}).is_ok());
  const auto next = tokens(3, 8);
  ASSERT_TRUE(model_->forward(t, next, {model::LogitsMode::kAll, {}}).is_ok());
  ASSERT_TRUE(model_->forward(c, next, {model::LogitsMode::kAll, {}}).is_ok());
  EXPECT_EQ(0, std::memcmp(t.logits(), c.logits(), sizeof(float) * 3 * tiny_.n_vocab));
}

TEST_F(TinyModel, TokenTreeBadShapesAreErrors) {
  model::Session t(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  const auto toks = tokens(3, 9);
  for (const std::vector<int32_t>& parent : std::vector<std::vector<int32_t>>{{0, 0, 1}, {-1, 1, 0}, {-1, 0}, {-1, -1, 0}}) {
    model::ForwardOptions fo{model::LogitsMode::kAll, {}};
    fo.tree_parent = parent;
    EXPECT_FALSE(model_->forward(t, toks, fo).is_ok());
    EXPECT_EQ(t.n_past(), 0);
  }
  model::ForwardOptions fo{model::LogitsMode::kAll, {}};
  const std::vector<int32_t> wide = {-1, 0, 0, 0, 0};  // more rows than one chunk (max_batch 4)
  fo.tree_parent = wide;
  EXPECT_FALSE(model_->forward(t, tokens(5, 9), fo).is_ok());
}

TEST_F(TinyModel, TapsDoNotChangeLogits) {
  const auto toks = tokens(12, 5);
  model::Session a(*model_, {.n_ctx = 32, .max_batch = 16}, &pool_), b(*model_, {.n_ctx = 32, .max_batch = 16}, &pool_);
  ASSERT_TRUE(model_->forward(a, toks, {model::LogitsMode::kAll, {}}).is_ok());
  ASSERT_TRUE(model_->forward(b, toks, {model::LogitsMode::kAll, {model::kTapEmbedding, 2, model::kTapFinalNorm}}).is_ok());
  EXPECT_EQ(max_abs_diff(a.logits(), b.logits(), (size_t)12 * tiny_.n_vocab), 0.0f);
  ASSERT_EQ(b.tap(0).size(), (size_t)12 * tiny_.n_embd);
  EXPECT_FLOAT_EQ(b.tap(0)[0], tiny_.embd[(size_t)toks[0] * tiny_.n_embd] * std::sqrt((float)tiny_.n_embd));
}

// Several sequences in one forward give each session bitwise what its own forward gives.
TEST_F(TinyModel, MultiSequenceForwardEqualsSeparateForwards) {
  const model::SessionOptions opt{.n_ctx = 64, .max_batch = 16};
  for (model::LogitsMode mode : {model::LogitsMode::kAll, model::LogitsMode::kLast}) {
    const model::ForwardOptions fo{mode, {1, model::kTapFinalNorm}};
    std::vector<std::unique_ptr<model::Session>> alone, batched;
    const std::vector<std::vector<int32_t>> history = {{}, tokens(9, 20), tokens(30, 21)};
    const std::vector<std::vector<int32_t>> fresh = {tokens(5, 22), tokens(1, 23), tokens(7, 24)};
    for (size_t i = 0; i < history.size(); ++i) {
      alone.push_back(std::make_unique<model::Session>(*model_, opt, &pool_));
      batched.push_back(std::make_unique<model::Session>(*model_, opt, &pool_));
      for (auto* s : {alone.back().get(), batched.back().get()})
        if (!history[i].empty()) {
          ASSERT_TRUE(model_->forward(*s, history[i], {}).is_ok());
        }
    }
    model::ForwardScratch scratch(model_->backend(), model_->config(), 32, 64, &pool_);
    std::vector<model::SeqInput> seqs;
    for (size_t i = 0; i < fresh.size(); ++i) seqs.push_back({batched[i].get(), fresh[i]});
    ASSERT_TRUE(model_->forward_multi(seqs, fo, scratch).is_ok());
    for (size_t i = 0; i < fresh.size(); ++i) {
      ASSERT_TRUE(model_->forward(*alone[i], fresh[i], fo).is_ok());
      EXPECT_EQ(batched[i]->n_past(), alone[i]->n_past());
      const size_t n_logits = (size_t)alone[i]->n_logits_rows() * tiny_.n_vocab;
      ASSERT_EQ(batched[i]->n_logits_rows(), alone[i]->n_logits_rows());
      EXPECT_EQ(std::memcmp(batched[i]->logits(), alone[i]->logits(), n_logits * sizeof(float)), 0) << i;
      for (size_t t = 0; t < 2; ++t) EXPECT_EQ(batched[i]->tap(t), alone[i]->tap(t)) << i;
    }
  }
}

TEST_F(TinyModel, MultiSequenceForwardRefusesBadPlans) {
  model::Session a(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  model::ForwardScratch small(model_->backend(), model_->config(), 4, 64, &pool_);
  const auto t5 = tokens(5, 30), t3 = tokens(3, 31);
  std::vector<model::SeqInput> too_long = {{&a, t5}};
  EXPECT_NE(model_->forward_multi(too_long, {}, small).message().find("max_batch"), std::string::npos);
  std::vector<model::SeqInput> twice = {{&a, t3}, {&a, t3}};
  EXPECT_NE(model_->forward_multi(twice, {}, small).message().find("twice"), std::string::npos);
  model::Session b(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  std::vector<model::SeqInput> too_many = {{&a, t3}, {&b, t3}};
  EXPECT_NE(model_->forward_multi(too_many, {}, small).message().find("rows"), std::string::npos);
  EXPECT_EQ(a.n_past(), 0);  // nothing ran
}

TEST_F(TinyModel, ErrorsInsteadOfAborts) {
  model::Session s(*model_, {.n_ctx = 8, .max_batch = 4}, &pool_);
  const auto toks = tokens(9, 6);
  auto st = model_->forward(s, toks, {});
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("context"), std::string::npos);
  const int32_t bad = tiny_.n_vocab;
  st = model_->forward(s, std::span<const int32_t>(&bad, 1), {});
  EXPECT_NE(st.message().find("vocabulary"), std::string::npos);
  st = model_->forward(s, std::span<const int32_t>(toks.data(), 1), {model::LogitsMode::kLast, {99}});
  EXPECT_NE(st.message().find("tap"), std::string::npos);
}

TEST_F(TinyModel, WrongArchitectureIsRefused) {
  const std::string p = path_ + ".mamba";
  ASSERT_TRUE(tiny_.write(p, "mamba").is_ok());
  auto m = model::load_model(p);
  std::filesystem::remove(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("general.architecture"), std::string::npos);
  EXPECT_NE(m.message().find("supported: gemma3, llama"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace dspark
