// Simulated quantization: a matrix's quantize -> dequantize round trip in the deployment format
// (what `dspark quantize-drafter` would store, read back in the original basis), for measuring
// sensitivity without writing checkpoints (docs/QUANT-FORMAT.md §7).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "quant/quant_types.h"

namespace dspark::quant {

// w [rows, cols] f32, in place. Turbo: rotation block = spec.rotation_block or the default for
// cols, sign seed = module_rotation_seed(seed, module) (as the converter derives it), so the
// result equals the dequantized rows of the converted checkpoint. Errors: spec/shape mismatch.
Status fake_quantize(const QuantSpec& spec, const std::string& module, uint64_t seed, float* w, int64_t rows,
                     int64_t cols);

}  // namespace dspark::quant
