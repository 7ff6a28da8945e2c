// TurboQuant for weights (docs/QUANT-FORMAT.md §1, §4): rotate each row's input dim (w' = R w, hadamard.h), then
// per group of g: one bf16 scale s and codes into a Lloyd-Max codebook for N(0, 1) (lloyd_max.h);
// ŵ'_j = s · level[code_j]. Scale: the RMS of the group, then two alternations of (nearest-level
// codes, least-squares scale <w, c> / <c, c>), rounded to bf16, and the codes recomputed with the
// stored scale (the least-squares scale fits slightly better than the RMS). Data-oblivious: no
// calibration. The rotation uses the scalar reference, so a conversion is the same on every CPU.
// Proof: tests/unit/quant/test_turbo.cpp (reconstruction error near the Lloyd-Max distortion on
// Gaussian rows, dequantize_row un-rotates).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/hadamard.h"

namespace dspark::quant {

// Index of the level nearest to v (levels ascending; ties to the lower level).
int nearest_level(const std::vector<float>& levels, float v);

// w [n] f32 in the original basis (n == rot.n_cols, n % g == 0) -> packed codes [n * bits / 8]
// bytes and scales [n / g] bf16 bits.
void turbo_quantize_row(const float* w, const Rotation& rot, const std::vector<float>& levels, int bits, int g,
                        uint8_t* packed, uint16_t* scales);

}  // namespace dspark::quant
