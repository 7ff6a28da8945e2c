// Gemma 3 forward pass (GEMMA3-GGUF.md §6), in paper order over named buffers.
//
// Gemma3Model is immutable after load and may be shared by many sessions; a Session holds one
// sequence's KV cache, scratch buffers and outputs (one thread at a time per session).
// Hidden-state taps: a caller lists tap points; the forward copies those residual states for every
// position. With no taps requested nothing is copied.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace dspark::model {

// Tap points: 0..n_layer-1 = residual output of that decoder layer (HF hidden_states[il + 1]);
// kTapEmbedding = scaled token embedding (HF hidden_states[0]); kTapFinalNorm = post final norm.
inline constexpr int kTapEmbedding = -1;
inline constexpr int kTapFinalNorm = -2;

enum class LogitsMode { kNone, kLast, kAll };

struct ForwardOptions {
  LogitsMode logits = LogitsMode::kLast;
  std::vector<int> taps;  // tap points, in the order outputs are returned
};

struct SessionOptions {
  int64_t n_ctx = 4096;     // maximum positions
  int64_t max_batch = 512;  // largest forward chunk (longer inputs are split)
};

class Gemma3Model;

class Session {
 public:
  Session(const Gemma3Model& model, const SessionOptions& opt, ThreadPool* pool);

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  int64_t n_past() const { return kv_.length(); }

  // [n_out, n_vocab] f32 from the last forward: n_out = 1 (kLast) or n_tokens (kAll).
  const float* logits() const { return logits_.data(); }
  int64_t n_logits_rows() const { return n_logit_rows_; }
  // [n_tokens, n_embd] f32 for opt.taps[i] of the last forward.
  const std::vector<float>& tap(size_t i) const { return taps_[i]; }

 private:
  friend class Gemma3Model;
  KvCache kv_;
  kernels::MatmulContext mm_;
  ThreadPool* pool_;
  // Scratch, sized [max_batch, ...] once at construction.
  std::vector<float> x_;        // [B, n_embd] residual stream
  std::vector<float> xn_;       // [B, n_embd] normed input
  std::vector<float> q_;        // [B, n_head * head_dim]
  std::vector<float> k_;        // [B, kv_dim]
  std::vector<float> v_;        // [B, kv_dim]
  std::vector<float> attn_;     // [B, n_head * head_dim]
  std::vector<float> o_;        // [B, n_embd]
  std::vector<float> gate_;     // [B, n_ff]
  std::vector<float> up_;       // [B, n_ff]
  std::vector<float> scores_;   // [n_threads, n_head / n_head_kv, n_ctx] attention scratch
  std::vector<float> logits_;   // [n_out, n_vocab]
  int64_t n_logit_rows_ = 0;
  std::vector<std::vector<float>> taps_;
};

class Gemma3Model {
 public:
  // Opens, validates and binds the GGUF (mmap; weights are not copied).
  static Result<std::unique_ptr<Gemma3Model>> load(const std::string& path);

  const Gemma3Config& config() const { return config_; }
  const formats::GgufFile& file() const { return file_; }
  const Gemma3Weights& weights() const { return weights_; }

  // Runs tokens at positions [s.n_past(), s.n_past() + n) and appends them to the KV cache.
  // Errors (not aborts) when the context would overflow or a token id is out of range.
  Status forward(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const;

 private:
  Gemma3Model(formats::GgufFile file, Gemma3Config config, Gemma3Weights weights)
      : file_(std::move(file)), config_(config), weights_(std::move(weights)) {}

  // One chunk of <= max_batch tokens. out_row0: first logits row to write (kAll).
  void forward_chunk(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt,
                     int64_t tap_row0, bool last_chunk) const;
  void attention(Session& s, int64_t il, int64_t n_tokens, int64_t pos0) const;

  formats::GgufFile file_;
  Gemma3Config config_;
  Gemma3Weights weights_;
  kernels::GeluTable gelu_;
};

}  // namespace dspark::model
