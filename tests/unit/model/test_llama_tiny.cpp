// The engine's Llama forward against a naive f32 reference on a tiny random model (tied and
// separate LM head), and the properties speculative decoding relies on: batched == serial
// bitwise, rollback, multi-sequence forward, taps; plus refusal of unsupported variants.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "formats/gguf_writer.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "tiny_llama.h"

namespace dspark {
namespace {

// The engine stores K/V in f16 and rounds attention inputs as llama.cpp's CPU path does; the
// reference is f32/f64 throughout. Same bound as the Gemma tiny model (kTolLogitsVsNaive there).
constexpr float kTolLogitsVsNaive = 5e-2f;

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class TinyLlamaModel : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    tiny_ = std::make_unique<testing::TinyLlama>(7, GetParam());
    path_ = (std::filesystem::temp_directory_path() /
             ("tiny_llama_" + std::to_string(getpid()) + (GetParam() ? "_tied" : "_sep") + ".gguf")).string();
    ASSERT_TRUE(tiny_->write(path_).is_ok());
    auto m = model::load_model(path_);
    ASSERT_TRUE(m.is_ok()) << m.message();
    model_ = std::move(m).value();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<int32_t> tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = (int32_t)(rng() % tiny_->n_vocab);
    return t;
  }

  std::unique_ptr<testing::TinyLlama> tiny_;
  std::string path_;
  std::unique_ptr<model::Model> model_;
  ThreadPool pool_{2};
};

TEST_P(TinyLlamaModel, ConfigFromMetadata) {
  const model::ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FALSE(c.is_sliding(0));
  EXPECT_EQ(c.embd_scale, 1.0f);
  EXPECT_EQ(model_->weights().tied_output, GetParam());
}

TEST_P(TinyLlamaModel, MatchesNaiveReference) {
  const int n = 25;
  const auto toks = tokens(n, 1);
  std::vector<float> ref_logits;
  std::vector<std::vector<float>> ref_hidden;
  tiny_->reference(toks, &ref_logits, &ref_hidden);
  model::Session s(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  ASSERT_TRUE(model_->forward(s, toks, {model::LogitsMode::kAll, {0, 2}}).is_ok());
  const float d = max_abs_diff(s.logits(), ref_logits.data(), ref_logits.size());
  std::printf("max |logit diff| vs naive reference: %g\n", d);
  EXPECT_LT(d, kTolLogitsVsNaive);
  EXPECT_LT(max_abs_diff(s.tap(0).data(), ref_hidden[0].data(), ref_hidden[0].size()), kTolLogitsVsNaive);
  EXPECT_LT(max_abs_diff(s.tap(1).data(), ref_hidden[2].data(), ref_hidden[2].size()), kTolLogitsVsNaive);
}

// Batch invariance: a token's logits are bitwise the same decoded alone or inside a window.
TEST_P(TinyLlamaModel, BatchedEqualsSerialBitwise) {
  const auto toks = tokens(20, 2);
  model::Session a(*model_, {.n_ctx = 64, .max_batch = 32}, &pool_), b(*model_, {.n_ctx = 64, .max_batch = 32}, &pool_);
  ASSERT_TRUE(model_->forward(a, toks, {model::LogitsMode::kAll, {}}).is_ok());
  std::vector<float> serial;
  for (int32_t t : toks) {
    ASSERT_TRUE(model_->forward(b, std::span<const int32_t>(&t, 1), {model::LogitsMode::kLast, {}}).is_ok());
    serial.insert(serial.end(), b.logits(), b.logits() + tiny_->n_vocab);
  }
  EXPECT_EQ(max_abs_diff(a.logits(), serial.data(), serial.size()), 0.0f);
}

// A prefill long enough that its per-row steps (norms, RoPE, KV stores, adds, SwiGLU) run on both
// threads of the pool gives the bits of the same forward on the calling thread alone, and of
// token-by-token decode.
TEST_P(TinyLlamaModel, PrefillRowsOnThePoolEqualOneThreadBitwise) {
  constexpr int kRows = 48;
  static_assert(kRows >= model::Model::kParallelRowsMin);
  const auto toks = tokens(kRows, 5);
  const model::ForwardOptions opt{model::LogitsMode::kAll, {0, 1}};
  model::Session pooled(*model_, {.n_ctx = 64, .max_batch = 64}, &pool_);
  model::Session alone(*model_, {.n_ctx = 64, .max_batch = 64}, nullptr);
  model::Session serial(*model_, {.n_ctx = 64, .max_batch = 1}, &pool_);
  ASSERT_TRUE(model_->forward(pooled, toks, opt).is_ok());
  ASSERT_TRUE(model_->forward(alone, toks, opt).is_ok());
  std::vector<float> one_by_one;
  for (int32_t t : toks) {
    ASSERT_TRUE(model_->forward(serial, std::span<const int32_t>(&t, 1), {model::LogitsMode::kLast, {}}).is_ok());
    one_by_one.insert(one_by_one.end(), serial.logits(), serial.logits() + tiny_->n_vocab);
  }
  const size_t n = (size_t)kRows * tiny_->n_vocab;
  EXPECT_EQ(max_abs_diff(pooled.logits(), alone.logits(), n), 0.0f);
  EXPECT_EQ(max_abs_diff(pooled.logits(), one_by_one.data(), n), 0.0f);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(max_abs_diff(pooled.tap(i).data(), alone.tap(i).data(), pooled.tap(i).size()), 0.0f) << "tap " << i;
}

TEST_P(TinyLlamaModel, TrimRollbackEqualsFreshRun) {
  const auto committed = tokens(30, 3), junk = tokens(4, 4);
  model::Session fresh(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  ASSERT_TRUE(model_->forward(fresh, committed, {model::LogitsMode::kAll, {}}).is_ok());
  model::Session spec(*model_, {.n_ctx = 64, .max_batch = 4}, &pool_);
  std::vector<float> got;
  size_t i = 0;
  for (int round = 0; i < committed.size(); ++round) {
    const size_t keep = std::min<size_t>(1 + round % 4, committed.size() - i);
    std::vector<int32_t> window(committed.begin() + i, committed.begin() + i + keep);
    while (window.size() < 4) window.push_back(junk[window.size()]);
    ASSERT_TRUE(model_->forward(spec, window, {model::LogitsMode::kAll, {}}).is_ok());
    got.insert(got.end(), spec.logits(), spec.logits() + keep * tiny_->n_vocab);
    spec.kv().trim((int64_t)(window.size() - keep));
    i += keep;
    ASSERT_EQ(spec.n_past(), (int64_t)i);
  }
  EXPECT_EQ(max_abs_diff(fresh.logits(), got.data(), got.size()), 0.0f);
}

TEST_P(TinyLlamaModel, MultiSequenceForwardEqualsSeparateForwards) {
  const auto t1 = tokens(5, 5), t2 = tokens(3, 6);
  model::Session a1(*model_, {.n_ctx = 32, .max_batch = 8}, &pool_), a2(*model_, {.n_ctx = 32, .max_batch = 8}, &pool_);
  model::Session b1(*model_, {.n_ctx = 32, .max_batch = 8}, &pool_), b2(*model_, {.n_ctx = 32, .max_batch = 8}, &pool_);
  ASSERT_TRUE(model_->forward(a1, t1, {model::LogitsMode::kAll, {1}}).is_ok());
  ASSERT_TRUE(model_->forward(a2, t2, {model::LogitsMode::kAll, {1}}).is_ok());
  model::ForwardScratch scratch(model_->backend(), model_->config(), 16, 32, &pool_);
  const model::SeqInput seqs[] = {{&b1, t1}, {&b2, t2}};
  ASSERT_TRUE(model_->forward_multi(seqs, {model::LogitsMode::kAll, {1}}, scratch).is_ok());
  EXPECT_EQ(max_abs_diff(a1.logits(), b1.logits(), t1.size() * tiny_->n_vocab), 0.0f);
  EXPECT_EQ(max_abs_diff(a2.logits(), b2.logits(), t2.size() * tiny_->n_vocab), 0.0f);
  EXPECT_EQ(max_abs_diff(a1.tap(0).data(), b1.tap(0).data(), a1.tap(0).size()), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Head, TinyLlamaModel, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("Tied") : std::string("Separate"); });

// Decode past 768 keys (Model's kSplitMinKeys) on a 2-thread pool, with 3 K/V heads of 16 dims (they
// do not divide among the threads, so each head's keys and columns are shared out:
// Model::attention_split), gives the bits of the same decode on the calling thread alone, where every
// head is one call.
TEST(TinyLlamaSplit, DecodeOnThePoolEqualsOneThreadBitwise) {
  const testing::TinyLlama tiny(13, 6, 3, 16);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tiny_llama_split_" + std::to_string(getpid()) + ".gguf")).string();
  ASSERT_TRUE(tiny.write(path).is_ok());
  auto m = model::load_model(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(m.is_ok()) << m.message();
  const auto& model = *m.value();
  ThreadPool pool(2);
  model::Session pooled(model, {.n_ctx = 840, .max_batch = 64}, &pool), alone(model, {.n_ctx = 840, .max_batch = 64}, nullptr);
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(770);
  for (auto& t : prompt) t = (int32_t)(rng() % tiny.n_vocab);
  const model::ForwardOptions last{model::LogitsMode::kLast, {}};
  ASSERT_TRUE(model.forward(pooled, prompt, last).is_ok());
  ASSERT_TRUE(model.forward(alone, prompt, last).is_ok());
  for (int step = 0; step < 40; ++step) {  // keys 771 .. 810
    const int32_t t = (int32_t)(rng() % tiny.n_vocab);
    ASSERT_TRUE(model.forward(pooled, std::span<const int32_t>(&t, 1), last).is_ok());
    ASSERT_TRUE(model.forward(alone, std::span<const int32_t>(&t, 1), last).is_ok());
    ASSERT_EQ(max_abs_diff(pooled.logits(), alone.logits(), tiny.n_vocab), 0.0f) << "step " << step;
  }
}

TEST(LlamaKernels, RopeNormRotatesAdjacentPairs) {
  float x[8] = {1, 0, 0, 1, 2, 3, -1, 4};
  float ref[8];
  std::copy(x, x + 8, ref);
  const int pos = 5;
  kernels::rope_norm(x, 1, 8, pos, 1e4f);
  for (int i = 0; i < 4; ++i) {
    const double th = pos * std::pow(1e4, -2.0 * i / 8);
    EXPECT_NEAR(x[2 * i], ref[2 * i] * std::cos(th) - ref[2 * i + 1] * std::sin(th), 1e-5);
    EXPECT_NEAR(x[2 * i + 1], ref[2 * i] * std::sin(th) + ref[2 * i + 1] * std::cos(th), 1e-5);
  }
}

// The vectorised SwiGLU against its scalar oracle (relative error in ulps of the libmvec expf).
constexpr float kTolSiluRel = 1e-6f;
TEST(LlamaKernels, SiluMulMatchesScalarOracle) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> g(1003), u(1003), a(1003), b(1003);
  for (size_t i = 0; i < g.size(); ++i) { g[i] = nd(rng); u[i] = nd(rng); }
  g[0] = -90.0f; g[1] = 90.0f; g[2] = 0.0f;
  kernels::silu_mul(g.data(), u.data(), a.data(), (int64_t)g.size());
  kernels::silu_mul_ref(g.data(), u.data(), b.data(), (int64_t)g.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]), kTolSiluRel * std::max(1.0f, std::fabs(b[i]))) << i << " gate " << g[i];
}

TEST(LlamaLoad, UnsupportedVariantsAreRefused) {
  const std::string p = (std::filesystem::temp_directory_path() / ("llama_bad_" + std::to_string(getpid()) + ".gguf")).string();
  testing::TinyLlama tiny(1);
  ASSERT_TRUE(tiny.write(p).is_ok());
  // Partial RoPE: rope.dimension_count != head_dim.
  {
    formats::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.context_length", 64);
    w.add_u32("llama.embedding_length", 48);
    w.add_u32("llama.block_count", 1);
    w.add_u32("llama.feed_forward_length", 96);
    w.add_u32("llama.attention.head_count", 6);
    w.add_u32("llama.attention.head_count_kv", 2);
    w.add_u32("llama.rope.dimension_count", 4);
    std::vector<float> e(48 * 10, 0.1f);
    const int64_t ne[2] = {48, 10};
    ASSERT_TRUE(w.add_tensor("token_embd.weight", DType::F32, std::span<const int64_t>(ne, 2), e.data(), e.size() * 4).is_ok());
    ASSERT_TRUE(w.write_file(p).is_ok());
    auto m = model::load_model(p);
    ASSERT_FALSE(m.is_ok());
    EXPECT_NE(m.message().find("rope.dimension_count"), std::string::npos) << m.message();
  }
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace dspark
