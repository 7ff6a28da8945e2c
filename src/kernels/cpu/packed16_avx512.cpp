// AVX-512 VNNI kernels over the "x16" packed layout of Q8_0 and Q5_0 records (kernels/packed.h): 16 rows per
// record, so one 512-bit vpdpbusd per 4-element step and token forms the partial sums of 16 rows
// (the x8 records of packed_impl.h need two 256-bit ones). Per MAC that halves the multiply-adds,
// the activation broadcasts and the f32 steps, which is what bounds a verify window of 4-8 tokens
// over a DRAM-streamed LM head (Zen 4, Gemma 3's 262,144 x 640 Q8_0 head x 8 tokens, 2 threads:
// ~5.8 ms against ~7.5 ms for x8 records with the same prefetch; cache-resident, 4.4 against 5.0).
//
// Q8_0 record (544 bytes): d[16] f16 (lane i = row i), then for k = 0..7, 64 bytes: row i's int8
// elements 4k..4k+3 at bytes 4i..4i+3 (Q5_0's below). Activations are the AVX-512 quantizer's u = q + 128, so
// vpdpbusd(u, w) sums (q + 128) * w and the record's 128 * sum(w), formed once for all tokens, is
// subtracted (as S8Rec in packed_avx512.cpp). The int32 block sums are exact and the f32 step is the
// canonical one (cpu.h): acc = fma(f32(isum_b), d_w[b] * d_a[b], acc), blocks in order, so results
// are bitwise those of the x8 records and of every other path (tests/unit/kernels/test_packed.cpp).
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

// Record policies: kRec bytes, d[16] f16 at offset 0, weights(rec, k) = step k's 64 signed int8
// weights (16 rows x elements 4k..4k+3, row i at bytes 4i..4i+3).
struct RecQ8_0 {
  static constexpr size_t kRec = kPackedQ8_0x16RecordBytes;
  static __m512i weights(const uint8_t* rec, int k) { return _mm512_loadu_si512(rec + 32 + 64 * k); }
};
// Q5_0 (352 bytes): d[16] f16; 4 x 64 bytes of nibble pairs (byte 4i + e of vector j: the low 4 bits of
// q of element 4j + e | those of element 16 + 4j + e << 4); 8 x u64 masks (bit 4i + e of mask k: bit
// 4 of q of row i's element 4k + e). Weights q - 16: q4 where the fifth bit is set, else q4 - 16.
struct RecQ5_0 {
  static constexpr size_t kRec = kPackedQ5_0x16RecordBytes;
  static __m512i weights(const uint8_t* rec, int k) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F), raw = _mm512_loadu_si512(rec + 32 + 64 * (k & 3));
    const __m512i q4 = k < 4 ? _mm512_and_si512(raw, lo4) : _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4);
    uint64_t m;
    std::memcpy(&m, rec + 288 + 8 * k, 8);
    return _mm512_mask_sub_epi8(q4, (__mmask64)~m, q4, _mm512_set1_epi8(16));
  }
  // Prefill: a row block widened once to Q8_0 x16 records (same d, int8 weights q - 16: the same sums).
  static void widen(const uint8_t* rec, uint8_t* out) {
    std::memcpy(out, rec, 32);
    for (int k = 0; k < 8; ++k) _mm512_storeu_si512(out + 32 + 64 * k, weights(rec, k));
  }
};

constexpr int kMaxTileTokens = 8;  // 2 x 8 int32 chains + 8 f32 accumulators + 4 in 32 registers

// Software prefetch into L2 of the weight stream for tiles of >= 2 tokens, this far ahead: with
// several tokens per record the arithmetic no longer hides the DRAM latency by itself. LM head x 8
// tokens (Zen 4, medians of 15 alternating runs): 4 KB into L1 ~6.9 ms, 8-32 KB into L2 5.5-6.1 ms,
// 64 KB 6.3 ms. Decode (1 token, bandwidth-bound) is left to the hardware prefetcher.
constexpr size_t kPrefetchBytes = 16384;

inline void keep(__m512i& x) { asm volatile("" : "+v"(x)); }

// Rows [r, r + nr) (one group of 16, nr <= 16) x NT tokens (activation rows a0 + t * L.stride), all blocks.
template <class R, int NT>
void tile(const uint8_t* rec, int64_t nb, const uint8_t* a0, const ActLayout& L, float* y, int64_t ldy, int64_t t0,
          int64_t r, int nr) {
  const uint8_t* a[NT];
  const float* da[NT];
  __m512 A[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    a[t] = a0 + (size_t)t * L.stride;
    da[t] = reinterpret_cast<const float*>(a[t] + L.off_d);
    A[t] = _mm512_setzero_ps();
  }
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  for (int64_t b = 0; b < nb; ++b, rec += R::kRec) {
    if constexpr (NT >= 2)
      for (size_t l = 0; l < R::kRec; l += 64) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchBytes + l, _MM_HINT_T1);
    __m512i s0[NT], s1[NT], corr = _mm512_setzero_si512();  // even / odd steps: two chains per token
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) s0[t] = s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i w = R::weights(rec, k);
      corr = _mm512_dpbusd_epi32(corr, bias, w);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        int32_t u4;
        std::memcpy(&u4, a[t] + 32 * b + 4 * k, 4);
        __m512i& s = (k & 1) ? s1[t] : s0[t];
        s = _mm512_dpbusd_epi32(s, _mm512_set1_epi32(u4), w);
        keep(s);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m512i is = _mm512_sub_epi32(_mm512_add_epi32(s0[t], s1[t]), corr);
      A[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(da[t][b])), A[t]);
    }
  }
  const __mmask16 m = (__mmask16)((1u << nr) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r, m, A[t]);
}

// Rows [rb, re) of the records at `packed` (row rb's group first) x tokens [t0, t0 + NT); y rows
// are numbered from y_row0 + rb.
template <class R, int NT>
void rows_x_tokens(const uint8_t* packed, int64_t nb, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L,
                   int64_t t0, float* y, int64_t ldy) {
  for (int64_t r = rb; r < re; r += 16)
    tile<R, NT>(packed + (size_t)((r - rb) / 16) * (size_t)nb * R::kRec, nb, a0, L, y, ldy, t0, r,
                (int)std::min<int64_t>(16, re - r));
}

template <class R>
void token_chunk(const uint8_t* packed, int64_t nb, int64_t rb, int64_t re, const uint8_t* a0, const ActLayout& L,
                 int64_t t0, int64_t nt, float* y, int64_t ldy) {
  switch (nt) {
    case 1: rows_x_tokens<R, 1>(packed, nb, rb, re, a0, L, t0, y, ldy); return;
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
// in blocks of 2 groups (~22 KB for 640 columns, in L1 while a second token chunk passes); prefill
// in L2-sized row blocks that every token chunk passes over (Q5_0's widened once to Q8_0 records, so
// the token chunks do not unpack them again and again).
template <class R>
void gemm_packed16(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
                   float* y, int64_t ldy) {
  DSPARK_CHECK(r0 % 16 == 0);
  constexpr size_t kRowBlockBytes = 256 * 1024;
  constexpr int64_t kWidenMinTokens = 17;  // above the verify windows: prefill
  const int64_t nb = w.n_cols / 32;
  const size_t group_bytes = (size_t)nb * R::kRec;
  const int64_t rb_rows = n_tok == 1 ? r1 - r0
                          : n_tok <= 16 ? 32
                                        : 16 * std::max<int64_t>(1, (int64_t)(kRowBlockBytes / group_bytes));
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    const uint8_t* recs = w.packed + (size_t)(rb / 16) * group_bytes;
    if constexpr (requires { R::widen(nullptr, nullptr); }) {
      if (n_tok >= kWidenMinTokens) {
        thread_local std::vector<uint8_t> wide;
        const int64_t ng = (re - rb + 15) / 16;
        wide.resize((size_t)(ng * nb) * RecQ8_0::kRec);
        for (int64_t i = 0; i < ng * nb; ++i) R::widen(recs + (size_t)i * R::kRec, wide.data() + (size_t)i * RecQ8_0::kRec);
        for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTileTokens)
          token_chunk<RecQ8_0>(wide.data(), nb, rb, re, act + (size_t)t0 * L.stride, L, t0,
                               std::min<int64_t>(kMaxTileTokens, n_tok - t0), y, ldy);
        continue;
      }
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTileTokens)
      token_chunk<R>(recs, nb, rb, re, act + (size_t)t0 * L.stride, L, t0, std::min<int64_t>(kMaxTileTokens, n_tok - t0),
                     y, ldy);
  }
}

}  // namespace

bool packed16_kernels_avx512(DType t, KernelSet* out) {
  GemmFn g = nullptr;
  if (packed_record_type(t) == DType::Q8_0) g = &gemm_packed16<RecQ8_0>;
  else if (t == DType::Q5_0) g = &gemm_packed16<RecQ5_0>;
  else return false;
  if (!kernels_avx512(t, out)) return false;  // the AVX-512 quantizer: u = q + 128
  out->gemm = g;
  return true;
}

}  // namespace dspark::kernels::cpu
