// Forward and hand-written backward of the DSpark drafter over a training batch (docs/TRAINING.md, 'train-drafter'):
// per sequence the context rows (taps of every position before the anchors) are projected once
// (fc -> hidden_norm -> per-layer k_proj -> K/V); every anchor's block [x_a, MASK x (γ-1)] at
// positions a..a+γ-1 attends to context rows < a and to its own block (no mask), exactly the
// serving forward (net::DSparkModel::backbone; tests/unit/train checks the two agree). Loss:
// 0.1 CE + 0.9 L1 (full ||p_d - p_t||_1, the paper's "TV") + 1.0 BCE(confidence, c*) by default
// (LossWeights), slot weights exp(-(k-1)/4), with the Markov bias teacher-forced from the true
// previous tokens.
// Gradients are accumulated (+=) into DraftParams::g; every backward has a finite-difference test.
#pragma once

#include <cstdint>
#include <vector>

#include "train/draft_params.h"

namespace dspark::train {

// One sequence's context: tap rows (f32) for positions 0..n_ctx-1, taps concatenated in
// target_layer_ids order: [n_ctx, m * H].
struct TrainSeq {
  std::vector<float> taps;
  int64_t n_ctx = 0;
};

// One anchor block. Slot k (0-based) predicts x_{a+k+1}.
struct TrainBlock {
  int32_t seq = 0;                     // index into TrainBatch::seqs
  int64_t anchor = 0;                  // position a (>= 1, <= seqs[seq].n_ctx)
  std::vector<int32_t> inputs;         // [γ] block input ids (slot 0 = x_a; then MASK or lookup guesses);
                                       // empty = [x_a, MASK x (γ-1)]
  std::vector<int32_t> prev;           // [γ] x_a .. x_{a+γ-1} (teacher-forced Markov input; slot 0 = anchor)
  std::vector<int32_t> label;          // [γ] x_{a+k+1} target id, -1 = slot invalid (past the end)
  std::vector<const int32_t*> dist_ids;   // [γ] target top-k ids at position a+k (predicting the label)
  std::vector<const float*> dist_probs;   // [γ] their probabilities
  std::vector<float> weight;           // [γ] loss-weight multiplier per slot; empty = 1 (BlockInputs::copyable_weight)
};

struct TrainBatch {
  std::vector<TrainSeq> seqs;
  std::vector<TrainBlock> blocks;
  int32_t top_k = 0;
};

// Weights of the three loss terms. The paper's mix (the default) favours the T = 1 acceptance that
// the L1 term measures; greedy (T = 0) acceptance is the argmax agreement that the CE term on the
// target's own greedy tokens pushes more directly.
struct LossWeights {
  double ce = 0.1, l1 = 0.9, bce = 1.0;
};

struct LossTerms {
  double loss = 0, ce = 0, l1 = 0, bce = 0;   // weighted means (as optimized)
  int64_t slots = 0;                           // valid slots
  std::vector<double> accept_sum;              // [γ] Σ c*_k (expected acceptance at T = 1, teacher forced)
  std::vector<double> top1_sum;                // [γ] Σ [argmax p_d == label]
  std::vector<int64_t> count;                  // [γ] valid slots per position
};

class DraftNet {
 public:
  DraftNet(DraftParams& p, const FrozenTables& t, LossWeights lw = {}) : p_(p), t_(t), lw_(lw) {}
  // Forward (and backward when `backward`) over the batch. Gradients are added to p.g.
  LossTerms run(const TrainBatch& b, bool backward);

  // Last forward, for tests: post-final-norm block rows [R, H] and Markov-corrected logits
  // [R, V_d] (R = blocks * γ), and confidence logits [R].
  const std::vector<float>& hidden() const { return hN_; }
  const std::vector<float>& logits() const { return logits_; }
  const std::vector<float>& conf_logits() const { return z_; }
  // Confidence targets c* [R] of the last forward. c* is detached (a constant target) in the
  // objective; finite-difference tests pin it with fix_cstar() so the numeric gradient is of the
  // same function.
  const std::vector<float>& cstar() const { return cstar_; }
  void fix_cstar(const std::vector<float>* c) { fixed_cstar_ = c; }

 private:
  struct CtxAct {
    std::vector<float> pre, ctx, rs;                  // [C, H] fc output, normed, rstd [C]
    std::vector<std::vector<float>> kr, K, V, rs_k;   // per layer [C, hd] raw, roped-normed K, V; rstd [C]
    std::vector<float> dctx;                          // [C, H]
    std::vector<std::vector<float>> dK, dV;           // per layer [C, hd]
  };

  struct LayerAct {
    std::vector<float> h_in, rs_in, x, q_raw, rs_q, Q, kb, rs_kb, Kb, Vb, att, o_raw, rs_o, h1, f, rs_f, g, u, act,
        m_raw, rs_m, h2;
    std::vector<std::vector<float>> P;  // per block [γ nH, a + γ]
  };
  void forward_context(const TrainBatch& b);
  void forward_blocks(const TrainBatch& b);
  LossTerms loss_head(const TrainBatch& b, bool backward);
  void backward_blocks(const TrainBatch& b);
  void backward_context(const TrainBatch& b);
  void rope(float* x, int64_t n_heads, int64_t pos, bool inverse) const;

  DraftParams& p_;
  const FrozenTables& t_;
  LossWeights lw_;
  std::vector<double> inv_freq_;
  // activations
  std::vector<CtxAct> ctx_;          // per sequence
  std::vector<LayerAct> layers_;     // per layer
  std::vector<float> h0_, hlast_, hN_, rs_n_, e_, logits_, z_, cstar_;
  std::vector<float> norm_eff_, dnorm_eff_;  // [H] norm.weight * exp(log_logit_scale), its gradient
  std::vector<float> dh_, dhN_, de_;
  const std::vector<float>* fixed_cstar_ = nullptr;
 public:
  ~DraftNet();
};

}  // namespace dspark::train
