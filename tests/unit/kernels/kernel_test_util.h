// Helpers for kernel tests: random data, quantized matrices, tolerance scales.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels::test {

inline float gauss(Rng& rng) {  // Box-Muller
  const double u1 = rng.uniform() + 1e-12, u2 = rng.uniform();
  return (float)(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

enum class Pattern { kRandom, kZeroBlocks, kAllEqual, kLarge };

// n gaussian values shaped by `p`: kZeroBlocks zeroes every other 32-block, kAllEqual makes each
// 32-block constant, kLarge scales by 1000 (stays far from f16 overflow after quantization).
inline std::vector<float> make_values(Rng& rng, int64_t n, Pattern p) {
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = gauss(rng);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t blk = i / 32;
    if (p == Pattern::kZeroBlocks && blk % 2 == 0) v[(size_t)i] = 0.f;
    if (p == Pattern::kAllEqual) v[(size_t)i] = 0.5f + 0.1f * (float)(blk % 5);
    if (p == Pattern::kLarge) v[(size_t)i] *= 1000.f;
  }
  return v;
}

struct TestMatrix {
  std::vector<uint8_t> bytes;
  QMatrix m;
};

inline TestMatrix make_matrix(Rng& rng, DType type, int64_t rows, int64_t cols, Pattern p) {
  TestMatrix t;
  const size_t rb = row_bytes(type, cols);
  t.bytes.resize(rb * (size_t)rows);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> v = make_values(rng, cols, p);
    quantize_row_ref(type, v.data(), t.bytes.data() + rb * (size_t)r, cols);
  }
  t.m.type = type;
  t.m.n_rows = rows;
  t.m.n_cols = cols;
  t.m.data = t.bytes.data();
  t.m.row_stride = rb;
  return t;
}

// scale[t * ldy + r] = sum_i |W[r, i]| * |x[t, i]| (dequantized weights): the natural size of a
// dot product's rounding error.
inline std::vector<float> abs_scale(const QMatrix& w, const std::vector<float>& x, int64_t n_tokens) {
  std::vector<float> row((size_t)w.n_cols), out((size_t)(n_tokens * w.n_rows));
  for (int64_t r = 0; r < w.n_rows; ++r) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, row.data(), w.n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.n_cols; ++c) s += std::fabs((double)row[(size_t)c] * x[(size_t)(t * w.n_cols + c)]);
      out[(size_t)(t * w.n_rows + r)] = (float)s;
    }
  }
  return out;
}

inline std::vector<Isa> available_isas() {
  std::vector<Isa> v{Isa::kScalar};
  if (detect_isa() >= Isa::kAvx2) v.push_back(Isa::kAvx2);
  if (detect_isa() >= Isa::kAvx512) v.push_back(Isa::kAvx512);
  return v;
}

inline const std::vector<DType>& all_weight_types() {
  static const std::vector<DType> v{DType::Q8_0, DType::Q5_0, DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q4_1,
                                    DType::Q5_1, DType::Q5_K, DType::F16,  DType::BF16, DType::F32};
  return v;
}

}  // namespace dspark::kernels::test
