// Gemma 3 (general.architecture "gemma3"): config, weights and layer graph, as llama.cpp's
// src/models/gemma3.cpp and HF modeling_gemma3.py compute it.
//   x = embd[token] * sqrt(n_embd)
//   per layer: h = attn(rms_norm(x)) with per-head q/k RMS norms, NEOX RoPE (local base 1e4 on
//              sliding layers, global base on every 6th), q scaled by 1/sqrt(head_dim);
//              x += post_attn_norm(h); x += post_ffw_norm(down(gelu(gate(xn)) * up(xn)))
//   logits = output(rms_norm(x))  (tied to token_embd)
#include <cmath>

#include "kernels/ops.h"
#include "model/archs.h"
#include "model/model.h"

namespace dspark::model {

namespace {

Result<ModelConfig> read_config(const formats::GgufFile& f) {
  auto c = read_common_config(f, "gemma3");
  if (!c) return c.status();
  ConfigReader r(f, "gemma3");
  if (!r.has("attention.sliding_window"))
    return r.error("key 'gemma3.attention.sliding_window' missing (non-windowed Gemma 3 variants are not supported)");
  DSPARK_RETURN_IF_ERROR(r.positive("attention.sliding_window", 1 << 24, &c->sliding_window));
  c->swa_period = 6;  // llama.cpp hard-codes the pattern for gemma3
  c->rope_base_local = 1e4f;
  c->embd_scale = std::sqrt((float)c->n_embd);
  return c;
}

Result<ModelWeights> bind_weights(const formats::GgufFile& file, const ModelConfig& c) {
  TensorBinder b(file);
  ModelWeights w;
  DSPARK_RETURN_IF_ERROR(bind_embeddings_and_head(b, c, &w));
  if (!w.tied_output) return Status::error(file.path() + ": untied 'output.weight' is not supported for gemma3");
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  w.layers.resize(c.n_layer);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    DSPARK_RETURN_IF_ERROR(b.vec(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "attn_q_norm.weight", c.head_dim, &l.q_norm));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "attn_k_norm.weight", c.head_dim, &l.k_norm));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "post_attention_norm.weight", c.n_embd, &l.post_attn_norm));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l.w_gate));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_up.weight", c.n_ff, c.n_embd, &l.w_up));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_down.weight", c.n_embd, c.n_ff, &l.w_down));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "post_ffw_norm.weight", c.n_embd, &l.post_ffw_norm));
  }
  w.total_bytes = b.total_bytes();
  return w;
}

class Gemma3Model final : public Model {
 public:
  Gemma3Model(formats::GgufFile file, ModelConfig config, ModelWeights weights, const kernels::Backend& be)
      : Model(std::move(file), std::move(config), std::move(weights), be) {}

 private:
  void forward_rows(ForwardScratch& w, int64_t n, const ForwardOptions& opt,
                    std::span<const int64_t> last_rows) const override {
    const ModelConfig& c = config();
    const kernels::Backend& be = backend();
    const int64_t n_embd = c.n_embd, hd = c.head_dim, q_dim = c.n_head * hd, kv_dim = c.n_head_kv * hd;
    float* x = w.x.data();    // [n, n_embd]
    float* xn = w.xn.data();  // [n, n_embd]
    embed(w, n);
    rope_tables(w, n);
    if (!opt.taps.empty()) capture(w, n, opt, kTapEmbedding, x);

    for (int64_t il = 0; il < c.n_layer; ++il) {
      const LayerWeights& L = weights().layers[il];
      // Attention block. Per-row steps run over row ranges (row_ranges: the pool in prefill).
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        be.rms_norm_rows(x + r0 * n_embd, L.attn_norm, xn + r0 * n_embd, r1 - r0, n_embd, c.rms_eps);
      });
      project_qkv(w, L, xn, n);  // w.q [n, n_head * hd], w.k / w.v [n, kv_dim]
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        // The range's rows in a call per op, not per row: per-head norms (rows of head_dim), RoPE by
        // each row's angles (rows of w.rope_cs are 2 * head_dim apart), the K/V stores, the q scale.
        float* q0 = w.q.data() + r0 * q_dim;
        float* k0 = w.k.data() + r0 * kv_dim;
        be.rms_norm_rows(q0, L.q_norm, q0, (r1 - r0) * c.n_head, hd, c.rms_eps);
        be.rms_norm_rows(k0, L.k_norm, k0, (r1 - r0) * c.n_head_kv, hd, c.rms_eps);
        be.rope_rows(kernels::RopeMode::kNeox, q0, r1 - r0, q_dim, c.n_head, hd, rope_cs(w, r0, il), 2 * hd);
        be.rope_rows(kernels::RopeMode::kNeox, k0, r1 - r0, kv_dim, c.n_head_kv, hd, rope_cs(w, r0, il), 2 * hd);
        store_kv_rows(w, il, r0, r1);
        be.scale(q0, (r1 - r0) * q_dim, c.attn_scale);
      });
      attention(w, il, n);
      be.matmul(w.mm, L.wo, w.attn.data(), n, w.o.data(), n_embd);  // [n, n_embd]
      // x += post_attn_norm(o); then xn = ffn_norm(x).
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        float* o = w.o.data() + r0 * n_embd;
        be.rms_norm_rows(o, L.post_attn_norm, o, r1 - r0, n_embd, c.rms_eps);
        be.add_inplace(x + r0 * n_embd, o, (r1 - r0) * n_embd);
        be.rms_norm_rows(x + r0 * n_embd, L.ffn_norm, xn + r0 * n_embd, r1 - r0, n_embd, c.rms_eps);
      });

      // Feed-forward block (GeGLU).
      gated_ffn(w, L, xn, n, [&](const float* g, const float* u, float* o, int64_t m) { be.gelu_mul(g, u, o, m); });
      be.matmul(w.mm, L.w_down, w.gate.data(), n, w.o.data(), n_embd);  // [n, n_embd]
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        float* o = w.o.data() + r0 * n_embd;
        be.rms_norm_rows(o, L.post_ffw_norm, o, r1 - r0, n_embd, c.rms_eps);
        be.add_inplace(x + r0 * n_embd, o, (r1 - r0) * n_embd);
      });
      if (!opt.taps.empty()) capture(w, n, opt, (int)il, x);
    }
    finish(w, n, opt, last_rows);
  }
};

}  // namespace

Result<std::unique_ptr<Model>> load_gemma3(formats::GgufFile file, const kernels::Backend& be) {
  auto config = read_config(file);
  if (!config) return config.status();
  auto weights = bind_weights(file, *config);
  if (!weights) return weights.status();
  return std::unique_ptr<Model>(
      new Gemma3Model(std::move(file), std::move(config).value(), std::move(weights).value(), be));
}

}  // namespace dspark::model
