#include "model/weights.h"

#include <string>

namespace dspark::model {

namespace {

struct Binder {
  const formats::GgufFile& f;
  size_t total_bytes = 0;

  Result<const formats::GgufTensorInfo*> find(const std::string& name, int64_t ne0, int64_t ne1) {
    const formats::GgufTensorInfo* t = f.find_tensor(name);
    if (!t) return Status::error(f.path() + ": tensor '" + name + "' missing");
    const bool is_vector = ne1 == 0;
    const bool ok = is_vector ? (t->n_dims == 1 && t->ne[0] == ne0)
                              : (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1);
    if (!ok) {
      std::string got;
      for (int d = 0; d < t->n_dims; ++d) got += (d ? ", " : "") + std::to_string(t->ne[d]);
      std::string want = std::to_string(ne0) + (is_vector ? "" : ", " + std::to_string(ne1));
      return Status::error(f.path() + ": tensor '" + name + "' has shape [" + got + "], expected [" + want + "]");
    }
    total_bytes += t->n_bytes;
    return t;
  }

  Status vec(const std::string& name, int64_t n, const float** out) {
    auto t = find(name, n, 0);
    if (!t) return t.status();
    if ((*t)->type != DType::F32)
      return Status::error(f.path() + ": tensor '" + name + "' must be F32, is " + dtype_name((*t)->type));
    *out = reinterpret_cast<const float*>(f.tensor_data(**t));
    return Status::ok();
  }

  // GGUF [ne0 = n_cols, ne1 = n_rows]
  Status mat(const std::string& name, int64_t n_rows, int64_t n_cols, kernels::QMatrix* out) {
    auto t = find(name, n_cols, n_rows);
    if (!t) return t.status();
    out->type = (*t)->type;
    out->n_rows = n_rows;
    out->n_cols = n_cols;
    out->data = f.tensor_data(**t);
    out->row_stride = row_bytes((*t)->type, n_cols);
    return Status::ok();
  }
};

}  // namespace

Result<Gemma3Weights> bind_gemma3_weights(const formats::GgufFile& file, const Gemma3Config& c) {
  Binder b{file};
  Gemma3Weights w;
  DSPARK_RETURN_IF_ERROR(b.mat("token_embd.weight", c.n_vocab, c.n_embd, &w.token_embd));
  DSPARK_RETURN_IF_ERROR(b.vec("output_norm.weight", c.n_embd, &w.output_norm));
  if (file.find_tensor("output.weight"))
    return Status::error(file.path() + ": untied 'output.weight' is not supported for gemma3");
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
  w.total_bytes = b.total_bytes;
  return w;
}

}  // namespace dspark::model
