#include "model/gemma3.h"

#include <algorithm>
#include <cstring>


namespace dspark::model {

using kernels::matmul;

Session::Session(const Gemma3Model& model, const SessionOptions& opt, ThreadPool* pool)
    : kv_(model.config(), opt.n_ctx, std::min(opt.max_batch, opt.n_ctx)), pool_(pool) {
  const Gemma3Config& c = model.config();
  const int64_t b = kv_.max_batch();
  mm_.isa = kernels::detect_isa();
  mm_.pool = pool;
  x_.resize(b * c.n_embd);
  xn_.resize(b * c.n_embd);
  q_.resize(b * c.n_head * c.head_dim);
  k_.resize(b * kv_.kv_dim());
  v_.resize(b * kv_.kv_dim());
  attn_.resize(b * c.n_head * c.head_dim);
  o_.resize(b * c.n_embd);
  gate_.resize(b * c.n_ff);
  up_.resize(b * c.n_ff);
  scores_.resize((size_t)(pool ? pool->size() : 1) * (c.n_head / c.n_head_kv) * opt.n_ctx);
}

Result<std::unique_ptr<Gemma3Model>> Gemma3Model::load(const std::string& path) {
  auto file = formats::GgufFile::open(path);
  if (!file) return file.status();
  auto config = read_gemma3_config(*file);
  if (!config) return config.status();
  auto weights = bind_gemma3_weights(*file, *config);
  if (!weights) return weights.status();
  return std::unique_ptr<Gemma3Model>(
      new Gemma3Model(std::move(file).value(), std::move(config).value(), std::move(weights).value()));
}

Status Gemma3Model::forward(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const {
  const Gemma3Config& c = config_;
  const int64_t n = (int64_t)tokens.size();
  if (n == 0) return Status::error("forward: no tokens");
  if (s.n_past() + n > s.kv_.n_ctx())
    return Status::error("context overflow: " + std::to_string(s.n_past()) + " cached + " + std::to_string(n) +
                         " new tokens exceed the context size " + std::to_string(s.kv_.n_ctx()));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
      return Status::error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                           " is outside the vocabulary [0, " + std::to_string(c.n_vocab) + ")");
  for (int tap : opt.taps)
    if (tap != kTapEmbedding && tap != kTapFinalNorm && (tap < 0 || tap >= c.n_layer))
      return Status::error("tap point " + std::to_string(tap) + " is not a layer of this model");

  s.taps_.resize(opt.taps.size());
  for (auto& t : s.taps_) t.resize((size_t)(n * c.n_embd));
  s.n_logit_rows_ = opt.logits == LogitsMode::kAll ? n : (opt.logits == LogitsMode::kLast ? 1 : 0);
  s.logits_.resize((size_t)(s.n_logit_rows_ * c.n_vocab));

  const int64_t chunk = s.kv_.max_batch();
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t m = std::min(chunk, n - i0);
    forward_chunk(s, tokens.subspan(i0, m), opt, i0, i0 + m == n);
  }
  return Status::ok();
}

void Gemma3Model::forward_chunk(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt,
                                int64_t row0, bool last_chunk) const {
  const Gemma3Config& c = config_;
  const int64_t n = (int64_t)tokens.size();
  const int64_t pos0 = s.kv_.length();
  const int64_t n_embd = c.n_embd, hd = c.head_dim, q_dim = c.n_head * hd, kv_dim = s.kv_.kv_dim();
  float* x = s.x_.data();    // [n, n_embd]
  float* xn = s.xn_.data();  // [n, n_embd]

  auto capture = [&](int point, const float* src) {
    for (size_t i = 0; i < opt.taps.size(); ++i)
      if (opt.taps[i] == point)
        std::memcpy(s.taps_[i].data() + row0 * n_embd, src, sizeof(float) * n * n_embd);
  };

  // Embedding: dequantized row scaled by sqrt(n_embd).
  const auto& embd = weights_.token_embd;
  for (int64_t t = 0; t < n; ++t) {
    kernels::dequantize_row(embd.type, (const uint8_t*)embd.data + (size_t)tokens[t] * embd.row_stride,
                            x + t * n_embd, n_embd);
    kernels::scale(x + t * n_embd, n_embd, c.embd_scale);
  }
  if (!opt.taps.empty()) capture(kTapEmbedding, x);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = weights_.layers[il];
    // Attention block.
    kernels::rms_norm_rows(x, L.attn_norm, xn, n, n_embd, c.rms_eps);
    matmul(s.mm_, L.wq, xn, n, s.q_.data(), q_dim);     // [n, n_head * hd]
    matmul(s.mm_, L.wk, xn, n, s.k_.data(), kv_dim);    // [n, kv_dim]
    matmul(s.mm_, L.wv, xn, n, s.v_.data(), kv_dim);    // [n, kv_dim]
    for (int64_t t = 0; t < n; ++t) {
      float* q = s.q_.data() + t * q_dim;
      float* k = s.k_.data() + t * kv_dim;
      for (int64_t h = 0; h < c.n_head; ++h) kernels::rms_norm(q + h * hd, L.q_norm, q + h * hd, hd, c.rms_eps);
      for (int64_t g = 0; g < c.n_head_kv; ++g) kernels::rms_norm(k + g * hd, L.k_norm, k + g * hd, hd, c.rms_eps);
      kernels::rope_neox(q, c.n_head, hd, pos0 + t, c.rope_base(il));
      kernels::rope_neox(k, c.n_head_kv, hd, pos0 + t, c.rope_base(il));
      kernels::scale(q, q_dim, c.attn_scale);
      kernels::f32_to_f16_row(k, s.kv_.k_row(il, pos0 + t), kv_dim);
      kernels::f32_to_f16_row(s.v_.data() + t * kv_dim, s.kv_.v_row(il, pos0 + t), kv_dim);
    }
    attention(s, il, n, pos0);
    matmul(s.mm_, L.wo, s.attn_.data(), n, s.o_.data(), n_embd);  // [n, n_embd]
    kernels::rms_norm_rows(s.o_.data(), L.post_attn_norm, s.o_.data(), n, n_embd, c.rms_eps);
    kernels::add_inplace(x, s.o_.data(), n * n_embd);

    // Feed-forward block (GeGLU).
    kernels::rms_norm_rows(x, L.ffn_norm, xn, n, n_embd, c.rms_eps);
    matmul(s.mm_, L.w_gate, xn, n, s.gate_.data(), c.n_ff);  // [n, n_ff]
    matmul(s.mm_, L.w_up, xn, n, s.up_.data(), c.n_ff);      // [n, n_ff]
    gelu_.gelu_mul(s.gate_.data(), s.up_.data(), s.gate_.data(), n * c.n_ff);
    matmul(s.mm_, L.w_down, s.gate_.data(), n, s.o_.data(), n_embd);  // [n, n_embd]
    kernels::rms_norm_rows(s.o_.data(), L.post_ffw_norm, s.o_.data(), n, n_embd, c.rms_eps);
    kernels::add_inplace(x, s.o_.data(), n * n_embd);
    if (!opt.taps.empty()) capture((int)il, x);
  }
  s.kv_.advance(n);

  // Output: final norm, then the tied lm_head only on the rows that need logits.
  const bool need_all_norm =
      opt.logits == LogitsMode::kAll ||
      std::find(opt.taps.begin(), opt.taps.end(), kTapFinalNorm) != opt.taps.end();
  if (need_all_norm) {
    kernels::rms_norm_rows(x, weights_.output_norm, xn, n, n_embd, c.rms_eps);
    capture(kTapFinalNorm, xn);
  }
  if (opt.logits == LogitsMode::kAll) {
    matmul(s.mm_, embd, xn, n, s.logits_.data() + row0 * c.n_vocab, c.n_vocab);
  } else if (opt.logits == LogitsMode::kLast && last_chunk) {
    float* last = xn + (n - 1) * n_embd;
    kernels::rms_norm(x + (n - 1) * n_embd, weights_.output_norm, last, n_embd, c.rms_eps);
    matmul(s.mm_, embd, last, 1, s.logits_.data(), c.n_vocab);
  }
}

// Scaled dot-product attention of n new query rows against the cache (MQA/GQA); numerics in
// kernels/attention.h. One job per (token, K/V head): the heads sharing a K/V row read it once.
void Gemma3Model::attention(Session& s, int64_t il, int64_t n, int64_t pos0) const {
  const Gemma3Config& c = config_;
  const int64_t hd = c.head_dim, q_dim = c.n_head * hd, group = c.n_head / c.n_head_kv;
  const int64_t n_ctx = s.kv_.n_ctx();
  const KvCache& kv = s.kv_;
  auto job = [&](int ti, int nt) {
    float* scores = s.scores_.data() + (size_t)ti * group * n_ctx;  // [group, n_ctx]
    for (int64_t idx = ti; idx < n * c.n_head_kv; idx += nt) {
      const int64_t t = idx / c.n_head_kv, g = idx % c.n_head_kv;
      const int64_t pos = pos0 + t, lo = kv.first_visible(il, pos);
      kernels::attention_f16kv(s.mm_.isa, s.q_.data() + t * q_dim + g * group * hd, (int)group, hd,
                               kv.view(il, g * hd), lo, pos - lo + 1, scores,
                               s.attn_.data() + t * q_dim + g * group * hd);
    }
  };
  if (s.pool_) s.pool_->run(job); else job(0, 1);
}

}  // namespace dspark::model
