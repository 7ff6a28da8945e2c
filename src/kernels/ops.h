// f32 elementwise and attention ops used by model code (no quantized weights here; see kernels.h).
// Hot loops are compiled for several ISAs and picked at run time (GCC target_clones).
#pragma once

#include <cstdint>
#include <vector>

#include "core/threadpool.h"

namespace dspark::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i];  x, w, out: [n] f32 (out may alias x)
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);
// Same per row: x, out [n_rows, n] f32.
void rms_norm_rows(const float* x, const float* w, float* out, int64_t n_rows, int64_t n, float eps);

// NEOX RoPE in place over all head_dim dims of each head: x [n_heads, head_dim] f32 at position pos.
// Pairs (i, i + head_dim/2); theta_i = pos * base^(-2i/head_dim), computed like ggml (repeated
// multiplication by base^(-2/head_dim)).
void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, float base);

// "Normal" RoPE (llama.cpp mode 0, Llama family) in place: pairs (2i, 2i + 1) of each head,
// theta_i = pos * base^(-2i/head_dim) computed like ggml. x [n_heads, head_dim] f32.
void rope_norm(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, float base);

// The two halves of rope_neox / rope_norm, so a forward computes a row's angles once for all layers
// (the cos / sin of 32-128 angles cost more than rotating the heads): cs [head_dim] f32 <- cos of
// theta_i (i < head_dim / 2), then sin of theta_i; then x rotated by them. rope_neox(x, .., pos, base)
// == rope_angles(hd, pos, base, cs) + rope_neox_cs(x, .., cs), bit for bit (it is that).
void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs);
void rope_neox_cs(float* x, int64_t n_heads, int64_t head_dim, const float* cs);
void rope_norm_cs(float* x, int64_t n_heads, int64_t head_dim, const float* cs);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i];  [n] f32 (out may alias
// gate). Vectorised through libmvec (ops_fastmath.cpp, within a few ulp of std::exp); scalar
// oracle silu_mul_ref. Elementwise, so batch-invariant.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void silu_mul_ref(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i];  [n] f32 (out may alias gate). Vectorised through libmvec's
// tanhf (ops_fastmath.cpp, within a few ulp of std::tanh); the exact-f32 scalar oracle is
// gelu_tanh_mul_ref. Elementwise, so batch-invariant. (The DSpark drafter's MLP.)
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh_mul_ref(const float* gate, const float* up, float* out, int64_t n);

// GELU via a 65536-entry table indexed by the f16 bits of the input, as ggml's CPU path does
// (input rounded to f16 for |x| < 10, result rounded to f16; 0 below -10, x above 10).
// Build one per model; read-only afterwards (safe to share between threads).
class GeluTable {
 public:
  GeluTable();
  // out[i] = gelu(gate[i]) * up[i];  [n] f32
  void gelu_mul(const float* gate, const float* up, float* out, int64_t n) const;
  // [65536] f32: gelu of the f16 value with those bits, rounded to f16 (the SIMD paths gather from it).
  const float* data() const { return table_; }

 private:
  float table_[65536];
};

// x[i] *= s
void scale(float* x, int64_t n, float s);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// Index of the largest value (first on ties).
int64_t argmax(const float* x, int64_t n);
// Largest value of x [n] f32 (n >= 1).
float max_value(const float* x, int64_t n);

// Appends to ids, in increasing order, every i < n with x[i] >= t; returns how many it appended.
// x [n] f32. Vectorised block test (16 at a time), scalar only inside blocks that hold a hit.
// Scalar oracle: collect_ge_ref.
int64_t collect_ge(const float* x, int64_t n, float t, std::vector<int32_t>& ids);
int64_t collect_ge_ref(const float* x, int64_t n, float t, std::vector<int32_t>& ids);

// out[i] = exp((x[i] - shift) * scale) for i < n; returns the sum (double). Vectorized through
// glibc's libmvec (ops_fastmath.cpp, -ffast-math: within a few ulp of std::exp; inputs must be
// finite). Used for softmax normalizers over the 262k vocabulary. Scalar oracle: exp_shift_sum_ref.
// chunk_sums (optional, [ceil(n / kExpChunk)] f32): the sum of out over each kExpChunk-entry chunk,
// so a caller can find the chunk holding a cumulative mass without rereading out.
inline constexpr int64_t kExpChunk = 1024;
double exp_shift_sum(const float* x, int64_t n, float shift, float scale, float* out, float* chunk_sums = nullptr);
double exp_shift_sum_ref(const float* x, int64_t n, float shift, float scale, float* out, float* chunk_sums = nullptr);

// f16 storage helpers (IEEE half) for the KV cache.
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);

}  // namespace dspark::kernels
