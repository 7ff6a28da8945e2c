// Hyperparameters of a decoder-only target model, read from GGUF metadata. One struct for every
// architecture (model/<arch>.cpp fills it); fields an architecture does not use keep neutral values
// (no sliding window, embedding scale 1, equal RoPE bases).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "formats/gguf.h"

namespace dspark::model {

struct ModelConfig {
  std::string arch;         // general.architecture: "gemma3", "llama"
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;     // key_length == value_length
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t sliding_window = 0;  // 0: every layer attends to the whole context
  int64_t swa_period = 6;   // with a window: layer il is sliding iff il % swa_period < swa_period - 1
  float rms_eps = 1e-6f;
  float rope_base_global = 1e6f;
  float rope_base_local = 1e4f;
  float attn_scale = 0.0f;  // 1/sqrt(head_dim)
  float embd_scale = 1.0f;  // token embeddings are multiplied by this (Gemma: sqrt(n_embd))

  bool is_sliding(int64_t il) const { return sliding_window > 0 && il % swa_period < swa_period - 1; }
};

// Reads "<arch>.<name>" keys for an architecture's config reader; errors name the file and key.
class ConfigReader {
 public:
  ConfigReader(const formats::GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  std::string key(const std::string& name) const { return arch_ + "." + name; }
  bool has(const std::string& name) const { return f_.has(key(name)); }
  // Required unsigned key in [1, max].
  Status positive(const std::string& name, int64_t max, int64_t* out) const;
  // Optional float key: *out keeps its value when the key is absent.
  Status optional_float(const std::string& name, float* out) const;
  Status error(const std::string& msg) const { return Status::error(f_.path() + ": " + msg); }
  const formats::GgufFile& file() const { return f_; }

 private:
  const formats::GgufFile& f_;
  std::string arch_;
};

// The fields every architecture reads the same way: block_count, embedding_length,
// feed_forward_length, attention.head_count(_kv), context_length, layer_norm_rms_epsilon,
// rope.freq_base, n_vocab from token_embd; head_dim from key_length or n_embd / n_head; checks
// shapes the kernels need. Architecture-specific keys are read by the architecture's file.
Result<ModelConfig> read_common_config(const formats::GgufFile& f, const std::string& arch);

}  // namespace dspark::model
