// Elementwise ops on AVX-512 (compiled with AVX-512 flags; called only when the CPU has them).
#include <immintrin.h>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {

// out[i] = g(gate[i]) * up[i], g = 0 for x <= -10, x for x >= 10, else table[f16 bits of x]
// (round to nearest even, as the scalar path's conversion). [n] f32; table [65536] f32.
void gelu_table_mul_avx512(const float* table, const float* gate, const float* up, float* out, int64_t n) {
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 g = _mm512_i32gather_ps(_mm512_cvtepu16_epi32(h), table, 4);
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
    _mm512_storeu_ps(out + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)];
    out[i] = g * up[i];
  }
}

}  // namespace dspark::kernels::cpu
