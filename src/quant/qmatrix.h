// A quantized weight matrix W [n_rows, n_cols] (affine or turbo) over caller-owned buffers, and
// the products the drafter needs. The scalar references (ref/qmatmul_ref.cpp) are the oracle;
// cpu/ holds the scalar, AVX2 and AVX-512 kernels picked at run time (qmatmul.cpp).
//
// Numerics: y[t, r] = Σ_groups scale · Σ_j code_val_j · x_j (+ bias · Σ_j x_j for affine), f32
// accumulation; turbo first rotates x (x' = R x, hadamard.h). Each (row, token) result is computed
// by the same operations whatever n_tokens, the row range or the thread split (batch-invariant per
// ISA), so a product over gathered rows (matmul_rows) equals the full product's rows bitwise.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "quant/hadamard.h"
#include "quant/quant_types.h"

namespace dspark::quant {

// Turbo side data shared by the matrices that use it.
struct TurboTables {
  std::vector<float> levels;  // [2^bits] ascending codebook (Lloyd-Max for N(0, 1))
  Rotation rot;               // input-dim rotation, n_cols = the matrix's n_cols
};

struct QuantMatrix {
  QuantSpec spec;
  int64_t n_rows = 0, n_cols = 0;
  const uint8_t* codes = nullptr;    // [n_rows, n_cols * bits / 8] packed bytes (the U32 tensor)
  const uint16_t* scales = nullptr;  // [n_rows, n_cols / g] bf16, 2-byte aligned
  const uint16_t* biases = nullptr;  // affine: [n_rows, n_cols / g] bf16; turbo: nullptr
  std::shared_ptr<const TurboTables> turbo;  // turbo only

  int64_t row_bytes() const { return code_row_bytes(n_cols, spec.bits); }
  int64_t n_groups() const { return n_cols / spec.group_size; }
  size_t storage_bytes() const;  // codes + scales (+ biases)
};

// y[t, r] = dot(Ŵ[r, :], x[t, :]) for t < n_tokens, r < n_rows.
// x: [n_tokens, n_cols] f32; y: [n_tokens, ldy] f32 (first n_rows written). Uses ctx.isa,
// ctx.pool and ctx.act_scratch (rotated activations, group sums).
void matmul(kernels::MatmulContext& ctx, const QuantMatrix& w, const float* x, int64_t n_tokens, float* y,
            int64_t ldy);

// One token, selected rows: y[i] = dot(Ŵ[rows[i], :], x) for i < n_sel; bitwise equal to
// matmul's y[rows[i]]. x: [n_cols] f32, y: [n_sel] f32.
void matmul_rows(kernels::MatmulContext& ctx, const QuantMatrix& w, const int64_t* rows, int64_t n_sel,
                 const float* x, float* y);

// Row r in the original basis: affine ŵ; turbo Rᵀ ŵ' (the gather of an embedding-like table).
// out: [n_cols] f32.
void dequantize_row(const QuantMatrix& w, int64_t r, float* out, kernels::Isa isa = kernels::Isa::kAvx512);

// ---- scalar references (the oracle; never optimized) ------------------------------------------

// Row r as stored: affine ŵ; turbo the rotated-basis ŵ' = scale · level[code]. out [n_cols] f32.
void dequantize_row_stored_ref(const QuantMatrix& w, int64_t r, float* out);
// Dequantize every row, rotate x with rotate_ref (turbo), dot in double.
void matmul_ref(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace dspark::quant
