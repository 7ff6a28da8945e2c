// Elementwise ops on AVX2 + F16C (compiled with those flags; called only when the CPU has them).
#include <immintrin.h>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {

// As gelu_table_mul_avx512 (cpu.h), 8 lanes.
void gelu_table_mul_avx2(const float* table, const float* gate, const float* up, float* out, int64_t n) {
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 g = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)];
    out[i] = g * up[i];
  }
}

}  // namespace dspark::kernels::cpu
