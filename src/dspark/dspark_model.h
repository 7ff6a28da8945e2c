// DeepSpec `Gemma4DSparkModel` drafter weights and backbone forward (docs/DSPARK-ENGINE.md,
// docs/DSPARK-CHECKPOINT.md). Immutable after load; one DSparkModel may serve many drafter states.
//
// Weights: every matrix is a quant::DraftMatrix over the mapped safetensors data in its stored form:
// F32 / F16 / BF16 (the SIMD kernels take f32 activations against half weights, so a BF16
// checkpoint costs its file size and no f32 copy) or quantized, affine / turbo, per the config's
// `quantization` block (docs/QUANT-FORMAT.md; quant/bind.h). A tensor whose data is not aligned to
// its element size is copied once into owned storage. Norm vectors, biases and layer_scalar are
// read to f32. An explicit lm_head [V_d, H] together with d2t is the draft head (row j = draft
// index j); the quantizer writes it that way so the head can be quantized.
// Extension E1: embed_tokens / lm_head absent -> the target's tables (TargetTables, views that must
// outlive the model). Extension E2: d2t [V_d] I64 maps draft indices to target ids. E3: lm_head absent
// with d2t -> the target's output rows d2t[j] (copied, same encoding). E4: markov_w1 [V_d + 1, r] with
// d2t -> indexed through d2t, last row shared by ids outside the draft vocabulary.
//
// Forward numerics are f32 (norms accumulate in double, RoPE angles in double); the reference
// (scripts/dspark_ref.py, float64) agrees to ~1e-5 on the synthetic goldens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "quant/draft_matrix.h"
#include "quant/quant_config.h"
#include "dspark/dspark_config.h"
#include "model/taps.h"

namespace dspark::net {

// The target's token tables for drafters that omit embed_tokens / lm_head (Gemma 3: both are the
// tied token_embd, raw / unscaled). data == nullptr: not available.
struct TargetTables {
  kernels::QMatrix embed;    // [n_vocab, n_embd]
  kernels::QMatrix lm_head;  // [n_vocab, n_embd]
  int64_t n_vocab = 0, n_embd = 0;
};

// What the pairing check compares against (docs/DSPARK-ENGINE.md, 'Construction').
struct TargetShape {
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_vocab = 0;
};
inline TargetShape target_shape(const model::ModelConfig& c) { return {c.n_layer, c.n_embd, c.n_vocab}; }

struct DSparkLayer {
  quant::DraftMatrix wq;               // [nH*hd, H]
  quant::DraftMatrix wk;               // [nKV*hd, H] (k_eq_v: also the V source)
  quant::DraftMatrix wo;               // [H, nH*hd]
  quant::DraftMatrix w_gate, w_up;     // [I, H]
  quant::DraftMatrix w_down;           // [H, I]
  std::vector<float> q_norm, k_norm;   // [hd]
  std::vector<float> input_norm, post_attn_norm, pre_ffw_norm, post_ffw_norm;  // [H]
  float layer_scalar = 1.0f;
};

struct DSparkWeights {
  quant::DraftMatrix embed;    // [V, H] gather table (drafter's or the target's)
  quant::DraftMatrix lm_head;  // [V_d, H]
  quant::DraftMatrix fc;       // [H, m*H]
  std::vector<float> hidden_norm, norm;  // [H]
  std::vector<DSparkLayer> layers;
  // Markov head (r > 0)
  quant::DraftMatrix markov_w1;  // [V, r] (or [V_d + 1, r], E4) gather table, by the previous token
  quant::DraftMatrix markov_w2;  // [V_d, r]
  quant::DraftMatrix gate_w;     // gated: [r, H+r]
  std::vector<float> gate_b;     // gated: [r]
  quant::DraftMatrix joint_w;    // rnn: [3r, 2r+H], rows [gate; candidate; output]
  std::vector<float> joint_b;  // rnn: [3r]
  // Confidence head
  std::vector<float> conf_w;   // [H (+ r)]
  float conf_b = 0.0f;
  std::vector<int32_t> d2t;    // [V_d] target id of draft index j; empty = identity
  std::vector<int32_t> w1_row; // [V] markov_w1 row of a target id (E4); empty = the id itself
  int64_t markov_w1_row(int32_t target_id) const { return w1_row.empty() ? target_id : w1_row[(size_t)target_id]; }
  bool embed_from_target = false, lm_head_from_target = false;
};

// Per-request context K/V (docs/DSPARK-ENGINE.md, 'A round'): rows appended for committed positions only.
struct DSparkContext {
  std::vector<std::vector<float>> k, v;  // per layer [len, nKV, hd] f32; K roped, V not
  int64_t len = 0;
};

// Reusable buffers for one drafter state (sized by DSparkModel::init_scratch; no steady-state
// allocation unless the context outgrows its reservation).
struct DSparkScratch {
  kernels::MatmulContext mm;
  ThreadPool* pool = nullptr;
  std::vector<float> taps, ctx, kraw;          // context projection chunk: [C, m*H], [C, H], [C, nKV*hd]
  std::vector<float> h, x, q, k, v, attn, o;   // block rows [γ, ...]
  std::vector<float> gate, up;                 // [γ, I]
  std::vector<std::vector<float>> scores;      // per thread [queries of a job, ctx + γ]
  std::vector<std::vector<const float*>> attn_q;  // per thread: a job's query rows (into q)
  std::vector<std::vector<float*>> attn_out;      // per thread: their output rows (into attn)
  std::vector<double> cos, sin;                // [γ, hd/2] RoPE tables of the current rows
};

// How the weights are held after loading.
struct DSparkLoadOptions {
  // 8 or 4: fc, the layers' matrices and a drafter-owned LM head as Q8_0 / Q4_1 copies
  // (DraftMatrix::integer_copy) for the integer matmul kernels: on CPUs without fast kernels for
  // the 4-bit drafter formats (no AMX) this is the fast form (docs/results/2026-12-02.md, docs/results/2026-12-03.md). Gather tables and
  // the Markov head stay as given. 0 = every matrix as given.
  int copy_bits = 0;
  // The kernels' instruction set: the target backend's (`--backend`), so one flag governs the whole
  // process; clamped to what the CPU has. Unset: the best the CPU has.
  std::optional<kernels::Isa> isa;
};

class DSparkModel {
 public:
  // Opens `dir` (config.json + model.safetensors or an index), checks the pairing against the
  // target and binds every tensor. `tables` may be null when the drafter has its own tables.
  static Result<std::shared_ptr<const DSparkModel>> load(const std::string& dir, const TargetShape& target,
                                                         const TargetTables* tables, const DSparkLoadOptions& opt = {});

  const DSparkConfig& config() const { return cfg_; }
  const DSparkWeights& weights() const { return w_; }
  const std::string& dir() const { return dir_; }
  bool quantized() const { return quant_.present; }  // config.json has a `quantization` block
  int64_t draft_vocab() const { return w_.lm_head.n_rows(); }  // V_d
  float embed_scale() const { return embed_scale_; }          // bf16(sqrt(H))
  kernels::Isa isa() const { return isa_; }                   // the kernels it runs (DSparkLoadOptions::isa)
  // ||markov_w2[v]||_2 per draft index [V_d] and their max (rounded up), for the Markov fast-path bound.
  const std::vector<float>& w2_row_norms() const { return w2_norms_; }
  float w2_max_row_norm() const { return w2_max_norm_; }
  // Target id of draft index j.
  int32_t to_target(int64_t j) const { return w_.d2t.empty() ? (int32_t)j : w_.d2t[(size_t)j]; }

  void init_scratch(DSparkScratch& s, ThreadPool* pool, int64_t ctx_reserve) const;

  // Projects n_rows tap rows (taps.taps[i] = [n_rows, H_target] for target_layer_ids[i]) at
  // positions ctx.len.. and appends their K/V to every layer (§3.2).
  Status append_context(DSparkContext& ctx, DSparkScratch& s, const model::TapRows& taps) const;

  // Block forward (§3.3) for inputs [γ] at positions ctx.len..: [anchor, MASK x (γ-1)], or with
  // lookup input (E6) [anchor, lookup guesses / MASK]. Writes the post-final-norm rows h_out [γ, H].
  void backbone(const DSparkContext& ctx, DSparkScratch& s, const int32_t* inputs, float* h_out) const;

  // U = softcap(h · lm_headᵀ) for n_rows rows: [n_rows, V_d].
  void base_logits(DSparkScratch& s, const float* h, int64_t n_rows, float* u_out) const;

  // Embedding row (scaled) of target id `id`: out [H].
  void embed_row(int32_t id, float* out) const;

 private:
  DSparkModel() = default;
  Status bind(const TargetShape& target, const TargetTables* tables);
  void rope_tables(DSparkScratch& s, int64_t pos0, int64_t n) const;
  void apply_rope(float* x, int64_t n_heads, const double* cs, const double* sn) const;
  void attention(const DSparkContext& ctx, DSparkScratch& s, int64_t layer) const;

  std::string dir_;
  DSparkConfig cfg_;
  std::unique_ptr<formats::SafetensorsModel> st_;
  quant::QuantConfig quant_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // copies of unaligned tensors
  DSparkWeights w_;
  std::vector<double> inv_freq_;  // [hd/2]; 0 beyond n_rot
  float embed_scale_ = 1.0f;
  kernels::Isa isa_ = kernels::Isa::kScalar;
  std::vector<float> w2_norms_;
  float w2_max_norm_ = 0.0f;
};

// RMSNorm over n values in f32 with a double sum: y = x / sqrt(mean(x^2) + eps) * w (w may be null).
void dspark_rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

}  // namespace dspark::net
