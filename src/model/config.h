// Gemma 3 hyperparameters read from GGUF metadata (GEMMA3-GGUF.md §2-3), plus the values
// llama.cpp hard-codes for the architecture (local RoPE base, sliding-window pattern).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "formats/gguf.h"

namespace dspark::model {

struct Gemma3Config {
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;     // key_length == value_length
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t sliding_window = 0;
  int64_t swa_period = 6;   // layer il is sliding iff il % swa_period < swa_period - 1
  float rms_eps = 1e-6f;
  float rope_base_global = 1e6f;
  float rope_base_local = 1e4f;
  float attn_scale = 0.0f;  // 1/sqrt(head_dim)
  float embd_scale = 0.0f;  // sqrt(n_embd)

  bool is_sliding(int64_t il) const { return il % swa_period < swa_period - 1; }
  float rope_base(int64_t il) const { return is_sliding(il) ? rope_base_local : rope_base_global; }
};

// Reads and validates the config; errors name the file and key.
Result<Gemma3Config> read_gemma3_config(const formats::GgufFile& file);

}  // namespace dspark::model
