// AVX-512 activation quantizer for the 32-element block formats (ActKind kQ8_0 / kQ8_1), bitwise the
// AVX2 one's (gemm_impl.h, quantize_q8_32): per block d = f16(amax / 127), q = round_half_even(x *
// (127 / amax)) (0 where amax is 0), and for kQ8_1 s = f16(d_f32 * sum(q)) with d_f32 = amax / 127
// before rounding. The AVX2 quantizer reduces each block's maximum and sum across its lanes alone
// (two horizontal reductions a block); here 16 blocks are reduced together by a transposing tree, so a
// block's reductions cost a sixteenth of the tree's ~45 operations. Max and integer sums are exact, so
// the order of the tree changes no bit. A row's blocks past the last 16 go one at a time (a few) or
// through the same code with the missing blocks zero (their results dropped). |x| is compared as
// integer bits (the same order as the floats for every non-negative non-NaN value); a NaN activation,
// which no model here produces, is the one input where the two quantizers could differ.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {
namespace {

// r[i] (i < 16): 16 partial results of block i in its lanes -> lane i of the result: op over block
// i's lanes. op is exact and associative (max, integer add), so any pairing gives the same value.
template <class Op>
inline __m512i reduce16(__m512i* r, Op op) {
  // 16 -> 8: vector i holds block i in its 128-bit lanes 0-1, block i + 8 in lanes 2-3.
  for (int i = 0; i < 8; ++i)
    r[i] = op(_mm512_shuffle_i32x4(r[i], r[i + 8], 0x44), _mm512_shuffle_i32x4(r[i], r[i + 8], 0xEE));
  // 8 -> 4: vector i's 128-bit lanes hold blocks i, i + 8, i + 4, i + 12.
  for (int i = 0; i < 4; ++i)
    r[i] = op(_mm512_shuffle_i32x4(r[i], r[i + 4], 0x88), _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD));
  // 4 -> 2: in each 128-bit lane, elements 0-1 of vector i's block, 2-3 of vector i + 2's.
  for (int i = 0; i < 2; ++i)
    r[i] = op(_mm512_unpacklo_epi64(r[i], r[i + 2]), _mm512_unpackhi_epi64(r[i], r[i + 2]));
  // 2 -> 1: in each 128-bit lane, the blocks of vectors 0, 2, 1, 3 of the 8 -> 4 step.
  auto pick = [](__m512i a, __m512i b, int imm_even) {
    return imm_even ? _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), 0x88))
                    : _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), 0xDD));
  };
  const __m512i x = op(pick(r[0], r[1], 1), pick(r[0], r[1], 0));
  // Element j of x holds block kOrder[j] = 0 2 1 3 | 8 10 9 11 | 4 6 5 7 | 12 14 13 15; that order is its
  // own inverse, so gathering x at it puts block b in element b.
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_epi32(order, x);
}

inline __m512 round_f16x16(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
inline float round_f16(float v) { return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT)); }

// The block of 32 values at x: max(|x[i]|, |x[i + 16]|) lane by lane.
inline __m512 abs_max2(const float* x) {
  const __m512 sign = _mm512_set1_ps(-0.f);
  return _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x)), _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16)));
}

// The block at x quantized with the scale ib (127 / amax, or 0) into its 32 bytes at q8 (int8 q, or
// u = q + 128); returns q[i] + q[i + 16] lane by lane (for the block's sum).
template <bool kBiased>
inline __m512i quantize_block(const float* x, __m512 ib, uint8_t* q8) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), ib), kRound);
  const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), ib), kRound);
  __m128i p0 = _mm512_cvtsepi32_epi8(q0), p1 = _mm512_cvtsepi32_epi8(q1);
  if constexpr (kBiased) {
    p0 = _mm_xor_si128(p0, _mm_set1_epi8((char)0x80));
    p1 = _mm_xor_si128(p1, _mm_set1_epi8((char)0x80));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q8), p0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q8 + 16), p1);
  return _mm512_add_epi32(q0, q1);
}

// 16 blocks (512 values at x) -> q [512] at q8, d [16], s [16] (s only when s != nullptr).
template <bool kBiased>
inline void quantize16(const float* x, uint8_t* q8, float* d, float* s) {
  __m512i r[16];
  for (int b = 0; b < 16; ++b) r[b] = _mm512_castps_si512(abs_max2(x + 32 * b));
  // |x| as f32 bits order like the values (non-negative floats): an integer max is the float max.
  const __m512 amax = _mm512_castsi512_ps(reduce16(r, [](__m512i p, __m512i q) { return _mm512_max_epi32(p, q); }));
  const __m512 df = _mm512_div_ps(amax, _mm512_set1_ps(127.f));
  _mm512_storeu_ps(d, round_f16x16(df));
  const __mmask16 nz = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  alignas(64) float id[16];
  _mm512_store_ps(id, _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.f), amax));
  for (int b = 0; b < 16; ++b) r[b] = quantize_block<kBiased>(x + 32 * b, _mm512_set1_ps(id[b]), q8 + 32 * b);
  if (s) {
    const __m512i sum = reduce16(r, [](__m512i p, __m512i q) { return _mm512_add_epi32(p, q); });
    _mm512_storeu_ps(s, round_f16x16(_mm512_mul_ps(df, _mm512_cvtepi32_ps(sum))));
  }
}

// One block (a row's last few): the same values, reduced across the block's own lanes.
template <bool kBiased>
inline void quantize1(const float* x, uint8_t* q8, float* d, float* s) {
  const float amax = _mm512_reduce_max_ps(abs_max2(x));
  const float df = amax / 127.f;
  *d = round_f16(df);
  const __m512i q = quantize_block<kBiased>(x, _mm512_set1_ps(amax != 0.f ? 127.f / amax : 0.f), q8);
  if (s) *s = round_f16(df * (float)_mm512_reduce_add_epi32(q));
}

// A row's last blocks: fewer than this one at a time, else as 16 with the missing ones zero. From
// operation counts (~30 a block alone, ~250 a padded pass of 16), not tuned.
constexpr int64_t kPadMinBlocks = 6;

template <bool kBiased>
void quantize_rows(const float* x, uint8_t* dst, const ActLayout& L) {
  float* d = reinterpret_cast<float*>(dst + L.off_d);
  float* s = L.kind == ActKind::kQ8_1 ? reinterpret_cast<float*>(dst + L.off_s) : nullptr;
  const int64_t nb = L.n_cols / 32;
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) quantize16<kBiased>(x + 32 * b, dst + 32 * b, d + b, s ? s + b : nullptr);
  if (nb - b < kPadMinBlocks) {
    for (; b < nb; ++b) quantize1<kBiased>(x + 32 * b, dst + 32 * b, d + b, s ? s + b : nullptr);
  } else if (b < nb) {  // the last blocks, zero-padded to 16
    const int64_t n = nb - b;
    alignas(64) float xt[512] = {};
    alignas(64) uint8_t qt[512];
    alignas(64) float dt[16], st[16];
    std::memcpy(xt, x + 32 * b, (size_t)n * 32 * sizeof(float));
    quantize16<kBiased>(xt, qt, dt, s ? st : nullptr);
    std::memcpy(dst + 32 * b, qt, (size_t)n * 32);
    std::memcpy(d + b, dt, (size_t)n * sizeof(float));
    if (s) std::memcpy(s + b, st, (size_t)n * sizeof(float));
  }
}

}  // namespace

void quantize_q8_32_avx512(const float* x, uint8_t* dst, const ActLayout& L) { quantize_rows<false>(x, dst, L); }
void quantize_q8_32_avx512_biased(const float* x, uint8_t* dst, const ActLayout& L) {
  quantize_rows<true>(x, dst, L);
}

}  // namespace dspark::kernels::cpu
