// The CUDA matmul: activation rows quantized as the CPU quantizes them, then one warp per (weight row,
// token) forms the blocks' exact integer sums in parallel and runs the canonical f32 chain over the
// blocks in order (qblock.h), so y is the CPU's, bit for bit. A first, plain version: every lane runs
// the chain (the block scales are broadcast reads), weights are read once per token (from L2 after the
// first), and packed blocks are read as they lie in the GGUF.
#include <algorithm>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/qblock.h"

namespace dspark::kernels::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;
constexpr int64_t kMaxGridY = 65535;

// ---- activations ----

__global__ void quantize32_kernel(const float* x, int64_t n, int64_t n_cols, uint8_t* act, size_t act_stride) {
  const int64_t nb = n_cols / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * nb) return;
  const int64_t t = i / nb, b = i % nb;
  uint8_t* row = act + t * act_stride;
  auto* q = reinterpret_cast<int8_t*>(row);
  auto* d = reinterpret_cast<float*>(row + n_cols);
  quantize_block32(x + t * n_cols + 32 * b, q + 32 * b, d + b, d + nb + b);
}

__global__ void quantize_q8_K_kernel(const float* x, int64_t n, int64_t n_cols, uint8_t* act, size_t act_stride) {
  const int64_t nb = n_cols / 256, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * nb) return;
  const int64_t t = i / nb, b = i % nb;
  quantize_block_q8_K(x + t * n_cols + 256 * b, reinterpret_cast<BlockQ8_K*>(act + t * act_stride) + b);
}

// ---- products ----

// Legacy 32-blocks: lane l forms block c + l's integer sum; the chain then takes them in order.
template <class B>
__global__ void mm_block32(const uint8_t* W, size_t row_stride, int64_t n_rows, int64_t n_cols, const uint8_t* act,
                           size_t act_stride, int64_t t0, float* y, int64_t ldy) {
  const int lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, t = t0 + blockIdx.y;
  if (r >= n_rows) return;  // the whole warp: r is the warp's
  const B* w = reinterpret_cast<const B*>(W + r * row_stride);
  const uint8_t* a = act + t * act_stride;
  const auto* q = reinterpret_cast<const int8_t*>(a);
  const auto* d = reinterpret_cast<const float*>(a + n_cols);
  const int64_t nb = n_cols / 32;
  const float* s = d + nb;
  float acc = 0.f;
  for (int64_t c = 0; c < nb; c += 32) {
    const int64_t b = c + lane;
    const int isum = b < nb ? block_isum(w[b], q + 32 * b) : 0;
    const int m = (int)(nb - c < 32 ? nb - c : 32);
    for (int k = 0; k < m; ++k) {
      const int v = __shfl_sync(kFull, isum, k);
      acc = step32(acc, w[c + k], v, d[c + k], s[c + k]);
    }
  }
  if (lane == 0) y[t * ldy + r] = acc;
}

// A super-block's sub-block sums and chain step, one interface for the K-quants: Q4_K / Q5_K have 8
// sub-blocks of 32 (I and M), Q6_K 16 of 16 (I alone).
template <class B>
__device__ __forceinline__ void sub_sums(const B& w, const BlockQ8_K& a, int j, int32_t* I, int32_t* M) {
  k45_sub(w, a, j, I, M);
}
__device__ __forceinline__ void sub_sums(const BlockQ6_K& w, const BlockQ8_K& a, int k, int32_t* I, int32_t* M) {
  *I = q6_K_sub(w, a, k);
  *M = 0;
}
template <class B>
__device__ __forceinline__ float step_sb(float acc, const B& w, const BlockQ8_K& a, int32_t I, int32_t M) {
  return step_k45(acc, w, a, I, M);
}
__device__ __forceinline__ float step_sb(float acc, const BlockQ6_K& w, const BlockQ8_K& a, int32_t I, int32_t) {
  return step_q6_K(acc, w, a, I);
}

// K-quants: kSubs lanes per super-block (one sub-block each), 32 / kSubs super-blocks per pass; the
// sub-block sums add up within each lane group, then the chain takes the super-blocks in order.
template <class B, int kSubs>
__global__ void mm_superblock(const uint8_t* W, size_t row_stride, int64_t n_rows, int64_t n_cols, const uint8_t* act,
                              size_t act_stride, int64_t t0, float* y, int64_t ldy) {
  constexpr int kPerPass = 32 / kSubs;
  const int lane = threadIdx.x & 31, g = lane / kSubs, j = lane % kSubs;
  const int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, t = t0 + blockIdx.y;
  if (r >= n_rows) return;  // the whole warp: r is the warp's
  const B* w = reinterpret_cast<const B*>(W + r * row_stride);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
  const int64_t nsb = n_cols / 256;
  float acc = 0.f;
  for (int64_t c = 0; c < nsb; c += kPerPass) {
    int32_t I = 0, M = 0;
    if (c + g < nsb) sub_sums(w[c + g], a[c + g], j, &I, &M);
    for (int o = kSubs / 2; o; o >>= 1) {  // integer sums: exact in any order
      I += __shfl_xor_sync(kFull, I, o);
      M += __shfl_xor_sync(kFull, M, o);
    }
    const int m = (int)(nsb - c < kPerPass ? nsb - c : kPerPass);
    for (int k = 0; k < m; ++k) {
      const int32_t Ik = __shfl_sync(kFull, I, kSubs * k), Mk = __shfl_sync(kFull, M, kSubs * k);
      acc = step_sb(acc, w[c + k], a[c + k], Ik, Mk);
    }
  }
  if (lane == 0) y[t * ldy + r] = acc;
}

// F32 / F16 / BF16: one thread per (row, token) runs the 8-lane chain of qblock.h dot_float.
__global__ void mm_float(DType type, const uint8_t* W, size_t row_stride, int64_t n_rows, int64_t n_cols,
                         const float* x, int64_t t0, float* y, int64_t ldy) {
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = t0 + blockIdx.y;
  if (r >= n_rows) return;
  y[t * ldy + r] = dot_float(type, n_cols, W + r * row_stride, x + t * n_cols);
}

int blocks_for(int64_t items, int per_block) { return (int)((items + per_block - 1) / per_block); }

}  // namespace

void quantize_rows(cudaStream_t s, DType t, const float* x, int64_t n, int64_t n_cols, uint8_t* act,
                   size_t act_stride) {
  if (n <= 0 || n_cols <= 0) return;  // a grid of no blocks is an invalid launch
  if (act_row(t) == ActRow::kBlock32) {
    const int64_t items = n * (n_cols / 32);
    quantize32_kernel<<<blocks_for(items, 128), 128, 0, s>>>(x, n, n_cols, act, act_stride);
  } else {
    const int64_t items = n * (n_cols / 256);
    quantize_q8_K_kernel<<<blocks_for(items, 64), 64, 0, s>>>(x, n, n_cols, act, act_stride);
  }
  check(cudaGetLastError(), "quantize_rows");
}

void matmul(cudaStream_t s, DType t, const uint8_t* w, size_t row_stride, int64_t n_rows, int64_t n_cols,
            const uint8_t* act, size_t act_stride, int64_t n, float* y, int64_t ldy) {
  if (n_rows <= 0) return;
  for (int64_t t0 = 0; t0 < n; t0 += kMaxGridY) {
    const unsigned ny = (unsigned)std::min(kMaxGridY, n - t0);
    const dim3 warps(blocks_for(n_rows, kWarpsPerBlock), ny), floats(blocks_for(n_rows, 128), ny);
    const int threads = 32 * kWarpsPerBlock;
    switch (t) {
      case DType::Q8_0: mm_block32<BlockQ8_0><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q4_0: mm_block32<BlockQ4_0><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q5_0: mm_block32<BlockQ5_0><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q4_1: mm_block32<BlockQ4_1><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q5_1: mm_block32<BlockQ5_1><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q4_K: mm_superblock<BlockQ4_K, 8><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q5_K: mm_superblock<BlockQ5_K, 8><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      case DType::Q6_K: mm_superblock<BlockQ6_K, 16><<<warps, threads, 0, s>>>(w, row_stride, n_rows, n_cols, act, act_stride, t0, y, ldy); break;
      default:
        mm_float<<<floats, 128, 0, s>>>(t, w, row_stride, n_rows, n_cols, reinterpret_cast<const float*>(act), t0, y, ldy);
        break;
    }
    check(cudaGetLastError(), "matmul");
  }
}

}  // namespace dspark::kernels::cuda
