// Binds GGUF tensors to Gemma 3 layer weights (views into the mapped file; nothing is copied).
// Shapes are checked against the config at load; errors name the file and tensor.
#pragma once

#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace dspark::model {

struct LayerWeights {
  const float* attn_norm = nullptr;        // [n_embd] f32
  kernels::QMatrix wq;                     // [n_head * head_dim, n_embd]
  kernels::QMatrix wk;                     // [n_head_kv * head_dim, n_embd]
  kernels::QMatrix wv;                     // [n_head_kv * head_dim, n_embd]
  const float* q_norm = nullptr;           // [head_dim] f32
  const float* k_norm = nullptr;           // [head_dim] f32
  kernels::QMatrix wo;                     // [n_embd, n_head * head_dim]
  const float* post_attn_norm = nullptr;   // [n_embd] f32
  const float* ffn_norm = nullptr;         // [n_embd] f32
  kernels::QMatrix w_gate;                 // [n_ff, n_embd]
  kernels::QMatrix w_up;                   // [n_ff, n_embd]
  kernels::QMatrix w_down;                 // [n_embd, n_ff]
  const float* post_ffw_norm = nullptr;    // [n_embd] f32
};

struct Gemma3Weights {
  kernels::QMatrix token_embd;             // [n_vocab, n_embd]; also the tied lm_head
  std::vector<LayerWeights> layers;        // [n_layer]
  const float* output_norm = nullptr;      // [n_embd] f32
  size_t total_bytes = 0;                  // bytes of all bound tensors
};

Result<Gemma3Weights> bind_gemma3_weights(const formats::GgufFile& file, const Gemma3Config& config);

}  // namespace dspark::model
