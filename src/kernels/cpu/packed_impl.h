// Templates of the packed "x8" kernels (kernels/packed.h), included by packed_avx2.cpp only (written
// against accumulator types so that another 256-bit ISA could reuse them; AVX-512 runs 16-row
// records, packed16_avx512.cpp). Lanes = the 8 rows of a group: for each 4-element group k of a block, one
// multiply-add of the 8 rows' 4 weights (32 bytes) against the token's 4 activations broadcast
// gives each row's partial sums in its own lane, so the exact int32 block sums need no transpose;
// the f32 steps are the canonical ones (cpu.h), bitwise equal to qrows8 and the scalar kernels.
// Work is done in register tiles of row groups x tokens (compile-time sizes, so accumulators never
// spill): a record's weights are loaded and unpacked once for every token of the tile, and the
// tile's independent FMA chains hide the latency of each one.
//
// The includer defines DSPARK_ISA_NS and, inside that namespace, accumulators of the per-lane
// (per-row) sums of 4-byte-group dot products, each starting at zero:
//   U4Acc: add(u1, s1, u2, s2) adds u1.s1 + u2.s2 (u: unsigned weights, s: int8 activations; at
//          most 4 adds between finishes for u <= 15, one for u <= 63); finish() -> int32 [8]
//   S8Acc: int32 [8] sums of 4-byte-group products, add(k, x, y) (k = the step, 0..7, which an
//          ISA may use to spread the sum over independent chains), finish() -> int32 [8]
//   S8Rec: one record's signed int8 weights: set(v) the 32 bytes of step k, add(S8Acc&, k, a4)
//          the products with a token's 4 activation bytes (int8 q), finish(const S8Acc&) -> the
//          exact int32 [8] block sums
//   q5_signed(q4, m): 32 signed Q5_0 weights q - 16 from the low 4 bits q4 (bytes 0..15) and the
//          fifth bits m (bit b for byte b)
//   pin() on U4Acc and S8Acc: keep_in_register (keep_in_register.h) on the members;
// constexpr int kMaxTileTokens (4): the most tokens of one register tile. Every record takes
// the AVX2 quantizer's int8 q activations.
// All integer sums are exact, so the accumulators may form them in any width, order or chains.
#pragma once
#ifndef DSPARK_ISA_NS
#error "define DSPARK_ISA_NS before including packed_impl.h"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/keep_in_register.h"
#include "kernels/packed.h"

namespace dspark::kernels::cpu::DSPARK_ISA_NS {

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i bcast4(const uint8_t* p) {  // 4 activation bytes into every 32-bit lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Q4_1 record: d[8] f16, m[8] f16, 4 x 32 bytes of nibble pairs (element 4j+e low, 16+4j+e high).
struct PackQ4_1 {
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 160;
  // Exact block sums of the 8 rows against NT tokens' 32 activations a[t] (int8), the weights
  // loaded and unpacked once for all tokens. |pair| <= 2 * 15 * 127, so the eight pair sums of a
  // token stay within int16 (in any order: integer adds are exact) before the one vpmaddwd.
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m256i* is) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    U4Acc s[NT];
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = load256(rec + 32 + 32 * j);
      const __m256i lo = _mm256_and_si256(raw, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
      for (int t = 0; t < NT; ++t) {
        s[t].add(lo, bcast4(a[t] + 4 * j), hi, bcast4(a[t] + 16 + 4 * j));
        s[t].pin();
      }
    }
    for (int t = 0; t < NT; ++t) is[t] = s[t].finish();
  }
  static __m256 step(__m256 A, const uint8_t* rec, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    const float sa = reinterpret_cast<const float*>(act + L.off_s)[b];
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(load_f16x8(rec), _mm256_set1_ps(da)), A);
    return _mm256_fmadd_ps(load_f16x8(rec + 16), _mm256_set1_ps(sa), A);
  }
};

// Exact block sums of the 8 rows against NT tokens' 32 activations, the record's signed int8
// weights of step k (8 rows x elements 4k..4k+3) given by step_weights(k): the ISA's S8Rec forms
// them against each token (sign trick or biased activations). Q8_0 and Q5_0 records.
template <int NT, class StepWeights>
inline void s8_isum(const StepWeights& step_weights, const uint8_t* const* a, __m256i* is) {
  S8Rec w;
  S8Acc s[NT];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    w.set(step_weights(k));
    for (int t = 0; t < NT; ++t) {
      w.add(s[t], k, bcast4(a[t] + 4 * k));
      s[t].pin();
    }
  }
  for (int t = 0; t < NT; ++t) is[t] = w.finish(s[t]);
}

// Q8_0 record: d[8] f16, 8 x 32 bytes (rows' elements 4k..4k+3, int8).
struct PackQ8_0 {
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 272;
  // Signed weights: the ISA's S8Rec forms them against each token (sign trick or biased activations).
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m256i* is) {
    s8_isum<NT>([rec](int k) { return load256(rec + 16 + 32 * k); }, a, is);
  }
  static __m256 step(__m256 A, const uint8_t* rec, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(load_f16x8(rec), _mm256_set1_ps(da)), A);
  }
};

// Q5_0 record (kernels/packed.cpp): d[8] f16, 4 x 32 bytes of nibble pairs as in a Q4_1 record
// (the low 4 bits of q), 8 x u32 masks (bit 4i + e of mask k: bit 4 of q of row i's element
// 4k + e). The signed weights q - 16 are formed in registers, then the Q8_0 record's arithmetic.
struct PackQ5_0 {
  static constexpr int kElems = 32;
  static constexpr size_t kRec = 176;
  // Step k's 32 signed weights q - 16 (8 rows x elements 4k..4k+3, as a Q8_0 record's step k).
  static __m256i weights(const uint8_t* rec, int k) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F), raw = load256(rec + 16 + 32 * (k & 3));
    const __m256i q4 = k < 4 ? _mm256_and_si256(raw, lo4) : _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
    uint32_t m;
    std::memcpy(&m, rec + 144 + 4 * k, 4);
    return q5_signed(q4, m);
  }
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m256i* is) {
    s8_isum<NT>([rec](int k) { return weights(rec, k); }, a, is);
  }
  static __m256 step(__m256 A, const uint8_t* rec, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    return PackQ8_0::step(A, rec, is, act, L, b);
  }
  // Many tokens (prefill): gemm_packed widens each row block once to Q8_0 records (same d, int8
  // weights q - 16: the same integer sums) so the token chunks do not unpack it again and again.
  using Wide = PackQ8_0;
  static void widen(const uint8_t* rec, uint8_t* out) {
    std::memcpy(out, rec, 16);
    for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 + 32 * k), weights(rec, k));
  }
};

// Q4_K record (kernels/packed.h): d[8] f16, dmin[8] f16, sc[8][8] u8, mp[4][8] i32, then per
// sub-block j the nibbles as in a Q4_1 record. Canonical K4 step (cpu.h): I = sum_j sc_j * isum_j,
// M = sum_j m_j * (bsums[2j] + bsums[2j+1]); acc = fma(f32(I), d_w * d_a, acc), then
// acc = fma(-f32(M), dmin_w * d_a, acc).
struct PackQ4_K {
  static constexpr int kElems = 256;
  static constexpr size_t kRec = 32 + 64 + 128 + 1024;
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m256i* is) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int t = 0; t < NT; ++t) is[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* q = rec + 224 + 128 * j;
      U4Acc s[NT];
      for (int k = 0; k < 4; ++k) {
        const __m256i raw = load256(q + 32 * k);
        const __m256i lo = _mm256_and_si256(raw, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aj = a[t] + 32 * j;
          s[t].add(lo, bcast4(aj + 4 * k), hi, bcast4(aj + 16 + 4 * k));
          s[t].pin();
        }
      }
      // |pair| <= 2 * 15 * 127, eight pair sums per lane fit int16 (as for Q4_1).
      const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + 32 + 8 * j)));
      for (int t = 0; t < NT; ++t) {
        is[t] = _mm256_add_epi32(is[t], _mm256_mullo_epi32(s[t].finish(), sc));
        keep_in_register(is[t]);
      }
    }
  }
  static __m256 step(__m256 A, const uint8_t* rec, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(load_f16x8(rec), _mm256_set1_ps(da)), A);
    const auto* bs = reinterpret_cast<const int16_t*>(act + L.off_bs) + 16 * b;
    __m256i m = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const int32_t pair = pack_i16_pair(bs[4 * k] + bs[4 * k + 1], bs[4 * k + 2] + bs[4 * k + 3]);
      m = _mm256_add_epi32(m, _mm256_madd_epi16(load256(rec + 96 + 32 * k), _mm256_set1_epi32(pair)));
    }
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(load_f16x8(rec + 16), _mm256_set1_ps(da)), A);
  }
};

static_assert(PackQ4_K::kRec == kPackedQ4KRecordBytes);

// Q6_K record (kernels/packed.h): d[8] f16, scp[8 pairs m][8 rows][2] int8 (the scales of sub-blocks
// 2m and 2m+1), then per 16-element sub-block k 4 x 32 bytes: vector g, byte 4i + e = the unsigned
// 6-bit q (0..63) of element 16k + 4g + e of row i. Canonical K6 step (cpu.h): I = sum_k sc_k * isum_k
// with isum_k = sum (q - 32) * a = dot_k(q, a) - 32 * bsums[k]; here I = sum_k sc_k * dot_k - 32 * M,
// M = sum_k sc_k * bsums[k] (exact int32, so the same I); acc = fma(f32(I), d_w * d_a, acc).
struct PackQ6_K {
  static constexpr int kElems = 256;
  static constexpr size_t kRec = 16 + 128 + 2048;
  template <int NT>
  static void isum(const uint8_t* rec, const uint8_t* const* a, __m256i* is) {
    for (int t = 0; t < NT; ++t) is[t] = _mm256_setzero_si256();
    for (int m = 0; m < 8; ++m) {
      const __m256i scp = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 16 + 16 * m)));
      const __m256i sc[2] = {_mm256_srai_epi32(_mm256_slli_epi32(scp, 16), 16), _mm256_srai_epi32(scp, 16)};
      for (int h = 0; h < 2; ++h) {
        const int k = 2 * m + h;
        const uint8_t* q = rec + 144 + 128 * k;
        const __m256i q0 = load256(q), q1 = load256(q + 32), q2 = load256(q + 64), q3 = load256(q + 96);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* ak = a[t] + 16 * k;
          U4Acc s0, s1;  // q <= 63: one add per accumulator keeps AVX2's int16 sums exact
          s0.add(q0, bcast4(ak), q1, bcast4(ak + 4));
          s1.add(q2, bcast4(ak + 8), q3, bcast4(ak + 12));
          is[t] = _mm256_add_epi32(is[t], _mm256_mullo_epi32(_mm256_add_epi32(s0.finish(), s1.finish()), sc[h]));
          keep_in_register(is[t]);
        }
      }
    }
  }
  static __m256 step(__m256 A, const uint8_t* rec, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    const auto* bs = reinterpret_cast<const int16_t*>(act + L.off_bs) + 16 * b;
    __m256i m = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      const int32_t pair = pack_i16_pair(bs[2 * p], bs[2 * p + 1]);
      const __m256i scp = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 16 + 16 * p)));
      m = _mm256_add_epi32(m, _mm256_madd_epi16(scp, _mm256_set1_epi32(pair)));
    }
    const __m256i I = _mm256_sub_epi32(is, _mm256_slli_epi32(m, 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), _mm256_mul_ps(load_f16x8(rec), _mm256_set1_ps(da)), A);
  }
};

static_assert(PackQ6_K::kRec == kPackedQ6KRecordBytes);

// Software prefetch of the weight stream, this far ahead, for every tile. In verify windows the
// arithmetic per weight byte is high enough that the hardware prefetcher alone leaves the stream
// and the arithmetic serialised. Zen 4, Gemma 3's LM head (262,144 x 640 Q8_0) x 8 tokens, 2 threads,
// medians of 3 alternating runs of dspark_bench_kernels: 12.1 ms without, 10.1 ms at 2 KB ahead,
// 9.4 ms at 4 KB (8 KB no better). Decode (1 token) on an Intel Xeon without AMX (family 6 model
// 207, `--backend cpu-avx2`): Gemma 3 63-67 tok/s without, 69-103 with; SmolLM2 235-380 / 380-471.
constexpr size_t kPrefetchBytes = 4096;

// RG row groups (8 rows each, starting at row r) x NT tokens (activation rows a0 + t * stride),
// all blocks: RG * NT accumulators in registers (compile-time counts). Each row's blocks are
// accumulated in order 0..nb-1 with the canonical f32 steps, so grouping changes no bit; several
// groups or tokens give the out-of-order core independent FMA chains (one chain is latency-bound).
template <class P, int RG, int NT>
void tile(const QMatrix& wm, int64_t r, int64_t r1, const uint8_t* a0, const ActLayout& L, int64_t t0, float* y,
          int64_t ldy) {
  const int64_t nb = wm.n_cols / P::kElems;
  const size_t group_bytes = (size_t)nb * P::kRec;
  const uint8_t* g0 = wm.packed + (size_t)(r / 8) * group_bytes;
  const uint8_t* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = a0 + (size_t)t * L.stride;
  __m256 A[RG][NT];
  for (int g = 0; g < RG; ++g)
    for (int t = 0; t < NT; ++t) A[g][t] = _mm256_setzero_ps();
  const uint8_t* ab[NT];
  for (int64_t b = 0; b < nb; ++b) {
    for (int t = 0; t < NT; ++t) ab[t] = a[t] + P::kElems * b;
    for (int g = 0; g < RG; ++g) {
      const uint8_t* rec = g0 + (size_t)g * group_bytes + (size_t)b * P::kRec;
      const char* pf = reinterpret_cast<const char*>(rec) + kPrefetchBytes;
      for (size_t l = 0; l < P::kRec; l += 64) _mm_prefetch(pf + l, _MM_HINT_T0);
      __m256i is[NT];
      P::template isum<NT>(rec, ab, is);
      for (int t = 0; t < NT; ++t) A[g][t] = P::step(A[g][t], rec, is[t], a[t], L, b);
    }
  }
  alignas(32) float out[8];
  for (int g = 0; g < RG; ++g) {
    const int nr = (int)std::min<int64_t>(8, r1 - (r + 8 * g));
    for (int t = 0; t < NT; ++t) {
      float* dst = y + (t0 + t) * ldy + r + 8 * g;
      if (nr == 8) {  // a full group: one store (the loop below became a memmove call per tile and token)
        _mm256_storeu_ps(dst, A[g][t]);
        continue;
      }
      _mm256_store_ps(out, A[g][t]);
      for (int i = 0; i < nr; ++i) dst[i] = out[i];
    }
  }
}

// Rows [rb, re) x tokens [t0, t0 + NT), NT <= kMaxTileTokens: row groups RG at a time (then singly). Every
// caller uses RG = 1: one sequential weight stream. Decode with 4 groups in flight (4 streams
// 5-20 KB apart) was measured 1.5x slower end to end on Zen 4 (SmolLM2 170 vs 258 tok/s, Gemma 3
// 69 vs 84; LM head alone 2.2-2.9 vs 1.0 ms), the weights coming from DRAM.
template <class P, int RG, int NT>
void rows_x_tokens(const QMatrix& wm, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L, int64_t t0,
                   float* y, int64_t ldy) {
  int64_t r = rb;
  for (; r + 8 * RG <= re; r += 8 * RG) tile<P, RG, NT>(wm, r, re, a0, L, t0, y, ldy);
  for (; r < re; r += 8) tile<P, 1, NT>(wm, r, re, a0, L, t0, y, ldy);
}

template <class P>
void token_chunk(const QMatrix& wm, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L, int64_t t0,
                 int64_t nt, float* y, int64_t ldy) {
  static_assert(kMaxTileTokens == 4);
  switch (nt) {
    case 1: rows_x_tokens<P, 1, 1>(wm, rb, re, a0, L, t0, y, ldy); return;
    case 2: rows_x_tokens<P, 1, 2>(wm, rb, re, a0, L, t0, y, ldy); return;
    case 3: rows_x_tokens<P, 1, 3>(wm, rb, re, a0, L, t0, y, ldy); return;
    default: rows_x_tokens<P, 1, 4>(wm, rb, re, a0, L, t0, y, ldy); return;
  }
}

// Rows [r0, r1) x all tokens: tokens in chunks of up to kMaxTileTokens (accumulators in registers; a row
// group's records, a few KB, stay in L1 between chunks), rows in blocks of about kRowBlockBytes of
// packed weights so that a block stays in L2 while every token chunk passes over it (prefill).
template <class P>
void gemm_packed(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
                 float* y, int64_t ldy) {
  DSPARK_CHECK(r0 % 8 == 0);
  constexpr size_t kRowBlockBytes = 256 * 1024;
  constexpr int64_t kChunk = kMaxTileTokens;
  constexpr int64_t kWidenMinTokens = 17;  // above the verify windows: prefill
  if constexpr (requires { typename P::Wide; }) {
    if (n_tok >= kWidenMinTokens) {
      // Each L2-sized row block widened once into this thread's scratch, then every token chunk
      // runs the wide records' tiles over it (rows relative to the block).
      using Wd = typename P::Wide;
      thread_local std::vector<uint8_t> wide;
      const int64_t nb = wm.n_cols / P::kElems;
      const int64_t rb_rows = 8 * std::max<int64_t>(1, (int64_t)(kRowBlockBytes / ((size_t)nb * Wd::kRec)));
      for (int64_t rb = r0; rb < r1; rb += rb_rows) {
        const int64_t re = std::min(r1, rb + rb_rows), ng = (re - rb + 7) / 8;
        wide.resize((size_t)(ng * nb) * Wd::kRec);
        for (int64_t g = 0; g < ng; ++g)
          for (int64_t b = 0; b < nb; ++b)
            P::widen(wm.packed + (size_t)((rb / 8 + g) * nb + b) * P::kRec, wide.data() + (size_t)(g * nb + b) * Wd::kRec);
        QMatrix wq = wm;
        wq.packed = wide.data();
        for (int64_t t0 = 0; t0 < n_tok; t0 += kChunk)
          token_chunk<Wd>(wq, 0, re - rb, act + (size_t)t0 * L.stride, L, t0, std::min(kChunk, n_tok - t0), y + rb, ldy);
      }
      return;
    }
  }
  const size_t group_bytes = (size_t)(wm.n_cols / P::kElems) * P::kRec;
  // Decode: one pass over all rows. Verify windows: 4 row groups (a few KB each) per block, so that
  // every token chunk finds them in L1. Prefill: L2-sized blocks.
  const int64_t rb_rows = n_tok == 1 ? r1 - r0
                          : n_tok <= 16 ? 32
                                        : 8 * std::max<int64_t>(1, (int64_t)(kRowBlockBytes / group_bytes));
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kChunk) {
      const int64_t nt = std::min(kChunk, n_tok - t0);
      token_chunk<P>(wm, rb, re, act + (size_t)t0 * L.stride, L, t0, nt, y, ldy);
    }
  }
}

// The packed kernel set of weight type t (Q4_0 is packed as Q8_0 records, kernels/packed.h):
// the gemm over the packed copy and the quantizer of the activations it takes (int8 q).
inline bool packed_kernel_set(DType t, KernelSet* out) {
  GemmFn g = nullptr;
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0: g = &gemm_packed<PackQ8_0>; break;
    case DType::Q5_0: g = &gemm_packed<PackQ5_0>; break;
    case DType::Q4_K: g = &gemm_packed<PackQ4_K>; break;
    case DType::Q6_K: g = &gemm_packed<PackQ6_K>; break;
    case DType::Q4_1: g = &gemm_packed<PackQ4_1>; break;
    default: return false;
  }
  if (!kernels_avx2(t, out)) return false;
  out->gemm = g;
  return true;
}

}  // namespace dspark::kernels::cpu::DSPARK_ISA_NS
