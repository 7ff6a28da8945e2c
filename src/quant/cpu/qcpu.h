// Internal interface between the quantized-matmul driver (qmatmul.cpp) and the per-ISA kernels.
//
// Canonical per-(row r, token t) operation order, shared by every ISA file (L = vector lanes:
// 1 scalar, 8 AVX2, 16 AVX-512; chunks of L consecutive elements of a group):
//   acc = 0 (L lanes); bacc = 0
//   for each group: p = 0 (L lanes); for each chunk c: p = fma(v_c, x_c, p)
//                   acc = fma(p, scale, acc);  affine: bacc = fma(bias, xsum[group], bacc)
//   y = hsum(acc) + bacc
// v_c = f32(code) (affine) or level[code] (turbo); x is already rotated for turbo.
#pragma once

#include <cstdint>

#include "quant/qmatrix.h"

namespace dspark::quant::cpu {

// Reads past the end of a row's codes by up to this many bytes (rows near the end of the codes
// buffer are copied into a padded buffer by the caller).
inline constexpr int64_t kCodeOverread = 16;

struct QGemmArgs {
  const QuantMatrix* w = nullptr;
  const float* x = nullptr;      // [n_tok, n_cols] f32 (turbo: rotated)
  const float* xsum = nullptr;   // affine: [n_tok, n_groups] f32 group sums of x
  int64_t n_tok = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  const int64_t* rows = nullptr; // nullptr: row i -> y[t * ldy + i]; else row rows[i] -> y[t * ldy + i]
};

// Computes outputs i in [i0, i1) (rows i, or rows[i]) for every token.
using QGemmFn = void (*)(const QGemmArgs& a, int64_t i0, int64_t i1);

QGemmFn qgemm_scalar(Method m);
QGemmFn qgemm_avx2(Method m);
QGemmFn qgemm_avx512(Method m);

// Codes of row r, readable kCodeOverread bytes past the row (the last rows of the buffer are
// copied into a thread-local padded buffer, valid until this thread's next call).
const uint8_t* row_codes(const QuantMatrix& w, int64_t r);

// Unnormalized FWHT stages of one block (bitwise equal to fwht_ref).
void fwht_block_avx2(float* x, int64_t n);    // n >= 8
void fwht_block_avx512(float* x, int64_t n);  // n >= 16

}  // namespace dspark::quant::cpu
