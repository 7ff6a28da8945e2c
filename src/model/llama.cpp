// Llama family (general.architecture "llama": Llama 2/3, SmolLM, Mistral-style dense models):
// config, weights and layer graph, as llama.cpp builds it (llm_build_llama), without biases.
//   x = embd[token]
//   per layer: x += wo(attn(rope_norm(wq xn), rope_norm(wk xn), wv xn)),  xn = rms_norm(x) * attn_norm
//              x += down(silu(gate(xn)) * up(xn)),                         xn = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)  (output tied to token_embd when absent)
// RoPE "normal" pairing (adjacent dims), GQA with n_head / n_head_kv query heads per K/V head,
// q scaled by 1/sqrt(head_dim) before the dot products (llama.cpp scales the scores; same value).
#include <algorithm>

#include "kernels/ops.h"
#include "kernels/packed.h"
#include "model/archs.h"
#include "model/model.h"

namespace dspark::model {

namespace {


Result<ModelConfig> read_config(const formats::GgufFile& f) {
  auto c = read_common_config(f, "llama");
  if (!c) return c.status();
  ConfigReader r(f, "llama");
  if (r.has("expert_count")) return r.error("mixture-of-experts Llama models are not supported ('llama.expert_count')");
  if (r.has("attention.sliding_window")) return r.error("sliding-window Llama models are not supported");
  return c;
}

Result<ModelWeights> bind_weights(const formats::GgufFile& file, const ModelConfig& c) {
  TensorBinder b(file);
  ModelWeights w;
  DSPARK_RETURN_IF_ERROR(bind_embeddings_and_head(b, c, &w));
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  w.layers.resize(c.n_layer);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (const char* bias : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"})
      if (b.has(p + bias)) return Status::error(file.path() + ": tensor '" + p + bias + "': attention biases are not supported");
    LayerWeights& l = w.layers[il];
    DSPARK_RETURN_IF_ERROR(b.vec(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
    DSPARK_RETURN_IF_ERROR(b.vec(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l.w_gate));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_up.weight", c.n_ff, c.n_embd, &l.w_up));
    DSPARK_RETURN_IF_ERROR(b.mat(p + "ffn_down.weight", c.n_embd, c.n_ff, &l.w_down));
  }
  w.total_bytes = b.total_bytes();
  return w;
}

class LlamaModel final : public Model {
 public:
  LlamaModel(formats::GgufFile file, ModelConfig config, ModelWeights weights, const kernels::Backend& be)
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
      project_qkv(w, L, xn, n);
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {  // the range's rows in a call per op, not per row
        float* q0 = w.q.data() + r0 * q_dim;
        float* k0 = w.k.data() + r0 * kv_dim;
        be.rope_rows(kernels::RopeMode::kNormal, q0, r1 - r0, q_dim, c.n_head, hd, rope_cs(w, r0, il), 2 * hd);
        be.rope_rows(kernels::RopeMode::kNormal, k0, r1 - r0, kv_dim, c.n_head_kv, hd, rope_cs(w, r0, il), 2 * hd);
        store_kv_rows(w, il, r0, r1);
        be.scale(q0, (r1 - r0) * q_dim, c.attn_scale);
      });
      attention(w, il, n);
      be.matmul(w.mm, L.wo, w.attn.data(), n, w.o.data(), n_embd);  // [n, n_embd]
      // x += o; then xn = ffn_norm(x).
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        be.add_inplace(x + r0 * n_embd, w.o.data() + r0 * n_embd, (r1 - r0) * n_embd);
        be.rms_norm_rows(x + r0 * n_embd, L.ffn_norm, xn + r0 * n_embd, r1 - r0, n_embd, c.rms_eps);
      });

      // Feed-forward block (SwiGLU).
      gated_ffn(w, L, xn, n, [&](const float* g, const float* u, float* o, int64_t m) { be.silu_mul(g, u, o, m); });
      be.matmul(w.mm, L.w_down, w.gate.data(), n, w.o.data(), n_embd);  // [n, n_embd]
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        be.add_inplace(x + r0 * n_embd, w.o.data() + r0 * n_embd, (r1 - r0) * n_embd);
      });
      if (!opt.taps.empty()) capture(w, n, opt, (int)il, x);
    }
    finish(w, n, opt, last_rows);
  }
};

}  // namespace

Result<std::unique_ptr<Model>> load_llama(formats::GgufFile file, const kernels::Backend& be) {
  auto config = read_config(file);
  if (!config) return config.status();
  auto weights = bind_weights(file, *config);
  if (!weights) return weights.status();
  return std::unique_ptr<Model>(new LlamaModel(std::move(file), std::move(config).value(), std::move(weights).value(), be));
}

}  // namespace dspark::model
