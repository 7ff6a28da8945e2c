// MLX affine group quantization, bit for bit (docs/QUANT-FORMAT.md §1; ml-explore/mlx
// mlx/backend/cpu/quantized.cpp `quantize`). Per group of g values, in f32:
//   n_bins = 2^bits - 1;  s = max((w_max - w_min) / n_bins, 1e-7)
//   |w_min| > |w_max| ? (edge = w_min) : (edge = w_max, s = -s)
//   q0 = rint(edge / s);  q0 != 0 ? (s = edge / q0, b = edge) : (b = 0)
//   code_j = clamp(rint((w_j - b) / s), 0, n_bins);  stored scale = bf16(s), bias = bf16(b)
// rint rounds half to even (the CPU semantics). Dequantization: ŵ_j = scale * code_j + bias in f32
// (scale * code is exact: 8 + 8 significant bits), so every kernel agrees on ŵ.
// Proof: tests/unit/quant/test_affine.cpp against tests/goldens/quant/affine_golden.safetensors,
// written by scripts/gen_quant_goldens.py (NumPy float32 transcription of the formula above).
#pragma once

#include <cstdint>

namespace dspark::quant {

// w [n] f32 (n % g == 0) -> packed codes [n * bits / 8] bytes, scales / biases [n / g] bf16 bits.
void affine_quantize_row(const float* w, int64_t n, int bits, int g, uint8_t* packed, uint16_t* scales,
                         uint16_t* biases);

// The inverse: out [n] f32, ŵ_j = bf16(scale) * code_j + bf16(bias).
void affine_dequantize_row(const uint8_t* packed, const uint16_t* scales, const uint16_t* biases, int64_t n,
                           int bits, int g, float* out);

}  // namespace dspark::quant
