// Device kernels of the CUDA backend (cuda_ops.cu, cuda_matmul.cu), launched on the backend's stream.
// Every pointer is device memory unless named host_*. Included only by the backend's .cu files.
//
// Numerics: the matmul is the CPU's canonical accumulation (qblock.h), so it gives the CPU's bits;
// so do RMS norm (16 f32 lane sums combined in double, as kernels/ops.cpp), RoPE by the host-computed
// angles, scale / add, the GELU table, f32 -> f16 stores and argmax. SiLU uses the device's expf and
// attention sums its dot products in its own order, so those two match the CPU within rounding
// (tests/unit/kernels/test_cuda_backend.cpp states the tolerances).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace dspark::kernels::cuda {

// "cuda <what>: <the runtime's message>" when e is an error, else "".
std::string error_text(cudaError_t e, const char* what);
// Throws std::runtime_error(error_text(e, what)) when e is an error: a device fault inside an op has
// no Status to return, and the verbs report exceptions as one line (tools/dspark.cpp).
void check(cudaError_t e, const char* what);

// act [n, act_stride] <- each row of x [n, n_cols] f32 quantized for weight type t (qblock.h
// quantize_row); t's activation rows must not be kF32 (those use x as it is).
void quantize_rows(cudaStream_t s, DType t, const float* x, int64_t n, int64_t n_cols, uint8_t* act, size_t act_stride);

// y [n, ldy] <- dot of each weight row w [n_rows, row_stride bytes] with each activation row (act
// [n, act_stride] from quantize_rows, or x [n, n_cols] f32 for F32 / F16 / BF16 weights).
void matmul(cudaStream_t s, DType t, const uint8_t* w, size_t row_stride, int64_t n_rows, int64_t n_cols,
            const uint8_t* act, size_t act_stride, int64_t n, float* y, int64_t ldy);

// x [n, n_cols] <- rows ids[0..n) (device int32) of `table` (device, rows row_stride bytes apart),
// dequantized as the CPU does (qblock.h dequant_at), times scale when it is not 1.
void embed_rows(cudaStream_t s, DType t, const uint8_t* table, size_t row_stride, const int32_t* ids, int64_t n,
                int64_t n_cols, float scale, float* x);

void rms_norm_rows(cudaStream_t s, const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps);
// Row t of x (at x + t * x_stride, [n_heads, head_dim]) rotated by cs + t * cs_stride ([head_dim]: cos
// of the half, then sin): NEOX pairs (i, i + hd/2) or normal pairs (2i, 2i + 1). One launch.
void rope_rows(cudaStream_t s, bool neox, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
               const float* cs, int64_t cs_stride);
void scale(cudaStream_t s, float* x, int64_t n, float v);
void add_inplace(cudaStream_t s, float* y, const float* x, int64_t n);
void silu_mul(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n);
// table: the GeluTable's 65536 f32 entries (kernels/ops.h) in device memory.
void gelu_table_mul(cudaStream_t s, const float* table, const float* gate, const float* up, float* out, int64_t n);
// Row t of y (at y + t * y_stride) <- f16 of row t of x (at x + t * x_stride), n values each. One launch.
void f32_to_f16_rows(cudaStream_t s, const float* x, int64_t x_stride, uint16_t* y, int64_t y_stride, int64_t n_rows,
                     int64_t n);

// One query row's attention over one K/V head (kernels/attention.h KvView rules; extra: device copy
// of the tree's extra cache positions [n_extra] or nullptr). q [n_q, head_dim] f32 already scaled,
// scores: scratch [n_q, n_main + n_extra], out [n_q, head_dim].
struct DeviceKv {
  const uint16_t* k;
  const uint16_t* v;
  int64_t capacity, stride;
  const int64_t* extra;
  int64_t n_extra;
};
void attention(cudaStream_t s, const float* q, int n_q, int64_t head_dim, const DeviceKv& kv, int64_t first_pos,
               int64_t n_main, float* scores, float* out);
// Several rows of one sequence against one K/V head in one launch (kernels/attention.h AttnRows): row r's
// n_q heads at q + r * q_stride, its output at out + r * out_stride, its keys n_keys[r] positions from
// first_pos[r] (device arrays [n_rows]); scores: scratch [n_rows, n_q, max_keys].
void attention_rows(cudaStream_t s, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                    const int64_t* first_pos, const int64_t* n_keys, int n_rows, int n_q, int64_t head_dim,
                    const DeviceKv& kv, float* scores, int64_t max_keys);

// *out (device int64) <- the first index of the largest value of x [n].
void argmax(cudaStream_t s, const float* x, int64_t n, int64_t* out);

}  // namespace dspark::kernels::cuda
