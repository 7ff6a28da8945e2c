// Q8_0 x Q8_0 matrix-vector products for 1..kGemvMaxTokensQ8_0 tokens with AVX-512 VNNI: the
// lm_head path ([262144, 640] Q8_0, 178 MB per pass), which must run at memory bandwidth. A
// speculative verify window (2..4 tokens) reads each weight tile once for all its tokens.
//
// Canonical accumulation (cpu.h): lanes = 16 weight rows, blocks in order,
// acc = fma(f32(isum_b), d_w[b] * d_a[b], acc). Per pair of 32-blocks, each row's two blocks are
// one zmm: weights are flipped to unsigned (w ^ 0x80 = w + 128) and multiplied with the signed
// activation by vpdpbusd, whose accumulator starts at the precomputed -128 * (sum of each 4-byte
// activation group), so one vpdpbusd yields exact partial sums w * a. The 16 rows' partial-sum
// vectors are then transpose-reduced (exact int32) into one vector of 16 isums per block.
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {

bool gemv_q8_0_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y);
bool gemv_q8_0_multi_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L,
                            int64_t n_tok, float* y, int64_t ldy);

namespace {

constexpr int kMaxBlocks = 256;  // n_cols <= 8192 on this path
constexpr int kRows = 16;
constexpr int kPrefetchRows = 32;  // how far ahead (in rows) to prefetch

struct ActPrep {
  alignas(64) int8_t a[kMaxBlocks * 32 + 64];     // signed q, zero padded
  alignas(64) int32_t nega[kMaxBlocks * 8 + 16];  // -128 * sum of each 4-byte group
};

// [a0 + a1, a2 + a3, b0 + b1, b2 + b3] in each 128-bit lane.
inline __m512i hpair(__m512i a, __m512i b) {
  const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
  return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88)),
                          _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xDD)));
}

// P[i]: lanes 0..7 = partial sums of row i's block b, lanes 8..15 of block b + 1.
// Out: s0[i] = isum of row i block b, s1[i] = block b + 1.
inline void reduce16(const __m512i* P, __m512i& s0, __m512i& s1) {
  __m512i q[8], r[4];
  for (int k = 0; k < 8; ++k) q[k] = hpair(P[2 * k], P[2 * k + 1]);
  for (int k = 0; k < 4; ++k) r[k] = hpair(q[2 * k], q[2 * k + 1]);  // 128-lane j of r[k]: rows 4k..4k+3, lanes 4j..4j+3 summed
  const __m512i t0 = _mm512_add_epi32(_mm512_shuffle_i32x4(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_i32x4(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i t1 = _mm512_add_epi32(_mm512_shuffle_i32x4(r[2], r[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_i32x4(r[2], r[3], _MM_SHUFFLE(3, 1, 3, 1)));
  // t0 = [b: rows 0-3, b+1: rows 0-3, b: rows 4-7, b+1: rows 4-7], t1 likewise for rows 8-15.
  s0 = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
  s1 = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
}


// NT tokens at once: per 16-row tile and block pair the weights are loaded and flipped once, then
// each token runs exactly the n_tokens == 1 operations (same partial sums, same reduction, same
// fma order), so every token's result is bitwise the one-token result.
template <int NT>
bool gemv_q8_0_nt(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y,
                  int64_t ldy) {
  const int64_t nb = wm.n_cols / 32;
  if (nb > kMaxBlocks || nb < 1) return false;
  if ((int64_t)wm.row_stride * kRows >= ((int64_t)1 << 31)) return false;  // gather offsets are int32
  thread_local ActPrep aps[NT];
  const float* da[NT];
  const int64_t npad = (nb + 1) / 2 * 64;  // whole pairs of blocks
  for (int t = 0; t < NT; ++t) {
    const uint8_t* at = act + (size_t)t * L.stride;
    da[t] = reinterpret_cast<const float*>(at + L.off_d);
    ActPrep& ap = aps[t];
    for (int64_t k = 0; k < npad; k += 64) {
      const __m512i ab = _mm512_maskz_loadu_epi8(k + 64 <= nb * 32 ? ~0ull : 0xFFFFFFFFull, at + k);
      const __m512i as = _mm512_maskz_xor_epi32(k + 64 <= nb * 32 ? 0xFFFF : 0x00FF, ab, _mm512_set1_epi8((char)0x80));
      _mm512_store_si512(ap.a + k, as);
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), as);
      _mm512_store_si512(ap.nega + k / 4, _mm512_sub_epi32(_mm512_setzero_si512(), s));
    }
  }

  const __m512i flip = _mm512_set1_epi8((char)0x80);
  const size_t stride = wm.row_stride;
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const size_t tile_lines = (stride * kRows + 63) / 64;

  for (int64_t r = r0; r < r1; r += kRows) {
    const int nr = (int)std::min<int64_t>(kRows, r1 - r);
    const uint8_t* w[kRows];
    for (int i = 0; i < kRows; ++i) w[i] = base + (r + std::min(i, nr - 1)) * stride;
    const __m512i sidx = _mm512_mullo_epi32(_mm512_min_epi32(lane, _mm512_set1_epi32(nr - 1)), _mm512_set1_epi32((int)stride));
    if (r + kPrefetchRows + kRows <= r1) {
      const uint8_t* pf = base + (r + kPrefetchRows) * stride;
      for (size_t l = 0; l < tile_lines; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    }
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
      const bool two = b + 1 < nb;
      __m512i wf[kRows];
      for (int i = 0; i < kRows; ++i) {
        const uint8_t* q = w[i] + 34 * b + 2;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m512i wv = two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 34)), 1)
                               : _mm512_zextsi256_si512(lo);
        wf[i] = _mm512_xor_si512(wv, flip);
      }
      const __m512 dw0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(sidx, w[0] + 34 * b, 1)));
      const __m512 dw1 =
          two ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(sidx, w[0] + 34 * (b + 1), 1))) : dw0;
      for (int t = 0; t < NT; ++t) {
        const __m512i av = _mm512_load_si512(aps[t].a + 32 * b);
        const __m512i na = _mm512_load_si512(aps[t].nega + 8 * b);
        __m512i P[kRows];
        for (int i = 0; i < kRows; ++i) P[i] = _mm512_dpbusd_epi32(na, wf[i], av);  // odd tail: av, na zero in lanes 8..15
        __m512i s0, s1;
        reduce16(P, s0, s1);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(dw0, _mm512_set1_ps(da[t][b])), acc[t]);
        if (two) acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(dw1, _mm512_set1_ps(da[t][b + 1])), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy + r, (__mmask16)((1u << nr) - 1), acc[t]);
  }
  return true;
}

}  // namespace

bool gemv_q8_0_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y) {
  return gemv_q8_0_nt<1>(wm, r0, r1, act, L, y, 0);
}

bool gemv_q8_0_multi_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L,
                            int64_t n_tok, float* y, int64_t ldy) {
  if (n_tok < 1 || n_tok > kGemvMaxTokensQ8_0) return false;
  // Chunks of at most 4 tokens (register pressure: 16 weight vectors + 4 accumulators).
  for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
    const uint8_t* a = act + (size_t)t0 * L.stride;
    float* yt = y + t0 * ldy;
    bool ok = false;
    switch (std::min<int64_t>(4, n_tok - t0)) {
      case 1: ok = gemv_q8_0_nt<1>(wm, r0, r1, a, L, yt, ldy); break;
      case 2: ok = gemv_q8_0_nt<2>(wm, r0, r1, a, L, yt, ldy); break;
      case 3: ok = gemv_q8_0_nt<3>(wm, r0, r1, a, L, yt, ldy); break;
      default: ok = gemv_q8_0_nt<4>(wm, r0, r1, a, L, yt, ldy); break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace dspark::kernels::cpu
