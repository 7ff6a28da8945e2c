// Scalar references for quantized matrices: the oracle of every kernel in cpu/.
#include <vector>

#include "core/f16.h"
#include "quant/pack.h"
#include "quant/qmatrix.h"

namespace dspark::quant {

void dequantize_row_stored_ref(const QuantMatrix& w, int64_t r, float* out) {
  const int64_t n = w.n_cols, g = w.spec.group_size, ng = w.n_groups();
  std::vector<uint8_t> codes((size_t)n);
  unpack_codes(w.codes + r * w.row_bytes(), n, w.spec.bits, codes.data());
  for (int64_t j = 0; j < n; ++j) {
    const float s = bf16_to_fp32(w.scales[r * ng + j / g]);
    if (w.spec.method == Method::kTurbo) out[j] = s * w.turbo->levels[codes[(size_t)j]];
    else out[j] = s * (float)codes[(size_t)j] + bf16_to_fp32(w.biases[r * ng + j / g]);
  }
}

void matmul_ref(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t n = w.n_cols;
  std::vector<float> xr(x, x + n_tokens * n), row((size_t)n);
  if (w.spec.method == Method::kTurbo)
    for (int64_t t = 0; t < n_tokens; ++t) rotate_ref(w.turbo->rot, xr.data() + t * n);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    dequantize_row_stored_ref(w, r, row.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += (double)row[(size_t)j] * xr[(size_t)(t * n + j)];
      y[t * ldy + r] = (float)acc;
    }
  }
}

}  // namespace dspark::quant
