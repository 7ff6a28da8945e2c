// Trainable DSpark drafter (DeepSpec Gemma4DSparkModel, docs/DSPARK-CHECKPOINT.md) in f32 with gradients,
// plus the frozen tables shared with the target (docs/TRAINING.md, 'train-drafter': embedding and LM head are the
// target's and stay frozen). Export writes a checkpoint the serving loader reads
// (net::DSparkModel, extensions E1 embedding from the target, E2 d2t, E3 LM head rows gathered
// from the target, E4 markov_w1 over the draft vocabulary: docs/DSPARK-CHECKPOINT.md §5).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "dspark/dspark_config.h"

namespace dspark::train {

struct Param {
  std::string name;              // DeepSpec tensor name
  std::vector<int64_t> shape;
  std::vector<float> w, g;       // value, gradient (same size)
  std::vector<float> m, v;       // AdamW moments
  bool decay = true;             // weight decay applies (matrices)
  bool exported = true;          // a checkpoint tensor (false: training-only, folded in at export)
  float lr_mult = 1.0f;          // this tensor's learning rate = lr * lr_mult
  int64_t size() const { return (int64_t)w.size(); }
};

struct DraftLayerParams {
  Param wq, wk, wo, q_norm, k_norm, in_norm, post_attn_norm, pre_ffw_norm, post_ffw_norm, w_gate, w_up, w_down,
      layer_scalar;
};

// What the architecture search varies; everything else follows the target.
struct DraftArch {
  std::vector<int> taps;   // target layers tapped (strictly increasing, < n_target_layers - 1)
  int64_t n_layers = 1;
  int64_t markov_rank = 64;
  int64_t block_size = 7;
  int64_t intermediate = 0;  // 0 = the target's
  int lookup_max_ngram = 0;  // > 0: prompt-lookup guesses as block inputs (config extension E6)
  int lookup_min_ngram = 1;
  std::string target_type = "gemma3";  // the target's general.architecture (config.json target_model_type)
};

// Initialisation choices that are not architecture (the defaults are the original DeepSpec-like
// init: unit norms, logit scale 1).
struct DraftInit {
  float qk_norm = 1.0f;               // q_norm / k_norm weights; attention logits scale with qk_norm^2 * head_dim
  float log_logit_scale = 0.0f;       // initial t of log_logit_scale
  float logit_scale_lr_mult = 1.0f;   // its learning-rate multiplier
  std::vector<float> norm;            // [H] initial final-norm weight (empty = ones)
};

struct DraftParams {
  net::DSparkConfig cfg;
  std::string config_json;        // the config.json text cfg was parsed from (exported as is)
  std::vector<int32_t> d2t;       // [V_d] target ids of the draft vocabulary
  std::vector<int32_t> t2d;       // [V] draft index of a target id, -1 outside the draft vocabulary
  Param fc, hidden_norm, norm, markov_w1, markov_w2, conf_w, conf_b;
  // Training-only reparameterisations, folded into the exported checkpoint (so its format stays
  // DeepSpec's and the serving math is unchanged):
  //  - log_logit_scale [1]: t; the final norm acts as norm.weight * exp(t). The target's LM head
  //    expects final hiddens ~50x larger than a unit-weight norm gives (its output_norm RMS is ~54),
  //    and Adam moves one element only ~lr per step, so the scale gets its own log-space parameter.
  //  - tap_scale [m * H]: per-input-column scale of fc (1 / RMS of that tap dimension over the data);
  //    the tapped rows differ ~300x in scale between layers, with outlier dimensions. Export writes
  //    fc.weight[:, j] * tap_scale[j]. Empty = 1.
  Param log_logit_scale;
  std::vector<float> tap_scale;
  std::vector<DraftLayerParams> layers;
  std::vector<Param*> all();      // every trainable tensor (exported ones and log_logit_scale)
  float logit_scale() const { return std::exp(log_logit_scale.w.empty() ? 0.0f : log_logit_scale.w[0]); }
  int64_t w1_row(int32_t target_id) const {  // E4 row: draft index, or V_d for other ids
    const int32_t j = t2d[(size_t)target_id];
    return j < 0 ? (int64_t)d2t.size() : j;
  }
  int64_t n_params();
};

// Frozen tables: the target's token table (gathered + scaled on demand) and the draft LM head
// rows [V_d, H] dequantized to f32 (the serving drafter uses the same rows in the target's
// encoding, so the logits agree to f32 rounding).
struct FrozenTables {
  kernels::QMatrix embed;         // target token_embd [V, H]
  std::vector<float> lm_head;     // [V_d, H]
  float embed_scale = 1.0f;       // bf16(sqrt(H))
  void embed_row(int32_t id, float* out) const;
};

// Builds the config (target shape + arch) and initializes: matrices ~ N(0, 0.02) (DeepSpec's
// initializer_range), norms 1, layer_scalar 1, Markov W2 zero (the head starts as a no-op, issue
// #4), confidence head zero. mask_token_id is the target's <mask> id.
Result<DraftParams> init_draft_params(const DraftArch& arch, int64_t n_target_layers, int64_t H, int64_t n_heads,
                                      int64_t head_dim, int64_t target_intermediate, int64_t n_vocab,
                                      int32_t mask_token_id, std::vector<int32_t> d2t, uint64_t seed,
                                      const DraftInit& init = {});

FrozenTables make_frozen_tables(const kernels::QMatrix& target_embed, const std::vector<int32_t>& d2t, int64_t H);

// Writes DIR/config.json + DIR/model.safetensors (bf16 weights, d2t I32; no embed_tokens/lm_head:
// E1/E3) through a staging folder renamed into place. `extra` is merged into config.json.
Status export_checkpoint(const DraftParams& p, const std::string& dir, const std::string& extra_json);

// Merges `patch_json` into DIR/config.json of an exported checkpoint (temporary file + rename);
// the weights are not rewritten.
Status patch_checkpoint_config(const std::string& dir, const std::string& patch_json);

// Training state (f32 weights + AdamW moments + config) for --resume: one safetensors file.
Status save_train_state(const DraftParams& p, const std::string& path, const std::string& meta_json);
// The meta JSON and draft vocabulary of a saved state (to rebuild the parameters before loading).
Result<std::pair<std::string, std::vector<int32_t>>> read_train_state_header(const std::string& path);
// Loads weights and moments into `p` (shapes must match); returns the stored meta JSON.
Result<std::string> load_train_state(DraftParams& p, const std::string& path);

}  // namespace dspark::train
