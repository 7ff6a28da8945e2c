// Device kernels of the CUDA backend other than the matmul (cuda_ops.h): per-row steps, attention over
// the f16 K/V cache, argmax. Plain first versions: one launch per call, no fusion.
#include <cfloat>
#include <stdexcept>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/qblock.h"

namespace dspark::kernels::cuda {

std::string error_text(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return "";
  return std::string("cuda ") + what + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(error_text(e, what));
}

namespace {

int blocks_for(int64_t items, int per_block) { return (int)((items + per_block - 1) / per_block); }

// kernels/ops.cpp rms_norm: lane j of 16 sums x[i + j]^2 over the full 16-chunks in f32, the lanes and
// then the tail add up in double; s = 1 / sqrt(mean + eps) in f32; out = x * s * w. The CPU's lane sums
// are fused multiply-adds: GCC contracts x * x + acc in the AVX2 / AVX-512 clones of sum_squares (every
// CPU class dspark targets runs one of them; checked against the CPU's bits, 2,000 of 2,000 rows, where
// a separate multiply and add matched 1,890), so the lanes here use fmaf too.
__global__ void rms_norm_kernel(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  __shared__ float lanes[16];
  __shared__ float s_scale;
  const int tid = threadIdx.x;
  if (tid < 16) {
    float a = 0.f;
    for (int64_t i = 0; i + 16 <= n; i += 16) a = fmaf(xr[i + tid], xr[i + tid], a);
    lanes[tid] = a;
  }
  __syncthreads();
  if (tid == 0) {
    double s = 0;
    for (int j = 0; j < 16; ++j) s += lanes[j];
    for (int64_t i = n / 16 * 16; i < n; ++i) s += (double)xr[i] * xr[i];
    const double mean = s / (double)n;
    s_scale = 1.0f / sqrtf((float)mean + eps);
  }
  __syncthreads();
  const float sc = s_scale;
  for (int64_t i = tid; i < n; i += blockDim.x) o[i] = xr[i] * sc * w[i];
}

__global__ void rope_kernel(bool neox, float* x, int64_t x_stride, int64_t n_heads, int64_t hd, const float* cs,
                            int64_t cs_stride) {
  const int64_t half = hd / 2, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (i >= n_heads * half) return;
  const int64_t h = i / half, k = i % half;
  float* v = x + t * x_stride + h * hd;
  const float* c_t = cs + t * cs_stride;
  const float c = c_t[k], s = c_t[half + k];
  const int64_t a = neox ? k : 2 * k, b = neox ? k + half : 2 * k + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

__global__ void scale_kernel(float* x, int64_t n, float v) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= v;
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void silu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  const float e = expf(-g < 88.0f ? -g : 88.0f);  // as ops_fastmath.cpp caps it
  out[i] = g / (1.0f + e) * up[i];
}

__global__ void gelu_kernel(const float* table, const float* gate, const float* up, float* out, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = gate[i];
  const float g = x <= -10.0f ? 0.0f : (x >= 10.0f ? x : table[float_half(x)]);
  out[i] = g * up[i];
}

__global__ void f16_kernel(const float* x, int64_t x_stride, uint16_t* y, int64_t y_stride, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (i < n) y[t * y_stride + i] = float_half(x[t * x_stride + i]);
}

__global__ void embed_kernel(DType t, const uint8_t* table, size_t row_stride, const int32_t* ids, int64_t n_cols,
                             float scale, float* x) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (e >= n_cols) return;
  float v = dequant_at(t, table + (size_t)ids[r] * row_stride, e);
  if (scale != 1.0f) v *= scale;
  x[r * n_cols + e] = v;
}

constexpr int kAttnThreads = 128;

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* shared) {  // every thread gets the result
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + o]);
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}


// One query head of one row (a block): q rounded to f16, scores, max, exp and their sum (in double),
// the probabilities rounded to f16 once, then each output column over the keys (kernels/attention.h
// numerics). Positions wrap once at most in a ring layer (the keys a row sees fit its capacity).
__device__ void attend(const float* q, int64_t hd, const DeviceKv& kv, int64_t first_pos, int64_t n_main, float* s,
                       float* out) {
  __shared__ float qh[512];
  __shared__ float red_f[kAttnThreads];
  __shared__ double red_d[kAttnThreads];
  const int tid = threadIdx.x;
  const int64_t nk = n_main + kv.n_extra, f0 = first_pos % kv.capacity;
  for (int64_t i = tid; i < hd; i += blockDim.x) qh[i] = round_half(q[i]);
  __syncthreads();
  auto slot = [&](int64_t j) -> int64_t {
    if (j < n_main) return f0 + j < kv.capacity ? f0 + j : f0 + j - kv.capacity;
    return kv.extra[j - n_main] % kv.capacity;
  };
  float mx = -FLT_MAX;
  for (int64_t j = tid; j < nk; j += blockDim.x) {
    const uint16_t* k = kv.k + slot(j) * kv.stride;
    float acc = 0.f;
    for (int64_t i = 0; i < hd; ++i) acc += qh[i] * half_float(k[i]);
    s[j] = acc;
    mx = fmaxf(mx, acc);
  }
  mx = block_reduce(mx, [](float a, float b) { return fmaxf(a, b); }, red_f);
  double sum = 0;
  for (int64_t j = tid; j < nk; j += blockDim.x) {
    const float e = expf(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, [](double a, double b) { return a + b; }, red_d);
  const float inv = (float)(1.0 / sum);
  for (int64_t j = tid; j < nk; j += blockDim.x) s[j] = round_half(s[j] * inv);
  __syncthreads();
  for (int64_t i = tid; i < hd; i += blockDim.x) {
    float o = 0.f;
    for (int64_t j = 0; j < nk; ++j) o += s[j] * half_float(kv.v[slot(j) * kv.stride + i]);
    out[i] = o;
  }
}

// Blocks: (query head h) for one row.
__global__ void attention_kernel(const float* q, int64_t hd, DeviceKv kv, int64_t first_pos, int64_t n_main,
                                 float* scores, float* out) {
  const int h = blockIdx.x;
  attend(q + h * hd, hd, kv, first_pos, n_main, scores + h * (n_main + kv.n_extra), out + h * hd);
}

// Blocks: (query head h, row r) for rows of one sequence; no extra keys.
__global__ void attention_rows_kernel(const float* q, int64_t q_stride, float* out, int64_t out_stride,
                                      const int64_t* first_pos, const int64_t* n_keys, int64_t hd, DeviceKv kv,
                                      float* scores, int64_t max_keys) {
  const int h = blockIdx.x, r = blockIdx.y;
  attend(q + r * q_stride + h * hd, hd, kv, first_pos[r], n_keys[r],
         scores + ((int64_t)r * gridDim.x + h) * max_keys, out + r * out_stride + h * hd);
}

constexpr int kArgmaxThreads = 1024;

__global__ void argmax_kernel(const float* x, int64_t n, int64_t* out) {
  __shared__ float best_v[kArgmaxThreads];
  __shared__ int64_t best_i[kArgmaxThreads];
  float bv = -FLT_MAX;
  int64_t bi = n;  // none yet
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (bi == n || x[i] > bv) bv = x[i], bi = i;  // a thread's indices rise: the first of equals stays
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) {
      const float v2 = best_v[threadIdx.x + o];
      const int64_t i2 = best_i[threadIdx.x + o];
      const bool take = i2 < n && (best_i[threadIdx.x] == n || v2 > best_v[threadIdx.x] ||
                                   (v2 == best_v[threadIdx.x] && i2 < best_i[threadIdx.x]));
      if (take) best_v[threadIdx.x] = v2, best_i[threadIdx.x] = i2;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = best_i[0] < n ? best_i[0] : 0;
}

}  // namespace

void embed_rows(cudaStream_t s, DType t, const uint8_t* table, size_t row_stride, const int32_t* ids, int64_t n,
                int64_t n_cols, float scale, float* x) {
  if (n_cols <= 0) return;  // a grid of no blocks is an invalid launch: no work, no launch
  for (int64_t r0 = 0; r0 < n; r0 += 65535) {  // grid.y holds 65535 rows at most
    const unsigned rows = (unsigned)(n - r0 < 65535 ? n - r0 : 65535);
    embed_kernel<<<dim3(blocks_for(n_cols, 256), rows), 256, 0, s>>>(t, table, row_stride, ids + r0, n_cols, scale,
                                                                     x + r0 * n_cols);
    check(cudaGetLastError(), "embed_rows");
  }
}

void rms_norm_rows(cudaStream_t s, const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) {
  if (rows <= 0) return;
  rms_norm_kernel<<<(unsigned)rows, 128, 0, s>>>(x, w, out, n, eps);
  check(cudaGetLastError(), "rms_norm");
}

void rope_rows(cudaStream_t s, bool neox, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
               const float* cs, int64_t cs_stride) {
  const int64_t items = n_heads * (head_dim / 2);
  if (items <= 0) return;
  for (int64_t t0 = 0; t0 < n_rows; t0 += 65535) {
    const unsigned rows = (unsigned)(n_rows - t0 < 65535 ? n_rows - t0 : 65535);
    rope_kernel<<<dim3(blocks_for(items, 128), rows), 128, 0, s>>>(neox, x + t0 * x_stride, x_stride, n_heads,
                                                                   head_dim, cs + t0 * cs_stride, cs_stride);
    check(cudaGetLastError(), "rope");
  }
}

void scale(cudaStream_t s, float* x, int64_t n, float v) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, n, v);
  check(cudaGetLastError(), "scale");
}

void add_inplace(cudaStream_t s, float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n, 256), 256, 0, s>>>(y, x, n);
  check(cudaGetLastError(), "add");
}

void silu_mul(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  silu_kernel<<<blocks_for(n, 256), 256, 0, s>>>(gate, up, out, n);
  check(cudaGetLastError(), "silu_mul");
}

void gelu_table_mul(cudaStream_t s, const float* table, const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return;
  gelu_kernel<<<blocks_for(n, 256), 256, 0, s>>>(table, gate, up, out, n);
  check(cudaGetLastError(), "gelu_mul");
}

void f32_to_f16_rows(cudaStream_t s, const float* x, int64_t x_stride, uint16_t* y, int64_t y_stride, int64_t n_rows,
                     int64_t n) {
  if (n <= 0) return;
  for (int64_t t0 = 0; t0 < n_rows; t0 += 65535) {
    const unsigned rows = (unsigned)(n_rows - t0 < 65535 ? n_rows - t0 : 65535);
    f16_kernel<<<dim3(blocks_for(n, 256), rows), 256, 0, s>>>(x + t0 * x_stride, x_stride, y + t0 * y_stride, y_stride, n);
    check(cudaGetLastError(), "f32_to_f16");
  }
}

void attention(cudaStream_t s, const float* q, int n_q, int64_t head_dim, const DeviceKv& kv, int64_t first_pos,
               int64_t n_main, float* scores, float* out) {
  if (head_dim > 512) throw std::runtime_error("cuda attention: head_dim " + std::to_string(head_dim) + " > 512");
  if (n_q <= 0) return;
  attention_kernel<<<(unsigned)n_q, kAttnThreads, 0, s>>>(q, head_dim, kv, first_pos, n_main, scores, out);
  check(cudaGetLastError(), "attention");
}

void attention_rows(cudaStream_t s, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                    const int64_t* first_pos, const int64_t* n_keys, int n_rows, int n_q, int64_t head_dim,
                    const DeviceKv& kv, float* scores, int64_t max_keys) {
  if (head_dim > 512) throw std::runtime_error("cuda attention: head_dim " + std::to_string(head_dim) + " > 512");
  if (n_q <= 0 || n_rows <= 0) return;
  attention_rows_kernel<<<dim3((unsigned)n_q, (unsigned)n_rows), kAttnThreads, 0, s>>>(
      q, q_stride, out, out_stride, first_pos, n_keys, head_dim, kv, scores, max_keys);
  check(cudaGetLastError(), "attention_rows");
}

void argmax(cudaStream_t s, const float* x, int64_t n, int64_t* out) {
  argmax_kernel<<<1, kArgmaxThreads, 0, s>>>(x, n, out);
  check(cudaGetLastError(), "argmax");
}

}  // namespace dspark::kernels::cuda
