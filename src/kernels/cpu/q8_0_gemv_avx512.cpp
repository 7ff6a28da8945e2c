// Q8_0 x Q8_0 matrix-vector product (n_tokens == 1) with AVX-512 VNNI: the lm_head path
// ([262144, 640] Q8_0, 178 MB per token), which must run at memory bandwidth.
//
// Per pair of 32-blocks (one zmm): weights are flipped to unsigned (w ^ 0x80 = w + 128) and
// multiplied with the signed activation by vpdpbusd, whose accumulator starts at the precomputed
// -128 * (sum of each 4-byte activation group), so one vpdpbusd yields exact sum w * a per lane.
// The 16 weight scales of a row are fetched with one gather; 4 rows are in flight with prefetch.
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {

bool gemv_q8_0_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y);

namespace {

constexpr int kMaxBlocks = 256;  // n_cols <= 8192 on this path
constexpr int kRows = 4;
constexpr int kPrefetchRows = 8;  // how far ahead (in rows) to prefetch

struct ActPrep {
  alignas(64) int8_t a[kMaxBlocks * 32];       // signed q
  alignas(64) int32_t nega[kMaxBlocks * 8];    // -128 * sum of each 4-byte group
  alignas(64) float da[kMaxBlocks + 16];       // activation scales, zero padded
};

inline __m512 row_scales(const uint8_t* p, __m512i idx, __mmask16 m, const float* da) {
  const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1);
  const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
  return _mm512_mul_ps(dw, _mm512_loadu_ps(da));
}

}  // namespace

bool gemv_q8_0_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y) {
  const int64_t nb = wm.n_cols / 32;
  if (nb > kMaxBlocks || nb < 2) return false;
  thread_local ActPrep ap;
  const auto* da_in = reinterpret_cast<const float*>(act + L.off_d);
  for (int64_t k = 0; k < nb * 32; k += 64) {
    const __m512i ab = _mm512_maskz_loadu_epi8(k + 64 <= nb * 32 ? ~0ull : 0xFFFFFFFFull, act + k);
    const __m512i as = _mm512_xor_si512(ab, _mm512_set1_epi8((char)0x80));
    _mm512_store_si512(ap.a + k, as);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), as);
    _mm512_store_si512(ap.nega + k / 4, _mm512_sub_epi32(_mm512_setzero_si512(), s));
  }
  std::memset(ap.da, 0, sizeof(ap.da));
  std::memcpy(ap.da, da_in, (size_t)nb * 4);

  const int64_t npairs = nb / 2;
  const bool odd = nb & 1;
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(34));
  const int n_groups = (int)((nb + 15) / 16);  // groups of 16 block scales
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  const size_t stride = wm.row_stride;
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const size_t row_lines = (stride + 63) / 64;

  int64_t r = r0;
  for (; r < r1; r += kRows) {
    const int nr = (int)std::min<int64_t>(kRows, r1 - r);
    const uint8_t* w[kRows];
    for (int i = 0; i < kRows; ++i) w[i] = base + (r + std::min(i, nr - 1)) * stride;
    // Prefetch rows r + kPrefetchRows .. + kRows.
    if (r + kPrefetchRows + kRows <= r1) {
      const uint8_t* pf = base + (r + kPrefetchRows) * stride;
      for (size_t l = 0; l < row_lines * kRows; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    }
    __m512 acc[kRows];
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (int g = 0; g < n_groups; ++g) {
      const int g_blocks = (int)std::min<int64_t>(16, nb - 16 * g);
      const __mmask16 gm = (__mmask16)((1u << g_blocks) - 1);
      __m512 sc[kRows];
      for (int i = 0; i < kRows; ++i) sc[i] = row_scales(w[i] + 16 * 34 * g, idx, gm, ap.da + 16 * g);
      const int pb = 8 * g, pe = (int)std::min<int64_t>(npairs, 8 * g + 8);
      for (int pi = pb; pi < pe; ++pi) {
        const int b = 2 * pi;
        const __m512i av = _mm512_load_si512(ap.a + 32 * b);
        const __m512i na = _mm512_load_si512(ap.nega + 8 * b);
        // lanes 0..7 take scale of block b, lanes 8..15 of block b + 1 (within the group).
        const int lb = b - 16 * g;
        const __m512i pidx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(lb)), _mm256_set1_epi32(lb + 1), 1);
        for (int i = 0; i < kRows; ++i) {
          const uint8_t* q = w[i] + 34 * b + 2;
          const __m512i wv = _mm512_inserti64x4(
              _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 34)), 1);
          const __m512i p = _mm512_dpbusd_epi32(na, _mm512_xor_si512(wv, flip), av);
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(pidx, sc[i]), acc[i]);
        }
      }
      if (odd && pe == npairs && 16 * g + g_blocks == nb) {  // last single block (lanes 0..7)
        const int b = (int)nb - 1, lb = b - 16 * g;
        const __m512i av = _mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(ap.a + 32 * b)));
        const __m512i na = _mm512_maskz_loadu_epi32(0xFF, ap.nega + 8 * b);
        const __m512i pidx = _mm512_set1_epi32(lb);
        for (int i = 0; i < kRows; ++i) {
          const __m512i wv = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + 34 * b + 2)));
          const __m512i p = _mm512_maskz_dpbusd_epi32(0xFF, na, _mm512_xor_si512(wv, flip), av);
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(pidx, sc[i]), acc[i]);
        }
      }
    }
    for (int i = 0; i < nr; ++i) y[r + i] = _mm512_reduce_add_ps(acc[i]);
  }
  return true;
}

}  // namespace dspark::kernels::cpu
