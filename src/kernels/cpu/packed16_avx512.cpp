// AVX-512 VNNI kernels over the "x16" packed layout (kernels/packed.h): records of 16 rows, so one
// 512-bit vpdpbusd per 4-byte group and token forms the partial sums of 16 rows in their own lanes
// (the 8-row records of packed_impl.h, which AVX2 runs, need two 256-bit ones). Per MAC that halves
// the multiply-adds, the activation broadcasts and the f32 steps, which is what bounds a verify
// window of 4-8 tokens (Zen 4, Gemma 3's 262,144 x 640 Q8_0 head x 8 tokens, 2 threads: ~5.8 ms
// against ~7.5 ms for 8-row records with the same prefetch; cache-resident, 4.4 against 5.0).
//
// Records (G = 16; packed.cpp writes them): lane i = row i throughout; a "4G-byte vector" holds row
// i's 4 consecutive elements (or nibble pairs) at bytes 4i..4i+3.
//   Q8_0 (544 B): d[16] f16; 8 vectors (step k: elements 4k..4k+3, int8)
//   Q5_0 (352 B): d[16] f16; 4 vectors of nibble pairs (low 4 bits of q of elements 4j + e | those of
//                 16 + 4j + e << 4); 8 u64 masks (bit 4i + e of mask k: bit 4 of q of element 4k + e)
//   Q4_1 (320 B): d[16] f16, m[16] f16; 4 vectors of nibble pairs as Q5_0's
//   Q4_K (2,496 B per 256 elements): d[16], dmin[16] f16; sc[8 sub-blocks][16] u8; mp[4][16] i32 (m of
//                 sub-blocks 2k | 2k+1 << 16); per sub-block j 4 vectors of nibble pairs
//   Q6_K (4,384 B per 256 elements): d[16] f16; scp[8 pairs][16][2] int8; per 16-element sub-block k
//                 4 vectors of the 6-bit q (0..63)
// Activations: Q8_0 / Q5_0 take the AVX-512 quantizer's u = q + 128, so vpdpbusd(u, w) sums
// (q + 128) * w and the record's 128 * sum(w), formed once for all tokens, is subtracted; Q4_1 / Q4_K
// / Q6_K have unsigned weights and take int8 q (the AVX2 quantizer). All int32 sums are exact and
// the f32 steps are the canonical ones (cpu.h), blocks in order, so results are bitwise those of the
// 8-row records and of every other path (tests/unit/kernels/test_packed.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/cpu.h"
#include "kernels/packed.h"

namespace dspark::kernels::cpu {
namespace {

constexpr int kMaxTileTokens = 8;  // 8 tokens' int32 chains + f32 accumulators fit 32 registers

// Software prefetch of the weight stream for every tile. Verify windows: into L2, kPrefetchBytes
// ahead; with several tokens per record the arithmetic no longer hides the DRAM latency by itself.
// LM head x 8 tokens (Zen 4, medians of 15 alternating runs): 4 KB into L1 6.9-7.6 ms, 8-32 KB into L2
// 5.5-6.1 ms, 64 KB 6.3 ms. Decode (1 token): into L1, kPrefetchBytes1 ahead. Into L2 16 KB ahead was
// neutral on Zen 4 (Gemma 3, paired ratio 0.994), and on an Intel Xeon without AMX (family 6 model
// 207) the hardware prefetcher alone left Gemma 3's decode at 87-107 tok/s against 131-155 with it;
// there, into L1 8 KB ahead decoded SmolLM2 1.116x faster again (paired median of 6 alternating
// rounds, 396.7 -> 426.2 tok/s; Gemma 3 0.991x; in 4 rounds before, ratios of medians: 4 KB into L1
// 1.09x, 4 KB into L2 1.05x). Q4_1 records (R::kWindowPrefetchL1) take the single token's prefetch in
// windows too: there, SmolLM2's verify(2..5) after 256 tokens, 10 alternating rounds, paired medians
// 0.944 / 0.957 / 0.972 / 0.969 of the L2 prefetch's time; the same for every record type was 2-8 %
// slower on Gemma 3 (Q4_K / Q6_K records are 2.5-4.4 KB: 8 KB is two or three records ahead).
// On AMD Zen 4 (family 25 model 17) the single token's L1 prefetch cost SmolLM2's decode ~6 % instead
// (none / L1: paired median 1.062 over 16 alternating runs): the kernel planner times both there
// (the packed16-hw path) on a stream of the model's size.
constexpr size_t kPrefetchBytes = 16384;
constexpr size_t kPrefetchBytes1 = 8192;

inline void keep(__m512i& x) { asm volatile("" : "+v"(x)); }
inline __m512i bcast4(const uint8_t* p) {  // 4 activation bytes into every 32-bit lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512 load_f16x16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline float act_d(const uint8_t* act, const ActLayout& L, int64_t b) { return reinterpret_cast<const float*>(act + L.off_d)[b]; }

// Exact block sums of 16 rows against NT tokens' 32 biased activations (u = q + 128), the signed
// weights of step k given by weights(k): each token's two chains (even / odd steps), minus the
// record's 128 * sum(w).
template <int NT, class Weights>
inline void s8_isum(const Weights& weights, const uint8_t* const* a, __m512i* is) {
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  __m512i s0[NT], s1[NT], corr = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) s0[t] = s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i w = weights(k);
    corr = _mm512_dpbusd_epi32(corr, bias, w);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      __m512i& s = (k & 1) ? s1[t] : s0[t];
      s = _mm512_dpbusd_epi32(s, bcast4(a[t] + 4 * k), w);
      keep(s);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) is[t] = _mm512_sub_epi32(_mm512_add_epi32(s0[t], s1[t]), corr);
}

// Exact sums of 4 vectors of nibble pairs (unsigned 0..15) against NT tokens' 32 int8 activations
// (low nibbles: elements 4j + e, high: 16 + 4j + e), two chains per token.
template <int NT>
inline void u4_isum(const uint8_t* v, const uint8_t* const* a, __m512i* is) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  __m512i lo[NT], hi[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i raw = _mm512_loadu_si512(v + 64 * j);
    const __m512i l = _mm512_and_si512(raw, lo4), h = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      lo[t] = _mm512_dpbusd_epi32(lo[t], l, bcast4(a[t] + 4 * j));
      hi[t] = _mm512_dpbusd_epi32(hi[t], h, bcast4(a[t] + 16 + 4 * j));
      keep(lo[t]);
      keep(hi[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) is[t] = _mm512_add_epi32(lo[t], hi[t]);
}

// Canonical Q8_0 step: acc = fma(f32(isum), d_w * d_a, acc).
inline __m512 step_d(__m512 A, const uint8_t* d16, __m512i is, float da) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(load_f16x16(d16), _mm512_set1_ps(da)), A);
}

struct RecQ8_0 {
  static constexpr bool kWindowPrefetchL1 = false;
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 32 + 512;
  static constexpr bool kBiased = true;
  static __m512i weights(const uint8_t* rec, int k) { return _mm512_loadu_si512(rec + 32 + 64 * k); }
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m512i* is) {
    s8_isum<NT>([rec](int k) { return weights(rec, k); }, a, is);
  }
  static __m512 step(__m512 A, const uint8_t* rec, __m512i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    return step_d(A, rec, is, act_d(act, L, b));
  }
};

struct RecQ5_0 {
  static constexpr bool kWindowPrefetchL1 = false;
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 32 + 256 + 64;
  static constexpr bool kBiased = true;
  // Step k's signed weights q - 16: q4 where the fifth bit is set, else q4 - 16.
  static __m512i weights(const uint8_t* rec, int k) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F), raw = _mm512_loadu_si512(rec + 32 + 64 * (k & 3));
    const __m512i q4 = k < 4 ? _mm512_and_si512(raw, lo4) : _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4);
    uint64_t m;
    std::memcpy(&m, rec + 288 + 8 * k, 8);
    return _mm512_mask_sub_epi8(q4, (__mmask64)~m, q4, _mm512_set1_epi8(16));
  }
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m512i* is) {
    s8_isum<NT>([rec](int k) { return weights(rec, k); }, a, is);
  }
  static __m512 step(__m512 A, const uint8_t* rec, __m512i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    return step_d(A, rec, is, act_d(act, L, b));
  }
  // Prefill: a row block widened once to Q8_0 records (same d, int8 weights q - 16: the same sums),
  // so the token chunks do not unpack it again and again.
  using Wide = RecQ8_0;
  static void widen(const uint8_t* rec, uint8_t* out) {
    std::memcpy(out, rec, 32);
    for (int k = 0; k < 8; ++k) _mm512_storeu_si512(out + 32 + 64 * k, weights(rec, k));
  }
};

// Canonical Q4_1 step: the Q8_0 one, then acc = fma(m_w, s_a, acc).
struct RecQ4_1 {
  static constexpr bool kWindowPrefetchL1 = true;  // see kPrefetchBytes1
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 32 + 32 + 256;
  static constexpr bool kBiased = false;
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m512i* is) {
    u4_isum<NT>(rec + 64, a, is);
  }
  static __m512 step(__m512 A, const uint8_t* rec, __m512i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    A = step_d(A, rec, is, act_d(act, L, b));
    return _mm512_fmadd_ps(load_f16x16(rec + 32), _mm512_set1_ps(reinterpret_cast<const float*>(act + L.off_s)[b]), A);
  }
};

// Canonical K4 step (cpu.h): I = sum_j sc_j * isum_j, M = sum_j m_j * (bsums[2j] + bsums[2j+1]);
// acc = fma(f32(I), d_w * d_a, acc), then acc = fma(-f32(M), dmin_w * d_a, acc).
struct RecQ4_K {
  static constexpr bool kWindowPrefetchL1 = false;
  static constexpr int kElems = 256;
  static constexpr size_t kRec = 2 * kPackedQ4KRecordBytes;
  static constexpr bool kBiased = false;
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m512i* is) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) is[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* aj[NT];
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) aj[t] = a[t] + 32 * j;
      __m512i s[NT];
      u4_isum<NT>(rec + 448 + 256 * j, aj, s);
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 64 + 16 * j)));
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(s[t], sc));
        keep(is[t]);
      }
    }
  }
  static __m512 step(__m512 A, const uint8_t* rec, __m512i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = act_d(act, L, b);
    A = step_d(A, rec, is, da);
    const auto* bs = reinterpret_cast<const int16_t*>(act + L.off_bs) + 16 * b;
    __m512i m = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const int32_t pair = pack_i16_pair(bs[4 * k] + bs[4 * k + 1], bs[4 * k + 2] + bs[4 * k + 3]);
      m = _mm512_add_epi32(m, _mm512_madd_epi16(_mm512_loadu_si512(rec + 192 + 64 * k), _mm512_set1_epi32(pair)));
    }
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(load_f16x16(rec + 32), _mm512_set1_ps(da)), A);
  }
};

// Canonical K6 step (cpu.h): I = sum_k sc_k * isum_k with weights q - 32, formed as
// sum_k sc_k * dot_k(q, a) - 32 * M, M = sum_k sc_k * bsums[k] (exact int32, so the same I);
// acc = fma(f32(I), d_w * d_a, acc).
struct RecQ6_K {
  static constexpr bool kWindowPrefetchL1 = false;
  static constexpr int kElems = 256;
  static constexpr size_t kRec = 2 * kPackedQ6KRecordBytes;
  static constexpr bool kBiased = false;
  // Sub-block scales of pair m: lanes 2i / 2i + 1 of the int16 vector are row i's sc of 2m / 2m + 1.
  static __m512i scales(const uint8_t* rec, int m) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 32 + 32 * m)));
  }
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m512i* is) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) is[t] = _mm512_setzero_si512();
    for (int m = 0; m < 8; ++m) {
      const __m512i scp = scales(rec, m);
      const __m512i sc[2] = {_mm512_srai_epi32(_mm512_slli_epi32(scp, 16), 16), _mm512_srai_epi32(scp, 16)};
      for (int h = 0; h < 2; ++h) {
        const int k = 2 * m + h;
        const uint8_t* q = rec + 288 + 256 * k;
        const __m512i q0 = _mm512_loadu_si512(q), q1 = _mm512_loadu_si512(q + 64), q2 = _mm512_loadu_si512(q + 128),
                      q3 = _mm512_loadu_si512(q + 192);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const uint8_t* ak = a[t] + 16 * k;
          // q <= 63, |a| <= 127: any order of these exact int32 sums
          __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, bcast4(ak));
          __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q2, bcast4(ak + 8));
          s0 = _mm512_dpbusd_epi32(s0, q1, bcast4(ak + 4));
          s1 = _mm512_dpbusd_epi32(s1, q3, bcast4(ak + 12));
          is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc[h]));
          keep(is[t]);
        }
      }
    }
  }
  static __m512 step(__m512 A, const uint8_t* rec, __m512i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const auto* bs = reinterpret_cast<const int16_t*>(act + L.off_bs) + 16 * b;
    __m512i m = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      const int32_t pair = pack_i16_pair(bs[2 * p], bs[2 * p + 1]);
      m = _mm512_add_epi32(m, _mm512_madd_epi16(scales(rec, p), _mm512_set1_epi32(pair)));
    }
    const __m512i I = _mm512_sub_epi32(is, _mm512_slli_epi32(m, 5));
    return step_d(A, rec, I, act_d(act, L, b));
  }
};

static_assert(RecQ8_0::kRec == kPackedQ8_0x16RecordBytes && RecQ5_0::kRec == kPackedQ5_0x16RecordBytes);

// Rows [r, r + nr) (one group of 16, nr <= 16; records from `rec`) x NT tokens (activation rows
// a0 + t * L.stride), all blocks in order. kPf1: a single token prefetches the weight stream into L1
// (false: the hardware prefetcher alone; which is faster depends on the CPU and on whether the weights
// stream from DRAM or sit in L3, so the kernel planner times both: kernels/plan.h, packed16-hw).
template <class R, int NT, bool kPf1 = true>
void tile(const uint8_t* rec, int64_t nb, const uint8_t* a0, const ActLayout& L, float* y, int64_t ldy, int64_t t0,
          int64_t r, int nr) {
  const uint8_t* a[NT];
  const uint8_t* ab[NT];
  __m512 A[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    a[t] = a0 + (size_t)t * L.stride;
    A[t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b, rec += R::kRec) {
    if constexpr (NT == 1) {
      if constexpr (kPf1)
        for (size_t l = 0; l < R::kRec; l += 64) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchBytes1 + l, _MM_HINT_T0);
    } else if constexpr (R::kWindowPrefetchL1)
      for (size_t l = 0; l < R::kRec; l += 64) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchBytes1 + l, _MM_HINT_T0);
    else
      for (size_t l = 0; l < R::kRec; l += 64) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchBytes + l, _MM_HINT_T1);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) ab[t] = a[t] + R::kElems * b;
    __m512i is[NT];
    R::template isum<NT>(rec, ab, is);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) A[t] = R::step(A[t], rec, is[t], a[t], L, b);
  }
  const __mmask16 m = (__mmask16)((1u << nr) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r, m, A[t]);
}

// Rows [rb, re) (records from `packed`, row rb's group first) x tokens [t0, t0 + NT).
template <class R, int NT, bool kPf1 = true>
void rows_x_tokens(const uint8_t* packed, int64_t nb, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L,
                   int64_t t0, float* y, int64_t ldy) {
  for (int64_t r = rb; r < re; r += 16)
    tile<R, NT, kPf1>(packed + (size_t)((r - rb) / 16) * (size_t)nb * R::kRec, nb, a0, L, y, ldy, t0, r,
                (int)std::min<int64_t>(16, re - r));
}

template <class R, bool kPf1 = true>
void token_chunk(const uint8_t* packed, int64_t nb, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L,
                 int64_t t0, int64_t nt, float* y, int64_t ldy) {
  switch (nt) {
    case 1: rows_x_tokens<R, 1, kPf1>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 2: rows_x_tokens<R, 2>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 3: rows_x_tokens<R, 3>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 4: rows_x_tokens<R, 4>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 5: rows_x_tokens<R, 5>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 6: rows_x_tokens<R, 6>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    case 7: rows_x_tokens<R, 7>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
    default: rows_x_tokens<R, 8>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
  }
}

// Rows [r0, r1) (r0 a multiple of 16) x all tokens: decode in one pass over the rows; verify windows
// in blocks of 2 groups (in L1 or L2 while a second token chunk passes); prefill in L2-sized row
// blocks that every token chunk passes over (Q5_0's widened once to Q8_0 records).
template <class R, bool kPf1>
void gemm_packed16(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
                   float* y, int64_t ldy) {
  DSPARK_CHECK(r0 % 16 == 0);
  constexpr size_t kRowBlockBytes = 256 * 1024;
  constexpr int64_t kWidenMinTokens = 17;  // above the verify windows: prefill
  const int64_t nb = w.n_cols / R::kElems;
  const size_t group_bytes = (size_t)nb * R::kRec;
  const int64_t rb_rows = n_tok == 1 ? r1 - r0
                          : n_tok <= 16 ? 32
                                        : 16 * std::max<int64_t>(1, (int64_t)(kRowBlockBytes / group_bytes));
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    const uint8_t* recs = w.packed + (size_t)(rb / 16) * group_bytes;
    if constexpr (requires { typename R::Wide; }) {
      if (n_tok >= kWidenMinTokens) {
        using Wd = typename R::Wide;
        thread_local std::vector<uint8_t> wide;
        const int64_t n_rec = (re - rb + 15) / 16 * nb;
        wide.resize((size_t)n_rec * Wd::kRec);
        for (int64_t i = 0; i < n_rec; ++i) R::widen(recs + (size_t)i * R::kRec, wide.data() + (size_t)i * Wd::kRec);
        for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTileTokens)
          token_chunk<Wd>(wide.data(), nb, rb, re, act + (size_t)t0 * L.stride, L, t0,
                          std::min<int64_t>(kMaxTileTokens, n_tok - t0), y, ldy);
        continue;
      }
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTileTokens)
      token_chunk<R, kPf1>(recs, nb, rb, re, act + (size_t)t0 * L.stride, L, t0, std::min<int64_t>(kMaxTileTokens, n_tok - t0),
                     y, ldy);
  }
}

template <class R>
bool kernel_set(DType t, KernelSet* out, bool decode_prefetch) {
  // Biased records take the AVX-512 quantizer's u = q + 128, the others int8 q (the AVX2 quantizer).
  if (!(R::kBiased ? kernels_avx512(t, out) : kernels_avx2(t, out))) return false;
  if (out->act == ActKind::kQ8_0 || out->act == ActKind::kQ8_1)  // the same bytes, 16 blocks at a time
    out->quantize = R::kBiased ? &quantize_q8_32_avx512_biased : &quantize_q8_32_avx512;
  out->gemm = decode_prefetch ? &gemm_packed16<R, true> : &gemm_packed16<R, false>;
  return true;
}

}  // namespace

bool packed16_kernels_avx512(DType t, KernelSet* out, bool decode_prefetch) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0: return kernel_set<RecQ8_0>(t, out, decode_prefetch);
    case DType::Q5_0: return kernel_set<RecQ5_0>(t, out, decode_prefetch);
    case DType::Q4_1: return kernel_set<RecQ4_1>(t, out, decode_prefetch);
    case DType::Q4_K: return kernel_set<RecQ4_K>(t, out, decode_prefetch);
    case DType::Q6_K: return kernel_set<RecQ6_K>(t, out, decode_prefetch);
    default: return false;
  }
}

}  // namespace dspark::kernels::cpu
