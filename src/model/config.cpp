#include "model/config.h"

#include <cmath>

namespace dspark::model {

namespace {

Status read_positive(const formats::GgufFile& f, const std::string& key, int64_t max, int64_t* out) {
  auto v = f.get_uint(key);
  if (!v) return Status::error(v.message());
  if (*v == 0 || *v > (uint64_t)max)
    return Status::error(f.path() + ": key '" + key + "' = " + std::to_string(*v) + " is out of range");
  *out = (int64_t)*v;
  return Status::ok();
}

}  // namespace

Result<Gemma3Config> read_gemma3_config(const formats::GgufFile& f) {
  auto arch = f.get_string("general.architecture");
  if (!arch) return Status::error(arch.message());
  if (*arch != "gemma3")
    return Status::error(f.path() + ": general.architecture is '" + *arch + "', expected 'gemma3'");
  Gemma3Config c;
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.block_count", 1024, &c.n_layer));
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.embedding_length", 65536, &c.n_embd));
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.feed_forward_length", 1 << 20, &c.n_ff));
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.attention.head_count", 1024, &c.n_head));
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.attention.head_count_kv", 1024, &c.n_head_kv));
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.attention.key_length", 1024, &c.head_dim));
  int64_t v_len = 0;
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.attention.value_length", 1024, &v_len));
  if (v_len != c.head_dim)
    return Status::error(f.path() + ": gemma3.attention.value_length != key_length (not supported)");
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.context_length", 1 << 24, &c.n_ctx_train));
  if (!f.has("gemma3.attention.sliding_window"))
    return Status::error(f.path() + ": key 'gemma3.attention.sliding_window' missing (non-windowed Gemma 3 "
                         "variants are not supported)");
  DSPARK_RETURN_IF_ERROR(read_positive(f, "gemma3.attention.sliding_window", 1 << 24, &c.sliding_window));
  if (c.n_head % c.n_head_kv != 0)
    return Status::error(f.path() + ": head_count is not a multiple of head_count_kv");
  if (c.head_dim % 2 != 0 || c.head_dim > 1024)
    return Status::error(f.path() + ": key_length must be even and <= 1024");
  if (f.has("gemma3.attention.layer_norm_rms_epsilon")) {
    auto eps = f.get_float("gemma3.attention.layer_norm_rms_epsilon");
    if (!eps) return Status::error(eps.message());
    c.rms_eps = *eps;
  }
  if (f.has("gemma3.rope.freq_base")) {
    auto b = f.get_float("gemma3.rope.freq_base");
    if (!b) return Status::error(b.message());
    c.rope_base_global = *b;
  }
  if (f.has("gemma3.final_logit_softcapping") || f.has("gemma3.rope.scaling.type"))
    return Status::error(f.path() + ": final logit softcapping / rope scaling are not supported");
  auto tokens = f.find_tensor("token_embd.weight");
  if (!tokens) return Status::error(f.path() + ": tensor 'token_embd.weight' missing");
  c.n_vocab = tokens->ne[1];
  c.attn_scale = 1.0f / std::sqrt((float)c.head_dim);
  c.embd_scale = std::sqrt((float)c.n_embd);
  return c;
}

}  // namespace dspark::model
