// DraftMatrix: one weight matrix of the drafter, either a kernels::QMatrix (F32 / F16 / BF16 from
// the checkpoint, or the target's own quantized rows) or a QuantMatrix (affine / turbo), behind
// one product entry point, so model code is the same for every storage. A new storage backend is
// a new QuantMatrix method plus kernels, not an edit of the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "quant/qmatrix.h"

namespace dspark::quant {

class DraftMatrix {
 public:
  DraftMatrix() = default;
  static DraftMatrix dense(const kernels::QMatrix& m);
  static DraftMatrix quantized(QuantMatrix m);
  // A copy for the integer matmul kernels: every row (dequantized to f32 in the original basis)
  // rounded to Q8_0 blocks (bits 8) or Q4_1 blocks (bits 4: 32 weights with an f16 scale and
  // minimum, half the bytes; a 4-bit affine source with groups of a multiple of 32 keeps its own
  // codes, scales and biases, exactly), with the row-interleaved copy (kernels/packed.h) where
  // `isa` has a packed kernel for it. Storage goes to `owned`. Returns `src` unchanged when it is already an
  // integer-kernel type (Q8_0, Q4_x, K-quants) or its width is not a multiple of 32.
  // Products change by the rounding of weights to those blocks and of activations to 8 bits
  // (drafter-side only).
  static DraftMatrix integer_copy(const DraftMatrix& src, int bits, kernels::Isa isa,
                                  std::vector<std::unique_ptr<uint8_t[]>>* owned);

  bool empty() const { return !quantized_ && !dense_.data; }
  bool is_quantized() const { return quantized_; }
  int64_t n_rows() const { return quantized_ ? quant_.n_rows : dense_.n_rows; }
  int64_t n_cols() const { return quantized_ ? quant_.n_cols : dense_.n_cols; }
  const kernels::QMatrix& dense_matrix() const { return dense_; }  // valid when !is_quantized()
  const QuantMatrix& quant_matrix() const { return quant_; }       // valid when is_quantized()
  QuantSpec spec() const { return quantized_ ? quant_.spec : QuantSpec{}; }

  // y[t, r] = dot(W[r, :], x[t, :]); x [n_tokens, n_cols] f32, y [n_tokens, ldy] f32.
  void matmul(kernels::MatmulContext& ctx, const float* x, int64_t n_tokens, float* y, int64_t ldy) const;
  // One token, selected rows: y[i] = dot(W[rows[i], :], x), bitwise equal to matmul's y[rows[i]].
  // `gather` is caller scratch (dense rows are copied into it). x [n_cols], y [n_sel] f32.
  void matmul_rows(kernels::MatmulContext& ctx, const int64_t* rows, int64_t n_sel, const float* x, float* y,
                   std::vector<uint8_t>& gather) const;
  // Row r in the original basis (gather tables): out [n_cols] f32.
  void dequantize_row(int64_t r, float* out, kernels::Isa isa) const;  // isa: at most the CPU's

  size_t storage_bytes() const;
  std::string describe() const;  // "BF16", "Q8_0", "affine 4-bit g64", ...

 private:
  bool quantized_ = false;
  kernels::QMatrix dense_;
  QuantMatrix quant_;
};

}  // namespace dspark::quant
