// The target-model interface: a decoder-only transformer loaded from a GGUF, run over sessions.
//
// A Model is immutable after load and may be shared by many sessions; a Session holds one
// sequence's KV cache, scratch buffers and outputs (one thread at a time per session).
// load_model() switches on general.architecture (model/archs.h lists the architectures); each
// architecture is one file (model/gemma3.cpp, model/llama.cpp) that reads its config, binds its
// weights and implements forward_rows(), its layer graph, from the shared steps below.
// Hidden-state taps: a caller lists tap points; the forward copies those residual states for every
// position. With no taps requested nothing is copied.
// Compute goes through one kernels::Backend chosen at load (kernels/backend.h): the scratch
// activations and the KV cache are its buffers, its ops run the layer graph, and a forward's
// logits and taps are copied to the host (the Session's arrays) once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "formats/gguf.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/packed.h"
#include "model/argmax_head.h"
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
  // The caller reads nothing but each logits row's argmax (greedy decoding, T 0 verification): where
  // the model has an ArgmaxHead (model/argmax_head.h) a row holds the exact logits only of the
  // entries that could be its largest and -inf elsewhere; its argmax is the full head's, bitwise.
  bool argmax_only = false;
  // A token tree (Model::forward of one session only; empty = a chain): tree_parent[i] is the row
  // that row i follows (tree_parent[0] = -1: row 0 follows the committed tokens), tree_parent[i] < i.
  // Row i sits at position P + depth(i) (P = the committed length) and attends to the committed
  // tokens and its own ancestors, as if its branch alone had been decoded; its K/V row is written
  // at cache position P + i, so after verification the accepted branch is moved into place
  // (KvCache::move_row) and the rest trimmed.
  std::span<const int32_t> tree_parent = {};
};

struct SessionOptions {
  int64_t n_ctx = 4096;     // maximum positions
  int64_t max_batch = 512;  // largest forward chunk (longer inputs are split)
};

class Model;
class Session;

// Activation buffers of one forward over up to max_rows rows (rows of one or several sequences),
// reused across forwards: no allocation in the steady state. One per calling thread. The f32
// arrays are buffers of the model's backend (be); the row plan is host memory.
struct ForwardScratch {
  ForwardScratch(const kernels::Backend& be, const ModelConfig& c, int64_t max_rows, int64_t max_ctx, ThreadPool* pool);
  const kernels::Backend* be = nullptr;
  int64_t max_rows = 0;
  int64_t max_ctx = 0;             // largest context of any session it serves (attention scores)
  kernels::MatmulContext mm;
  ThreadPool* pool = nullptr;
  using Array = kernels::DeviceArray<float>;
  Array x;                         // [rows, n_embd] residual stream
  Array xn;                        // [rows, n_embd] normed input
  Array q;                         // [rows, n_head * head_dim]
  Array k;                         // [rows, kv_dim]
  Array v;                         // [rows, kv_dim]
  Array attn;                      // [rows, n_head * head_dim]
  Array o;                         // [rows, n_embd]
  Array gate;                      // [rows, n_ff]
  Array up;                        // [rows, n_ff]
  Array fused;                     // fused matmul outputs (weights.h), grown on first use
  float* fused_rows(size_t n) {
    if (fused.size() < n) fused.resize(n);
    return fused.data();
  }
  Array scores;                    // [n_threads, n_head / n_head_kv, max_ctx]
  Array attn_split;                // Model::attention_split's buffers, grown on first use
  std::vector<int64_t> attn_split_cols;  // [n_head_kv, threads + 1] its parts' output columns per K/V head
  Array logits;                    // [n_seq, n_vocab] staging (grown on demand)
  // Row plan of the current forward: [rows]
  std::vector<Session*> row_session;
  std::vector<int64_t> row_pos;    // absolute position of the row in its sequence (RoPE, visibility)
  std::vector<int64_t> row_slot;   // cache position its K/V row is written at (= row_pos but in a tree)
  std::vector<int64_t> row_anc;    // tree forwards: [rows * rows] row r's ancestors' cache positions
  std::vector<int64_t> row_n_anc;  //   ... and their count (root first, r itself last); 0 = no tree
  std::vector<int64_t> row_out;    // row index in its session's outputs (taps, kAll logits)
  std::vector<int64_t> attn_cost;  // [rows + 1] attention's prefix sums of the rows' key counts (one layer)
  std::vector<int64_t> attn_rows_first, attn_rows_keys;  // [threads, rows] attention_rows' per-row key ranges
  std::vector<int32_t> row_token;
  Array rope_cs;                   // [rows, 2, head_dim] RoPE angles (Model::rope_tables): global base, local base
  ArgmaxScratch argmax;            // ArgmaxHead::run's buffers and counters (host memory)
};

// One sequence's part of a multi-sequence forward.
struct SeqInput {
  Session* session = nullptr;
  std::span<const int32_t> tokens;
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& opt, ThreadPool* pool);

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  int64_t n_past() const { return kv_.length(); }
  // The pool this session's forwards run on (for per-row work on its logits, e.g. sampling).
  ThreadPool* pool() const { return scratch_.pool; }

  // [n_out, n_vocab] f32 from the last forward: n_out = 1 (kLast) or n_tokens (kAll).
  const float* logits() const { return logits_.data(); }
  int64_t n_logits_rows() const { return n_logit_rows_; }
  // [n_tokens, n_embd] f32 for opt.taps[i] of the last forward.
  const std::vector<float>& tap(size_t i) const { return taps_[i]; }
  // Counters of the exact greedy head over this session's forwards (ForwardOptions::argmax_only).
  const ArgmaxScratch& argmax_stats() const { return scratch_.argmax; }

 private:
  friend class Model;
  KvCache kv_;
  ForwardScratch scratch_;      // for forwards of this session alone, [max_batch] rows
  std::vector<float> logits_;   // [n_out, n_vocab]
  int64_t n_logit_rows_ = 0;
  std::vector<std::vector<float>> taps_;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const kernels::Backend& backend() const { return *be_; }
  const formats::GgufFile& file() const { return file_; }
  const ModelWeights& weights() const { return weights_; }
  // The exact greedy head used for ForwardOptions::argmax_only, or nullptr (then the full head runs).
  const ArgmaxHead* argmax_head() const { return argmax_head_.get(); }

  // Runs tokens at positions [s.n_past(), s.n_past() + n) and appends them to the KV cache.
  // Errors (not aborts) when the context would overflow or a token id is out of range.
  Status forward(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const;

  // Several sequences in one forward: every matrix product runs once over all their rows (weights
  // read once), attention and KV writes stay per sequence. Each session receives exactly what
  // forward(session, tokens, opt) would give it (bitwise: the kernels are batch-invariant).
  // Each sequence's tokens must fit its session's max_batch, all rows must fit `scratch`, and the
  // sessions must be distinct.
  Status forward_multi(std::span<const SeqInput> seqs, const ForwardOptions& opt, ForwardScratch& scratch) const;

  // Forwards of at least this many rows spread their per-row steps over the pool (row_ranges).
  static constexpr int64_t kParallelRowsMin = 32;

 protected:
  Model(formats::GgufFile file, ModelConfig config, ModelWeights weights, const kernels::Backend& be)
      : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)), be_(&be) {
    prepare_weights(&weights_, be, file_.mapped(), config_);
    if (ArgmaxHead::worth_building(weights_)) argmax_head_ = ArgmaxHead::build(weights_.output, be);
  }

  // The architecture's graph over the n rows planned in w.row_* (grouped by session, in position
  // order): embed(), per layer the architecture's blocks using attention() / store_kv_rows(), capture()
  // after each layer, then finish(). Sessions whose last row is in `last_rows` get kLast logits.
  virtual void forward_rows(ForwardScratch& w, int64_t n, const ForwardOptions& opt,
                            std::span<const int64_t> last_rows) const = 0;

  // Shared steps for forward_rows implementations.
  // fn(r0, r1) over contiguous ranges covering rows [0, n): spread over w.pool for prefill-sized n
  // (>= kParallelRowsMin) on a host-memory backend, else one call fn(0, n). For per-row work only
  // (norms, RoPE, KV stores, residual adds, activations), whose rows do not depend on each other,
  // so the result is the same whichever thread runs a row; ranges start at row boundaries, so a
  // vectorized op sees the same alignment as in one call. Verify windows (<= 16 rows) stay on the
  // calling thread, where a hand-off would cost more than the work.
  template <class Fn>
  void row_ranges(ForwardScratch& w, int64_t n, const Fn& fn) const {
    if (!w.pool || w.pool->size() < 2 || n < kParallelRowsMin || !be_->host_memory()) {
      fn((int64_t)0, n);
      return;
    }
    w.pool->run([&](int ti, int nt) { fn(n * ti / nt, n * (ti + 1) / nt); });
  }
  // x [n, n_embd] <- token_embd rows of w.row_token, times config().embd_scale when != 1.
  void embed(ForwardScratch& w, int64_t n) const;
  // w.rope_cs <- each row's RoPE angles for the global base and, with sliding layers, the local one:
  // once a forward instead of once a layer and head group (a row's 32-128 cos / sin pairs cost more than
  // rotating its heads: ~0.4 us for SmolLM2's 64 dims, ~1.5 us for Gemma 3's 256, 60 / 36 times a row).
  // rope_cs(w, t, il): row t's angles for layer il's base (the local one where il is sliding).
  void rope_tables(ForwardScratch& w, int64_t n) const;
  const float* rope_cs(const ForwardScratch& w, int64_t t, int64_t il) const {
    return w.rope_cs.data() + (t * 2 + (config_.is_sliding(il) ? 1 : 0)) * config_.head_dim;
  }
  // Copies rows of src [n, n_embd] to the outputs of tap point `point` of their sessions.
  void capture(ForwardScratch& w, int64_t n, const ForwardOptions& opt, int point, const float* src) const;
  // Rows [r0, r1)'s k and v (w.k / w.v [n, kv_dim], post-RoPE) into their sessions' caches at their
  // slots, f16: a call per K/V head and run of rows whose cache rows follow each other.
  void store_kv_rows(ForwardScratch& w, int64_t il, int64_t r0, int64_t r1) const;
  // Scaled dot-product attention of the n rows' q (already scaled) against their caches -> w.attn.
  void attention(ForwardScratch& w, int64_t il, int64_t n) const;
  // attention() of one decoded row with each K/V head's keys and columns shared out among the threads
  // (kernels::AttnSplit); false (nothing done) where that does not apply.
  bool attention_split(ForwardScratch& w, int64_t il, int64_t n) const;
  // w.q [n, q_dim], w.k, w.v [n, kv_dim] <- xn [n, n_embd] times wq / wk / wv, from their fused
  // packed matrix (weights.h) when the ISA runs it, else one matmul each. Same bits either way.
  void project_qkv(ForwardScratch& w, const LayerWeights& L, const float* xn, int64_t n) const;
  // w.gate [n, n_ff] <- act(xn W_gate^T, xn W_up^T) row by row, act(gate, up, out, n_ff) elementwise;
  // from the fused gate/up matrix when the ISA runs it.
  template <class Act>
  void gated_ffn(ForwardScratch& w, const LayerWeights& L, const float* xn, int64_t n, const Act& act) const {
    const int64_t ff = config_.n_ff;
    if (be_->prepared_runs(L.w_gate_up, n)) {
      float* f = w.fused_rows((size_t)(n * 2 * ff));  // [n, n_ff gate | n_ff up]
      be_->matmul(w.mm, L.w_gate_up, xn, n, f, 2 * ff);
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        for (int64_t t = r0; t < r1; ++t) act(f + t * 2 * ff, f + t * 2 * ff + ff, w.gate.data() + t * ff, ff);
      });
    } else {
      be_->matmul(w.mm, L.w_gate, xn, n, w.gate.data(), ff);  // [n, n_ff]
      be_->matmul(w.mm, L.w_up, xn, n, w.up.data(), ff);      // [n, n_ff]
      row_ranges(w, n, [&](int64_t r0, int64_t r1) {
        act(w.gate.data() + r0 * ff, w.up.data() + r0 * ff, w.gate.data() + r0 * ff, (r1 - r0) * ff);
      });
    }
  }
  // Advances the sessions' caches, then the final norm and the LM head on the rows that need them.
  void finish(ForwardScratch& w, int64_t n, const ForwardOptions& opt, std::span<const int64_t> last_rows) const;
  // y [m, ldy] <- the LM head over xn [m, n_embd]: the full head, or the ArgmaxHead when opt asks
  // for the argmax only and the model has one.
  void head_matmul(ForwardScratch& w, const ForwardOptions& opt, const float* xn, int64_t m, float* y, int64_t ldy) const;

 private:
  // Checks tokens and context room for one sequence; sizes its outputs.
  Status prepare(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const;

  formats::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  const kernels::Backend* be_;
  std::unique_ptr<ArgmaxHead> argmax_head_;
};

// Opens the GGUF (mmap; weights are not copied), reads general.architecture and loads it with the
// matching architecture; an architecture not in model/archs.h is an error naming the key.
// be: the backend it runs on (nullptr = kernels::default_backend(), the CPU); it must outlive the model.
Result<std::unique_ptr<Model>> load_model(const std::string& path, const kernels::Backend* be = nullptr);

}  // namespace dspark::model
