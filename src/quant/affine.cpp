#include "quant/affine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/f16.h"
#include "quant/pack.h"

namespace dspark::quant {

void affine_quantize_row(const float* w, int64_t n, int bits, int g, uint8_t* packed, uint16_t* scales,
                         uint16_t* biases) {
  const float n_bins = (float)((1 << bits) - 1);
  const float eps = 1e-7f;
  std::vector<uint8_t> codes((size_t)n);
  for (int64_t gi = 0; gi < n / g; ++gi) {
    const float* wg = w + gi * g;
    float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
    for (int j = 0; j < g; ++j) {
      w_max = std::max(w_max, wg[j]);
      w_min = std::min(w_min, wg[j]);
    }
    const bool mask = std::fabs(w_min) > std::fabs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::rint(edge / scale);
    float bias = 0;
    if (q0 != 0) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < g; ++j) {
      float c = std::rint((wg[j] - bias) / scale);
      c = std::min(std::max(c, 0.0f), n_bins);
      codes[(size_t)(gi * g + j)] = (uint8_t)c;
    }
    scales[gi] = fp32_to_bf16(scale);
    biases[gi] = fp32_to_bf16(bias);
  }
  pack_codes(codes.data(), n, bits, packed);
}

void affine_dequantize_row(const uint8_t* packed, const uint16_t* scales, const uint16_t* biases, int64_t n,
                           int bits, int g, float* out) {
  std::vector<uint8_t> codes((size_t)n);
  unpack_codes(packed, n, bits, codes.data());
  for (int64_t j = 0; j < n; ++j) {
    const float s = bf16_to_fp32(scales[j / g]), b = bf16_to_fp32(biases[j / g]);
    out[j] = s * (float)codes[(size_t)j] + b;
  }
}

}  // namespace dspark::quant
