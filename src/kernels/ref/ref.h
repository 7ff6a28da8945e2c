// Scalar reference kernels: the oracle for every optimized kernel. Never optimize these.
// Formats are the exact ggml blocks of quant_blocks.h; formulas are ggml's scalar ones.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace dspark::kernels {

// Dequantize n elements (multiple of the block size) of `type`: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (and Q8_0/Q8_1/Q8_K activation blocks for tests).
void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n);

// Activation quantizers, exactly ggml's *_ref: Q8_0/Q8_1 round half away from zero per 32
// values; Q8_K rounds half to even per 256 values with the signed-max trick (§5.3).
void quantize_row_q8_0_ref(const float* x, void* y, int64_t n);  // [n/32] BlockQ8_0
void quantize_row_q8_1_ref(const float* x, void* y, int64_t n);  // [n/32] BlockQ8_1
void quantize_row_q8_K_ref(const float* x, void* y, int64_t n);  // [n/256] BlockQ8_K

// Weight quantizers (legacy types follow ggml's reference; K-quants use a simple min/max
// quantizer, correct but not ggml's search). F32/F16/BF16 convert.
void quantize_row_q4_0_ref(const float* x, void* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, void* y, int64_t n);
void quantize_row_q5_0_ref(const float* x, void* y, int64_t n);
void quantize_row_q5_1_ref(const float* x, void* y, int64_t n);
void quantize_row_q4_K_ref(const float* x, void* y, int64_t n);
void quantize_row_q5_K_ref(const float* x, void* y, int64_t n);
void quantize_row_q6_K_ref(const float* x, void* y, int64_t n);
// Any supported weight type (and Q8_1/Q8_K).
void quantize_row_ref(DType type, const float* x, void* y, int64_t n);

// The activation format ggml pairs with a weight type (§5.3): Q8_0, Q8_1, Q8_K, F16, BF16, F32.
DType vec_dot_type(DType weight_type);

// dot(w, a) over n elements; `a` is in vec_dot_type(weight_type) format. Integer inner sums.
float vec_dot_ref(DType weight_type, int64_t n, const void* w, const void* a);

// llama.cpp-compatible product: quantize each x row to vec_dot_type, then vec_dot_ref.
// x: [n_tokens, n_cols] f32; y: [n_tokens, ldy] f32.
void matmul_ref(const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy);
// Plain f32 oracle: dequantize each weight row and dot in double precision with f32 x.
void matmul_f32_ref(const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace dspark::kernels
