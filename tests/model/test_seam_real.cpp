// The backend seam on the real targets, as a device backend sees it: the CPU's kernels behind a
// decorator whose memory is "not the host's" (host_memory() false, so the model stages logits and
// copies the norm vectors) and which checks that every array an op is given lies in one of its own
// allocations, as a GPU's would have to (kernels/backend.h lists the few host arguments the seam
// allows: ids, the attention rows' positions, a tree's extra keys). The logits must be the plain
// CPU backend's, bit for bit, for a prompt, verify windows of 1 to 16 tokens, last-row logits and a
// token tree, two sequences in one batched forward and a prompt-cache restore; and no op may be
// handed host memory. What the CUDA backend relies on, checked here on any machine.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "kernels/backend.h"
#include "real_model.h"
#include "serve/prompt_cache.h"

namespace dspark::testing {
namespace {

class SeamCheckBackend final : public kernels::Backend {
 public:
  explicit SeamCheckBackend(const kernels::Backend& in) : in_(in) {}

  std::vector<std::string> violations() const {
    std::lock_guard lk(mu_);
    return bad_;
  }
  int64_t to_host_bytes() const { return to_host_.load(); }
  int64_t from_host_bytes() const { return from_host_.load(); }

  std::string name() const override { return "seam-check(" + in_.name() + ")"; }
  kernels::Buffer alloc(size_t bytes) const override {
    if (bytes == 0) return {};
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::memset(p, 0, bytes);
    std::lock_guard lk(mu_);
    ranges_[(const char*)p] = bytes;
    return kernels::Buffer(this, p, bytes);
  }
  void release(void* p, size_t) const override {
    {
      std::lock_guard lk(mu_);
      ranges_.erase((const char*)p);
    }
    std::free(p);
  }
  void copy(void* d, const void* s, size_t n) const override {
    mine(d, n, "copy dst");
    mine(s, n, "copy src");
    in_.copy(d, s, n);
  }
  void to_host(void* d, const void* s, size_t n) const override {
    to_host_ += (int64_t)n;
    mine(s, n, "to_host src");
    in_.to_host(d, s, n);
  }
  void from_host(void* d, const void* s, size_t n) const override {
    from_host_ += (int64_t)n;
    mine(d, n, "from_host dst");
    in_.from_host(d, s, n);
  }
  bool host_memory() const override { return false; }

  bool prepare_weight(kernels::QMatrix* m, kernels::Buffer* st) const override { return in_.prepare_weight(m, st); }
  bool fused_weight(std::span<const kernels::QMatrix* const> p, kernels::QMatrix* o, kernels::Buffer* st) const override {
    return in_.fused_weight(p, o, st);
  }
  bool weight_prepared(const kernels::QMatrix& m) const override { return in_.weight_prepared(m); }
  bool prepared_runs(const kernels::QMatrix& m, int64_t n) const override { return in_.prepared_runs(m, n); }
  kernels::MatmulContext matmul_context(ThreadPool* pool) const override { return in_.matmul_context(pool); }
  void matmul(kernels::MatmulContext& ctx, const kernels::QMatrix& w, const float* x, int64_t n, float* y,
              int64_t ldy) const override {
    mine(x, 4 * (size_t)(n * w.n_cols), "matmul x");
    mine(y, 4 * (size_t)((n - 1) * ldy + w.n_rows), "matmul y");
    in_.matmul(ctx, w, x, n, y, ldy);
  }
  kernels::MatmulPath matmul_path(const kernels::QMatrix& w) const override { return in_.matmul_path(w); }
  void embed_rows(const kernels::QMatrix& t, const int32_t* ids, int64_t n, float s, float* x) const override {
    mine(x, 4 * (size_t)(n * t.n_cols), "embed_rows x");
    in_.embed_rows(t, ids, n, s, x);
  }
  void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const override {
    mine(x, 4 * (size_t)(rows * n), "rms_norm x");
    mine(w, 4 * (size_t)n, "rms_norm weight");
    mine(out, 4 * (size_t)(rows * n), "rms_norm out");
    in_.rms_norm_rows(x, w, out, rows, n, eps);
  }
  void rope_angles(int64_t hd, int64_t pos, float base, float* cs) const override {
    mine(cs, 4 * (size_t)hd, "rope_angles cs");
    in_.rope_angles(hd, pos, base, cs);
  }
  void rope(kernels::RopeMode m, float* x, int64_t heads, int64_t hd, const float* cs) const override {
    mine(x, 4 * (size_t)(heads * hd), "rope x");
    mine(cs, 4 * (size_t)hd, "rope cs");
    in_.rope(m, x, heads, hd, cs);
  }
  void scale(float* x, int64_t n, float s) const override {
    mine(x, 4 * (size_t)n, "scale");
    in_.scale(x, n, s);
  }
  void add_inplace(float* y, const float* x, int64_t n) const override {
    mine(y, 4 * (size_t)n, "add y");
    mine(x, 4 * (size_t)n, "add x");
    in_.add_inplace(y, x, n);
  }
  void silu_mul(const float* g, const float* u, float* o, int64_t n) const override {
    for (const float* p : {g, u, (const float*)o}) mine(p, 4 * (size_t)n, "silu_mul");
    in_.silu_mul(g, u, o, n);
  }
  void gelu_mul(const float* g, const float* u, float* o, int64_t n) const override {
    for (const float* p : {g, u, (const float*)o}) mine(p, 4 * (size_t)n, "gelu_mul");
    in_.gelu_mul(g, u, o, n);
  }
  void f32_to_f16(const float* x, uint16_t* y, int64_t n) const override {
    mine(x, 4 * (size_t)n, "f32_to_f16 x");
    mine(y, 2 * (size_t)n, "f32_to_f16 y");
    in_.f32_to_f16(x, y, n);
  }
  void attention(const float* q, int n_q, int64_t hd, const kernels::KvView& kv, int64_t first, int64_t n_keys,
                 float* scores, float* out) const override {
    mine(q, 4 * (size_t)(n_q * hd), "attention q");
    mine(out, 4 * (size_t)(n_q * hd), "attention out");
    mine(scores, 4 * (size_t)(n_q * (n_keys + kv.n_extra)), "attention scores");
    cache(kv);
    in_.attention(q, n_q, hd, kv, first, n_keys, scores, out);
  }
  void attention_rows(const kernels::AttnRows& r, int n_q, int64_t hd, const kernels::KvView& kv,
                      float* scores) const override {
    mine(r.q, 4 * (size_t)((r.n_rows - 1) * r.q_stride + n_q * hd), "attention_rows q");
    mine(r.out, 4 * (size_t)((r.n_rows - 1) * r.out_stride + n_q * hd), "attention_rows out");
    mine(scores, 4, "attention_rows scores");
    cache(kv);
    in_.attention_rows(r, n_q, hd, kv, scores);
  }
  bool attention_split_ok(int64_t hd) const override { return in_.attention_split_ok(hd); }
  void attention_split(const kernels::AttnSplit& s, int phase, int part, float* p) const override {
    mine(s.q, 4 * (size_t)(s.n_q * s.head_dim), "attention_split q");
    mine(s.out, 4 * (size_t)(s.n_q * s.head_dim), "attention_split out");
    mine(p, 4, "attention_split p");
    cache(s.kv);
    in_.attention_split(s, phase, part, p);
  }
  int64_t argmax(const float* x, int64_t n) const override {
    mine(x, 4 * (size_t)n, "argmax");
    return in_.argmax(x, n);
  }

 private:
  void cache(const kernels::KvView& kv) const {
    mine(kv.k, 2 * (size_t)(kv.capacity * kv.stride), "attention K");
    mine(kv.v, 2 * (size_t)(kv.capacity * kv.stride), "attention V");
  }
  // Records a violation when [p, p + n) is not inside one allocation of this backend.
  void mine(const void* p, size_t n, const char* what) const {
    const char* c = static_cast<const char*>(p);
    std::lock_guard lk(mu_);
    auto it = ranges_.upper_bound(c);
    if (it != ranges_.begin()) {
      --it;
      if (c >= it->first && c + n <= it->first + it->second) return;
    }
    if (bad_.size() < 20) bad_.push_back(what);
  }

  const kernels::Backend& in_;
  mutable std::mutex mu_;
  mutable std::map<const char*, size_t> ranges_;
  mutable std::vector<std::string> bad_;
  mutable std::atomic<int64_t> to_host_{0}, from_host_{0};
};

void check_model(runtime::LoadedModel* lm) {
  const SeamCheckBackend be(kernels::default_backend());
  auto staged = runtime::load_model(lm->path, "", "", be);
  ASSERT_TRUE(staged.is_ok()) << staged.message();
  const model::Model &a = *staged->model, &b = *lm->model;
  const model::SessionOptions opt{.n_ctx = 256, .max_batch = 64};
  model::Session sa(a, opt, &test_pool()), sb(b, opt, &test_pool());
  const int64_t V = a.config().n_vocab;
  const std::vector<int32_t> prompt =
      lm->tok->encode("The history of the city begins with a small harbour where fishermen", true, false);
  const model::ForwardOptions all{model::LogitsMode::kAll, {}}, last{model::LogitsMode::kLast, {}};
  ASSERT_TRUE(a.forward(sa, prompt, all).is_ok());
  ASSERT_TRUE(b.forward(sb, prompt, all).is_ok());
  ASSERT_EQ(std::memcmp(sa.logits(), sb.logits(), prompt.size() * V * sizeof(float)), 0) << "prompt";
  for (int64_t n : {1, 2, 5, 8, 16}) {
    std::vector<int32_t> win;
    for (int64_t i = 0; i < n; ++i) win.push_back(prompt[(size_t)(1 + i % (int64_t)(prompt.size() - 1))]);
    const model::ForwardOptions& o = n == 5 ? last : all;
    ASSERT_TRUE(a.forward(sa, win, o).is_ok());
    ASSERT_TRUE(b.forward(sb, win, o).is_ok());
    const size_t rows = n == 5 ? 1 : (size_t)n;
    ASSERT_EQ(std::memcmp(sa.logits(), sb.logits(), rows * V * sizeof(float)), 0) << "window of " << n;
  }
  // A token tree (two branches after the root): its rows read extra keys.
  const std::vector<int32_t> tree_tokens = {prompt[1], prompt[2], prompt[3], prompt[2]};
  model::ForwardOptions tree{model::LogitsMode::kAll, {}};
  const std::vector<int32_t> parent = {-1, 0, 1, 0};
  tree.tree_parent = parent;
  ASSERT_TRUE(a.forward(sa, tree_tokens, tree).is_ok());
  ASSERT_TRUE(b.forward(sb, tree_tokens, tree).is_ok());
  ASSERT_EQ(std::memcmp(sa.logits(), sb.logits(), tree_tokens.size() * V * sizeof(float)), 0) << "tree";
  const std::vector<std::string> bad = be.violations();
  EXPECT_TRUE(bad.empty()) << "host memory handed to an op: " << bad.front() << " (and " << bad.size() - 1 << " more)";
}

// What the server adds: two sequences in one batched forward, and a sequence saved to the prompt
// cache and restored into another session (K/V rows through to_host / from_host), then continued.
void check_multi_and_prompt_cache(runtime::LoadedModel* lm) {
  const SeamCheckBackend be(kernels::default_backend());
  auto staged = runtime::load_model(lm->path, "", "", be);
  ASSERT_TRUE(staged.is_ok()) << staged.message();
  const model::Model &a = *staged->model, &b = *lm->model;
  const model::SessionOptions opt{.n_ctx = 256, .max_batch = 64};
  const int64_t V = a.config().n_vocab;
  const std::vector<int32_t> p1 = lm->tok->encode("Rivers carry sediment to the sea, and over", true, false);
  const std::vector<int32_t> p2 = lm->tok->encode("A list of prime numbers: 2, 3, 5, 7,", true, false);
  const model::ForwardOptions last{model::LogitsMode::kLast, {}};
  model::Session a1(a, opt, &test_pool()), a2(a, opt, &test_pool()), b1(b, opt, &test_pool()), b2(b, opt, &test_pool());
  model::ForwardScratch wa(a.backend(), a.config(), 128, 256, &test_pool()), wb(b.backend(), b.config(), 128, 256,
                                                                                 &test_pool());
  const model::SeqInput sa[2] = {{&a1, p1}, {&a2, p2}}, sb[2] = {{&b1, p1}, {&b2, p2}};
  ASSERT_TRUE(a.forward_multi(sa, last, wa).is_ok());
  ASSERT_TRUE(b.forward_multi(sb, last, wb).is_ok());
  ASSERT_EQ(std::memcmp(a1.logits(), b1.logits(), V * sizeof(float)), 0) << "batched sequence 1";
  ASSERT_EQ(std::memcmp(a2.logits(), b2.logits(), V * sizeof(float)), 0) << "batched sequence 2";

  serve::PromptCache cache(size_t{64} << 20);
  speculative::SeqHistory h;
  h.tokens = p1;
  // Every K and V row of the sequence (f16) crosses through the backend, both ways.
  const model::ModelConfig& c = a.config();
  const int64_t kv_bytes = 2 * c.n_layer * c.n_head_kv * (int64_t)p1.size() * c.head_dim * 2;
  const int64_t down0 = be.to_host_bytes();
  cache.save(a1.kv(), h);
  ASSERT_EQ(cache.entries(), 1u);
  EXPECT_EQ(be.to_host_bytes() - down0, kv_bytes) << "the snapshot's rows through to_host";
  model::Session restored(a, opt, &test_pool());
  speculative::SeqHistory hr;
  const int64_t up0 = be.from_host_bytes();
  ASSERT_TRUE(cache.restore(0, restored.kv(), &hr));
  EXPECT_EQ(be.from_host_bytes() - up0, kv_bytes) << "the restored rows through from_host";
  ASSERT_EQ(hr.tokens, p1);
  const int32_t next = p2[1];
  ASSERT_TRUE(a.forward(restored, std::span<const int32_t>(&next, 1), last).is_ok());
  ASSERT_TRUE(b.forward(b1, std::span<const int32_t>(&next, 1), last).is_ok());
  ASSERT_EQ(std::memcmp(restored.logits(), b1.logits(), V * sizeof(float)), 0) << "after a prompt-cache restore";
  const std::vector<std::string> bad = be.violations();
  EXPECT_TRUE(bad.empty()) << "host memory handed to an op: " << bad.front() << " (and " << bad.size() - 1 << " more)";
}

TEST(SeamReal, StagedBackendBatchedAndPromptCacheSmolLM2) {
  DSPARK_REQUIRE_SMOLLM2();
  check_multi_and_prompt_cache(real_smollm2());
}

TEST(SeamReal, StagedBackendBatchedAndPromptCacheGemma) {
  DSPARK_REQUIRE_REAL_MODEL();
  check_multi_and_prompt_cache(real_model());
}

TEST(SeamReal, StagedBackendSameLogitsAndNoHostPointersGemma) {
  DSPARK_REQUIRE_REAL_MODEL();
  check_model(real_model());
}

TEST(SeamReal, StagedBackendSameLogitsAndNoHostPointersSmolLM2) {
  DSPARK_REQUIRE_SMOLLM2();
  check_model(real_smollm2());
}

}  // namespace
}  // namespace dspark::testing
