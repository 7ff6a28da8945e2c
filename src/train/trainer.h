// The drafter training loop: AdamW (warmup + cosine decay, global-norm clipping) over anchor
// batches from regen shards, checkpoints (training state + an exported DeepSpec checkpoint) every N
// steps, held-out acceptance with the serving drafter at each checkpoint, a JSONL log.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "train/dataset.h"
#include "train/draft_net.h"
#include "train/draft_params.h"
#include "train/heldout_result.h"

namespace dspark::train {

// The default initial logit scale relative to the target's own final-norm scale: the final norm starts
// at this fraction of the target's output_norm, so the first draft logits are flatter than the
// target's and the scale is learned from there. Measured on Gemma 3 270M (output_norm RMS 54.1,
// where an absolute 8 trained best and 54 started over-confident with CE 63); an absolute 8 on
// SmolLM2 (RMS 1.83) started at CE 270 (issue #13).
inline constexpr double kLogitScaleInitFraction = 0.148;

struct TrainerOptions {
  std::string out_dir;               // state.safetensors, drafter/, train_log.jsonl
  DraftArch arch;
  // Setup (issue #11). Defaults are the fixed setup; --setup legacy restores the original one.
  bool tap_norm = true;              // per-dimension tap RMS normalisation (folded into fc at export)
  bool qk_init = true;               // q/k norm weights head_dim^-1/4: attention logits start ~unit scale
  std::string norm_init = "target";  // final norm init: "unit" (ones) or "target" (the target's output_norm / its RMS)
  // Initial logit scale exp(t); 0 = kLogitScaleInitFraction x the RMS of the target's output_norm.
  double logit_scale_init = 0;
  double logit_scale_lr_mult = 20.0; // learning-rate multiplier of t
  int64_t tap_stat_seqs = 256;       // training sequences sampled for the tap statistics
  int64_t draft_vocab = 16384;
  int64_t steps = 1000;
  int64_t batch_seqs = 8;
  int64_t anchors = 16;              // per sequence
  float copyable_weight = 1.0f;      // BlockInputs::copyable_weight (training batches only)
  LossWeights loss_weights;          // CE / L1 / BCE mix of the objective (draft_net.h)
  double lr = 6e-4, warmup = 0.04, min_lr_frac = 0.1, weight_decay = 0.0, clip = 1.0;
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  uint64_t seed = 1;
  int64_t log_every = 10, ckpt_every = 200;
  int64_t eval_seqs = 24;            // held-out greedy sequences per evaluation (0 = none)
  // The held-out evaluation of an exported checkpoint directory (eval/heldout_eval.h: the serving
  // drafter replaying T = 0 speculative decoding); unset = none. Its confidence logits also fit STS.
  std::function<Result<HeldoutResult>(const std::string& drafter_dir)> heldout;
  bool resume = false;
  std::string command;               // recorded in the log and the export
};

struct TrainSummary {
  int64_t steps_done = 0;
  double seconds = 0;
  double last_loss = 0;
  std::string drafter_dir;
  nlohmann::json last_eval;          // held-out result of the final checkpoint
};

// Trains against `target` (its token table is the frozen embedding / LM head). on_log receives each
// log record (for the progress display).
Result<TrainSummary> train_drafter(const TrainerOptions& opt, const model::Model& target, const Dataset& ds,
                                   ThreadPool* pool, const std::function<void(const nlohmann::json&)>& on_log);

// The held-out evaluation record (acceptance by position, tau, ms per round) as JSON.
nlohmann::json heldout_json(const HeldoutResult& r);

}  // namespace dspark::train
