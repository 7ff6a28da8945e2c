// Quantization sensitivity of a DSpark drafter with the target out of the loop (docs/QUANT-FORMAT.md
// §7): the drafter runs in its teacher-forced block form (DraftNet, the training forward) over
// cached target taps from regen shards; for every quantizable tensor and candidate format only
// that tensor is simulate-quantized (quantize -> dequantize round trip, the deployment format),
// and the change of the draft distributions is measured as
//   KL = Σ_blocks Σ_k w_k Σ_v p_ref(v) (log p_ref(v) − log p_q(v)) / Σ_blocks Σ_k w_k,
// w_k = exp(−k/4) over valid slots k = 0..γ−1 (p = softmax of the Markov-corrected logits). The
// tensor is restored before the next candidate. Also reported per candidate: slot-0 argmax
// agreement with the unquantized drafter (a T = 0 acceptance proxy).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "quant/knapsack.h"
#include "train/draft_net.h"
#include "train/draft_params.h"

namespace dspark::train {

// Simulate-quantizes w [rows, cols] f32 in place for `tensor` with candidate c (method/bits/group).
using FakeQuantFn =
    std::function<Status(const std::string& tensor, const quant::Candidate& c, float* w, int64_t rows, int64_t cols)>;

struct SensitivityUnit {
  std::string name;      // DeepSpec tensor name ("lm_head.weight" = the draft LM head rows)
  int64_t rows = 0, cols = 0;
  std::vector<float>* w = nullptr;  // the live weights the forward reads
};

// Every quantizable matrix of the drafter (docs/QUANT-FORMAT.md §7 units; norms, layer_scalar and the
// confidence head excluded), including the frozen draft LM head rows.
std::vector<SensitivityUnit> sensitivity_units(DraftParams& p, FrozenTables& frozen);

struct SensitivityResult {
  std::vector<quant::TensorSensitivity> table;  // per unit, candidates incl. "none" (bf16, KL 0)
  std::vector<std::vector<double>> top1_agree;  // [unit][candidate] slot-0 argmax agreement
  int64_t blocks = 0, slots = 0;
};

// Runs the reference forward once, then every (unit, candidate). `progress(done, total)` is
// called after each candidate.
Result<SensitivityResult> measure_sensitivity(DraftParams& p, FrozenTables& frozen, const TrainBatch& batch,
                                              const std::vector<quant::Candidate>& candidates, const FakeQuantFn& fq,
                                              const std::function<void(int64_t, int64_t)>& progress);

}  // namespace dspark::train
