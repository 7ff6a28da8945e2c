#include "model/config.h"

#include <cmath>

namespace dspark::model {

Status ConfigReader::positive(const std::string& name, int64_t max, int64_t* out) const {
  auto v = f_.get_uint(key(name));
  if (!v) return Status::error(v.message());
  if (*v == 0 || *v > (uint64_t)max)
    return error("key '" + key(name) + "' = " + std::to_string(*v) + " is out of range [1, " + std::to_string(max) + "]");
  *out = (int64_t)*v;
  return Status::ok();
}

Status ConfigReader::optional_float(const std::string& name, float* out) const {
  if (!has(name)) return Status::ok();
  auto v = f_.get_float(key(name));
  if (!v) return Status::error(v.message());
  if (!std::isfinite(*v)) return error("key '" + key(name) + "' is not finite");
  *out = *v;
  return Status::ok();
}

Result<ModelConfig> read_common_config(const formats::GgufFile& f, const std::string& arch) {
  ConfigReader r(f, arch);
  ModelConfig c;
  c.arch = arch;
  DSPARK_RETURN_IF_ERROR(r.positive("block_count", 1024, &c.n_layer));
  DSPARK_RETURN_IF_ERROR(r.positive("embedding_length", 65536, &c.n_embd));
  DSPARK_RETURN_IF_ERROR(r.positive("feed_forward_length", 1 << 20, &c.n_ff));
  DSPARK_RETURN_IF_ERROR(r.positive("attention.head_count", 1024, &c.n_head));
  DSPARK_RETURN_IF_ERROR(r.positive("attention.head_count_kv", 1024, &c.n_head_kv));
  DSPARK_RETURN_IF_ERROR(r.positive("context_length", 1 << 24, &c.n_ctx_train));
  if (r.has("attention.key_length")) {
    DSPARK_RETURN_IF_ERROR(r.positive("attention.key_length", 1024, &c.head_dim));
  } else {
    if (c.n_embd % c.n_head != 0) return r.error("embedding_length is not a multiple of head_count");
    c.head_dim = c.n_embd / c.n_head;
  }
  if (r.has("attention.value_length")) {
    int64_t v_len = 0;
    DSPARK_RETURN_IF_ERROR(r.positive("attention.value_length", 1024, &v_len));
    if (v_len != c.head_dim) return r.error("key '" + r.key("attention.value_length") + "' != key_length (not supported)");
  }
  if (c.n_head % c.n_head_kv != 0) return r.error("head_count is not a multiple of head_count_kv");
  if (c.head_dim % 2 != 0 || c.head_dim > 1024) return r.error("head dimension must be even and <= 1024");
  DSPARK_RETURN_IF_ERROR(r.optional_float("attention.layer_norm_rms_epsilon", &c.rms_eps));
  DSPARK_RETURN_IF_ERROR(r.optional_float("rope.freq_base", &c.rope_base_global));
  c.rope_base_local = c.rope_base_global;
  if (r.has("rope.dimension_count")) {
    int64_t n_rot = 0;
    DSPARK_RETURN_IF_ERROR(r.positive("rope.dimension_count", 1024, &n_rot));
    if (n_rot != c.head_dim)
      return r.error("key '" + r.key("rope.dimension_count") + "' = " + std::to_string(n_rot) +
                     " (partial RoPE is not supported; expected the head dimension " + std::to_string(c.head_dim) + ")");
  }
  if (r.has("rope.scaling.type") || r.has("final_logit_softcapping") || r.has("attn_logit_softcapping"))
    return r.error("RoPE scaling / logit soft-capping are not supported");
  auto tokens = f.find_tensor("token_embd.weight");
  if (!tokens) return r.error("tensor 'token_embd.weight' missing");
  if (tokens->n_dims != 2 || tokens->ne[0] != c.n_embd)
    return r.error("tensor 'token_embd.weight' is not [" + std::to_string(c.n_embd) + ", n_vocab]");
  c.n_vocab = tokens->ne[1];
  c.attn_scale = 1.0f / std::sqrt((float)c.head_dim);
  return c;
}

}  // namespace dspark::model
