// A dense DSpark checkpoint written by `dspark train-drafter` (or any checkpoint of the same
// shape family: one KV head, vanilla Markov head, E1/E3 tables from the target, d2t) read back
// into trainable parameters, so the training forward (DraftNet) can run it, e.g. for the
// quantization sensitivity table. Errors name the file and tensor.
#pragma once

#include <string>

#include "core/status.h"
#include "model/config.h"
#include "train/draft_params.h"

namespace dspark::train {

// dir/config.json + dir/model.safetensors (bf16 / f16 / f32 weights, d2t I32 or I64) for target `tc`.
Result<DraftParams> load_checkpoint_params(const std::string& dir, const model::ModelConfig& tc);

}  // namespace dspark::train
