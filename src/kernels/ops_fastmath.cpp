// Compiled with -ffast-math (cmake/dspark_library.cmake) so the exp loop vectorizes through
// glibc's libmvec; nothing else belongs in this file (every function here has a scalar oracle in
// ops.cpp).
#include <cmath>

#include "kernels/ops.h"

namespace dspark::kernels {

// AVX2 and baseline clones: the AVX2 one calls libmvec's 8-wide expf.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
double exp_shift_sum(const float* x, int64_t n, float shift, float scale, float* out, float* chunk_sums) {
  double total = 0;
  constexpr int64_t kChunk = kExpChunk;  // f32 partial sums over short chunks, summed in double
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t e = c + kChunk < n ? c + kChunk : n;
    float part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = c; i < e; ++i) {
      const float v = std::exp((x[i] - shift) * scale);
      out[i] = v;
      part += v;
    }
    if (chunk_sums) chunk_sums[c / kChunk] = part;
    total += part;
  }
  return total;
}

// AVX-512, AVX2 and baseline clones: libmvec's 16-wide expf where the CPU has AVX-512 (0.66 ns an
// element with the 8-wide one on an AVX-512 Xeon: about 5 % of SmolLM2's prefill).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    // exp's argument is capped at 88 (expf(88) is finite): -ffast-math assumes no infinities, and
    // g / (1 + inf) would come out NaN. For g < -88 the result is ~1e-36 * up either way.
    const float g = gate[i];
    const float e = std::exp(-g < 88.0f ? -g : 88.0f);
    out[i] = g / (1.0f + e) * up[i];
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCoef = 0.044715f;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x))) * up[i];
  }
}

}  // namespace dspark::kernels
