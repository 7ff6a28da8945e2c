// Shared SIMD kernel templates, included by kernels_avx2.cpp and kernels_avx512.cpp only.
// The includer defines DSPARK_ISA_NS (a distinct namespace per ISA, so the two instantiations never
// merge at link time) and, inside it, before including:
//   constexpr bool kBiasedAct;            // activation qs stored as q + 128 (uint8)
//   struct Prep; Prep prep(__m256i w);    // per-chunk prepared signed int8 weights [32]
//   __m256i dot(const Prep&, __m256i a);  // int32 [8]: lane i = sum of bytes 4i..4i+3 of w*a
//
// Weight types are "decoders" that turn one block into 32-element int8 chunks plus scales. The
// quantized kernel (qrows8) keeps one f32 lane per weight row (8 rows per tile): each block of 8
// rows is decoded once and reused for every token, the int32 chunk sums of the 8 rows are
// transpose-reduced to one vector of 8 exact block sums, and the f32 accumulation follows the
// canonical batch-invariant order of cpu.h. Float weights use ftile (NR rows x NT tokens).
#pragma once
#ifndef DSPARK_ISA_NS
#error "define DSPARK_ISA_NS before including gemm_impl.h"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu.h"
#include "kernels/quant_blocks.h"

namespace dspark::kernels::cpu::DSPARK_ISA_NS {

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline float round_f16(float v) { return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT)); }
inline __m256i loadu256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// 16 bytes of 4-bit pairs -> 32 bytes: low nibbles (elements 0..15) then high nibbles (16..31).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}
// u32 bit e -> byte e = 0xFF / 0x00.
inline __m256i bits32(const uint8_t* qh) {
  uint32_t x;
  std::memcpy(&x, qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// ---- weight decoders ---------------------------------------------------------------------------
// Each: kElems/kBytes per block, kChunks 32-element chunks, kAct activation kind, kKind (the
// canonical formula, cpu.h), begin(block, St&), chunk(St, c) -> int8 weights [32], and
//   legacy (kLegacy / kLegacyMin): d(St) weight scale (f32 of the f16), m(St) min (kLegacyMin);
//   K-quants: isc(St, c) int32 [8] sub-block scale of each lane of chunk c as int16 in the low half
//   of the lane, high half zero (for vpmaddwd), d(St) super-block
//   scale; kK4 also m(St) = dmin and mins(St, int16_t[8]).

enum class QKind { kLegacy, kLegacyMin, kK4, kK6 };

struct DecQ8_0 {
  static constexpr int kElems = 32, kBytes = 34, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  static constexpr QKind kKind = QKind::kLegacy;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int) { return loadu256(s.p + 2); }
  static float d(const St& s) { return s.d; }
};

struct DecQ4_0 {
  static constexpr int kElems = 32, kBytes = 18, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  static constexpr QKind kKind = QKind::kLegacy;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int) { return _mm256_sub_epi8(nibbles32(s.p + 2), _mm256_set1_epi8(8)); }
  static float d(const St& s) { return s.d; }
};

struct DecQ5_0 {
  static constexpr int kElems = 32, kBytes = 22, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  static constexpr QKind kKind = QKind::kLegacy;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int) {
    const __m256i nib = nibbles32(s.p + 6);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    uint32_t qh;
    std::memcpy(&qh, s.p + 2, 4);  // bit set: w = nib; clear: w = nib - 16 = nib | 0xF0
    return _mm256_mask_blend_epi8((__mmask32)qh, _mm256_or_si256(nib, _mm256_set1_epi8((char)0xF0)), nib);
#else
    return _mm256_or_si256(nib, _mm256_andnot_si256(bits32(s.p + 2), _mm256_set1_epi8((char)0xF0)));
#endif
  }
  static float d(const St& s) { return s.d; }
};

struct DecQ4_1 {
  static constexpr int kElems = 32, kBytes = 20, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_1;
  static constexpr QKind kKind = QKind::kLegacyMin;
  struct St { const uint8_t* p; float d, m; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); s.m = h2f(b + 2); }
  static __m256i chunk(const St& s, int) { return nibbles32(s.p + 4); }
  static float d(const St& s) { return s.d; }
  static float m(const St& s) { return s.m; }
};

struct DecQ5_1 {
  static constexpr int kElems = 32, kBytes = 24, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_1;
  static constexpr QKind kKind = QKind::kLegacyMin;
  struct St { const uint8_t* p; float d, m; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); s.m = h2f(b + 2); }
  static __m256i chunk(const St& s, int) {
    return _mm256_or_si256(nibbles32(s.p + 8), _mm256_and_si256(bits32(s.p + 4), _mm256_set1_epi8(0x10)));
  }
  static float d(const St& s) { return s.d; }
  static float m(const St& s) { return s.m; }
};

// Q4_K / Q5_K shared state: super-block scales and the 6-bit sub-block scales / mins.
struct StK {
  const uint8_t* p;
  float d, dmin;
  int32_t sc[8];
  int16_t m[8];
};
inline void begin_k45(const uint8_t* b, StK& s) {
  s.p = b;
  s.d = h2f(b);
  s.dmin = h2f(b + 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, b + 4, &sc, &m);
    s.sc[j] = sc;
    s.m[j] = m;
  }
}
inline __m256i k4_nibbles(const uint8_t* qs, int c) {
  const __m256i raw = loadu256(qs + 32 * (c >> 1));
  return _mm256_and_si256((c & 1) ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
}

struct DecQ4_K {
  static constexpr int kElems = 256, kBytes = 144, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  static constexpr QKind kKind = QKind::kK4;
  using St = StK;
  static void begin(const uint8_t* b, St& s) { begin_k45(b, s); }
  static __m256i chunk(const St& s, int c) { return k4_nibbles(s.p + 16, c); }
  static __m256i isc(const St& s, int c) { return _mm256_set1_epi32(s.sc[c]); }
  static float d(const St& s) { return s.d; }
  static float m(const St& s) { return s.dmin; }
};

struct DecQ5_K {
  static constexpr int kElems = 256, kBytes = 176, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  static constexpr QKind kKind = QKind::kK4;
  using St = StK;
  static void begin(const uint8_t* b, St& s) { begin_k45(b, s); }
  static __m256i chunk(const St& s, int c) {
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(loadu256(s.p + 16), c), _mm256_set1_epi8(1));
    return _mm256_or_si256(k4_nibbles(s.p + 48, c), _mm256_slli_epi16(hb, 4));
  }
  static __m256i isc(const St& s, int c) { return _mm256_set1_epi32(s.sc[c]); }
  static float d(const St& s) { return s.d; }
  static float m(const St& s) { return s.dmin; }
};

struct DecQ6_K {
  static constexpr int kElems = 256, kBytes = 210, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  static constexpr QKind kKind = QKind::kK6;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b + 208); }
  static __m256i chunk(const St& s, int c) {
    const int h = c >> 2, g = c & 3;
    const __m256i lq = loadu256(s.p + 64 * h + 32 * (g & 1));
    const __m256i lo = _mm256_and_si256(g < 2 ? lq : _mm256_srli_epi16(lq, 4), _mm256_set1_epi8(0x0F));
    const __m256i hq = _mm256_and_si256(_mm256_srli_epi16(loadu256(s.p + 128 + 32 * h), 2 * g), _mm256_set1_epi8(3));
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hq, 4)), _mm256_set1_epi8(32));
  }
  // Lanes 0..3 hold elements 0..15 of the chunk (sub-block 2c), lanes 4..7 elements 16..31.
  static __m256i isc(const St& s, int c) {
    const auto* sc = reinterpret_cast<const int8_t*>(s.p + 192);
    return _mm256_setr_m128i(_mm_set1_epi32((uint16_t)sc[2 * c]), _mm_set1_epi32((uint16_t)sc[2 * c + 1]));
  }
  static float d(const St& s) { return s.d; }
};

// ---- canonical quantized kernel: lanes = 8 weight rows, one token at a time ---------------------

// Lane i of the result = sum of the 8 lanes of v[i] (exact int32; order irrelevant).
inline __m256i reduce8x8(const __m256i* v) {
  const __m256i a01 = _mm256_hadd_epi32(v[0], v[1]), a23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i a45 = _mm256_hadd_epi32(v[4], v[5]), a67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

constexpr int kLanes = 8;

// acc + v * sc per int32 lane, for |v| < 2^15 (a lane of dot(): 4 products, at most 4 * 32 * 127)
// and sc in the low 16 bits of its lane, high 16 bits zero (K-quant sub-block scales).
inline __m256i madd_acc(__m256i acc, __m256i v, __m256i sc) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, v, sc);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(v, sc));
#endif
}

// acc[t * 8 + i] (f32, caller-initialized to 0) += the canonical dot of row w[i] with token t, for
// the nb blocks; tokens t < n_tok at act + t * astride.
// Per-block f32 step of the canonical order for one token: acc lanes = 8 rows.
template <class D>
struct BlockScales {
  __m256 dwv, mwv;
  __m256i mp[4];  // kK4: lane i = m_2k | m_2k+1 << 16 of row i
  void init(const typename D::St* st) {
    constexpr QKind K = D::kKind;
    alignas(32) float dw[kLanes], mw[kLanes];
    for (int i = 0; i < kLanes; ++i) dw[i] = D::d(st[i]);
    dwv = _mm256_load_ps(dw);
    mwv = _mm256_setzero_ps();
    if constexpr (K == QKind::kLegacyMin || K == QKind::kK4) {
      for (int i = 0; i < kLanes; ++i) mw[i] = D::m(st[i]);
      mwv = _mm256_load_ps(mw);
    }
    if constexpr (K == QKind::kK4) {
      alignas(32) int32_t mt[4][kLanes];
      for (int k = 0; k < 4; ++k)
        for (int i = 0; i < kLanes; ++i)
          mt[k][i] = (int32_t)((uint32_t)(uint16_t)st[i].m[2 * k] | ((uint32_t)(uint16_t)st[i].m[2 * k + 1] << 16));
      for (int k = 0; k < 4; ++k) mp[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(mt[k]));
    }
  }
  // Legacy formats (kLegacy / kLegacyMin) keep d (f16) at byte 0 of every block and m (f16) at
  // byte 2: block b of the 8 rows w[i] -> one 32-bit load per row, then a vector f16 -> f32
  // conversion (exact, so the same values as D::d / D::m; the decode path's per-block scalar
  // conversions were a large share of its time on thin matrices).
  void init_legacy(const uint8_t* const* w, int64_t b) {
    constexpr QKind K = D::kKind;
    static_assert(K == QKind::kLegacy || K == QKind::kLegacyMin);
    alignas(32) uint32_t dm[kLanes];
    for (int i = 0; i < kLanes; ++i) std::memcpy(&dm[i], w[i] + b * D::kBytes, 4);
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(dm));
    const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    dwv = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
    mwv = _mm256_setzero_ps();
    if constexpr (K == QKind::kLegacyMin) {
      const __m256i hi = _mm256_srli_epi32(v, 16);
      mwv = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
    }
  }
  // acc (8 rows, one token) after block b, given the rows' exact block sums isum.
  __m256 step(__m256 A, __m256i isum, const uint8_t* a, const ActLayout& L, int64_t b) const {
    constexpr QKind K = D::kKind;
    const float da = reinterpret_cast<const float*>(a + L.off_d)[b];
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dwv, _mm256_set1_ps(da)), A);
    if constexpr (K == QKind::kLegacyMin) {
      const float s = reinterpret_cast<const float*>(a + L.off_s)[b];
      A = _mm256_fmadd_ps(mwv, _mm256_set1_ps(s), A);
    }
    if constexpr (K == QKind::kK4) {
      const auto* bs = reinterpret_cast<const int16_t*>(a + L.off_bs) + 16 * b;
      __m256i m = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const int s0 = bs[4 * k] + bs[4 * k + 1], s1 = bs[4 * k + 2] + bs[4 * k + 3];
        const int32_t pair = (int32_t)((uint32_t)(uint16_t)s0 | ((uint32_t)(uint16_t)s1 << 16));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mp[k], _mm256_set1_epi32(pair)));
      }
      A = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(mwv, _mm256_set1_ps(da)), A);
    }
    return A;
  }
};

// acc[t * 8 + i] (f32, caller-initialized to 0) += the canonical dot of row w[i] with token t, for
// the nb blocks; tokens t < n_tok at act + t * astride.
template <class D>
inline void qrows8(const uint8_t* const* w, int64_t nb, const uint8_t* act, size_t astride, const ActLayout& L,
                   int64_t n_tok, float* acc) {
  constexpr QKind K = D::kKind;
  constexpr bool kIsK = K == QKind::kK4 || K == QKind::kK6;
  if (n_tok == 1) {  // decode: weights used once, no decoded copy
    __m256 A = _mm256_loadu_ps(acc);
    for (int64_t b = 0; b < nb; ++b) {
      typename D::St st[kLanes];
      for (int i = 0; i < kLanes; ++i) D::begin(w[i] + b * D::kBytes, st[i]);
      __m256i P[kLanes];
      for (int i = 0; i < kLanes; ++i) P[i] = _mm256_setzero_si256();
      for (int c = 0; c < D::kChunks; ++c) {
        const __m256i av = loadu256(act + b * D::kElems + 32 * c);
        for (int i = 0; i < kLanes; ++i) {
          const __m256i v = dot(prep(D::chunk(st[i], c)), av);
          if constexpr (kIsK) P[i] = c == 0 ? _mm256_madd_epi16(v, D::isc(st[i], c)) : madd_acc(P[i], v, D::isc(st[i], c));
          else P[i] = v;
        }
      }
      BlockScales<D> bsc;
      if constexpr (K == QKind::kLegacy || K == QKind::kLegacyMin) bsc.init_legacy(w, b);
      else bsc.init(st);
      A = bsc.step(A, reduce8x8(P), act, L, b);
    }
    _mm256_storeu_ps(acc, A);
    return;
  }
  for (int64_t b = 0; b < nb; ++b) {
    typename D::St st[kLanes];
    for (int i = 0; i < kLanes; ++i) D::begin(w[i] + b * D::kBytes, st[i]);
    Prep p[D::kChunks][kLanes];
    __m256i sc[kIsK ? D::kChunks : 1][kLanes];
    for (int c = 0; c < D::kChunks; ++c)
      for (int i = 0; i < kLanes; ++i) {
        p[c][i] = prep(D::chunk(st[i], c));
        if constexpr (kIsK) sc[c][i] = D::isc(st[i], c);
      }
    BlockScales<D> bsc;
    bsc.init(st);
    for (int64_t t = 0; t < n_tok; ++t) {
      const uint8_t* a = act + (size_t)t * astride;
      __m256i P[kLanes];
      for (int i = 0; i < kLanes; ++i) P[i] = _mm256_setzero_si256();
      for (int c = 0; c < D::kChunks; ++c) {
        const __m256i av = loadu256(a + b * D::kElems + 32 * c);
        for (int i = 0; i < kLanes; ++i) {
          const __m256i v = dot(p[c][i], av);
          if constexpr (kIsK) P[i] = c == 0 ? _mm256_madd_epi16(v, sc[c][i]) : madd_acc(P[i], v, sc[c][i]);
          else P[i] = v;
        }
      }
      float* at = acc + t * kLanes;
      _mm256_storeu_ps(at, bsc.step(_mm256_loadu_ps(at), reduce8x8(P), a, L, b));
    }
  }
}

// ---- float weights (F32 / F16 / BF16) x f32 activations ----------------------------------------

struct DecF32 {
  static constexpr int kSize = 4;
  static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) { float v; std::memcpy(&v, p, 4); return v; }
};
struct DecF16 {
  static constexpr int kSize = 2;
  static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const uint8_t* p) { return h2f(p); }
};
struct DecBF16 {
  static constexpr int kSize = 2;
  static __m256 load8(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

template <class D, int NR, int NT>
inline void ftile(const uint8_t* const* w, int64_t n, const uint8_t* const* a, const ActLayout&, float (*out)[4]) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = D::load8(w[r] + i * D::kSize);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(reinterpret_cast<const float*>(a[t]) + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      float s = hsum8(acc[r][t]);
      for (int64_t k = i; k < n; ++k) s = std::fma(D::load1(w[r] + k * D::kSize), reinterpret_cast<const float*>(a[t])[k], s);
      out[r][t] = s;
    }
}

// ---- drivers: rows [r0, r1) x all tokens -------------------------------------------------------

// Quantized weights: 8-row tiles (a partial tile repeats its last row in the unused lanes), tokens
// in groups of kTokGroup so their activations stay in cache while the rows of an L2-sized row group
// are decoded once per group. Every (row, token) result is the canonical dot whatever the tiling.
template <class D>
void gemm_q(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
            float* y, int64_t ldy) {
  constexpr int64_t kTokGroup = 16;
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const int64_t nb = wm.n_cols / D::kElems;
  alignas(32) float acc[kTokGroup * kLanes];
  const uint8_t* w[kLanes];
  const int64_t rb_rows =
      n_tok <= kTokGroup ? r1 - r0
                         : std::max<int64_t>(kLanes, (int64_t)(262144 / std::max<size_t>(wm.row_stride, 1)) / kLanes * kLanes);
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokGroup) {
      const int64_t nt = std::min(kTokGroup, n_tok - t0);
      for (int64_t r = rb; r < re; r += kLanes) {
        const int nr = (int)std::min<int64_t>(kLanes, re - r);
        for (int i = 0; i < kLanes; ++i) w[i] = base + (r + std::min(i, nr - 1)) * wm.row_stride;
        std::memset(acc, 0, sizeof(float) * (size_t)(nt * kLanes));
        qrows8<D>(w, nb, act + (size_t)t0 * L.stride, L.stride, L, nt, acc);
        for (int64_t t = 0; t < nt; ++t)
          for (int i = 0; i < nr; ++i) y[(t0 + t) * ldy + r + i] = acc[t * kLanes + i];
      }
    }
  }
}

template <class D, int NR, int NT>
inline void run_ftile(const uint8_t* const* w, int64_t len, const uint8_t* const* a, float (*out)[4]) {
  ftile<D, NR, NT>(w, len, a, ActLayout{}, out);
}

template <class D, int NR>
inline void ftile_nt(int nt, const uint8_t* const* w, int64_t len, const uint8_t* const* a, float (*out)[4]) {
  switch (nt) {
    case 1: run_ftile<D, NR, 1>(w, len, a, out); break;
    case 2: run_ftile<D, NR, 2>(w, len, a, out); break;
    case 3: run_ftile<D, NR, 3>(w, len, a, out); break;
    default: run_ftile<D, NR, 4>(w, len, a, out); break;
  }
}

// Float weights: tiles of kMaxNR rows x up to 4 tokens (kDecodeNR rows when n_tok == 1). ftile's
// per-(row, token) arithmetic does not depend on the tile shape, so results are batch-invariant.
template <class D, int kMaxNR, int kDecodeNR>
void gemm_f(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
            float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const int64_t len = wm.n_cols;
  float out[4][4];
  const uint8_t* w[4];
  const uint8_t* a[4];
  if (n_tok == 1) {
    a[0] = act;
    int64_t r = r0;
    for (; r + kDecodeNR <= r1; r += kDecodeNR) {
      for (int i = 0; i < kDecodeNR; ++i) w[i] = base + (r + i) * wm.row_stride;
      run_ftile<D, kDecodeNR, 1>(w, len, a, out);
      for (int i = 0; i < kDecodeNR; ++i) y[r + i] = out[i][0];
    }
    for (; r < r1; ++r) {
      w[0] = base + r * wm.row_stride;
      run_ftile<D, 1, 1>(w, len, a, out);
      y[r] = out[0][0];
    }
    return;
  }
  const int64_t rb_rows = std::max<int64_t>(kMaxNR, (int64_t)(32768 / std::max<size_t>(wm.row_stride, 1)) / kMaxNR * kMaxNR);
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
      const int nt = (int)std::min<int64_t>(4, n_tok - t0);
      for (int t = 0; t < nt; ++t) a[t] = act + (t0 + t) * L.stride;
      for (int64_t r = rb; r < re; r += kMaxNR) {
        const int nr = (int)std::min<int64_t>(kMaxNR, re - r);
        for (int i = 0; i < nr; ++i) w[i] = base + (r + i) * wm.row_stride;
        if (nr == kMaxNR) ftile_nt<D, kMaxNR>(nt, w, len, a, out);
        else if constexpr (kMaxNR > 1) {
          for (int i = 0; i < nr; ++i) ftile_nt<D, 1>(nt, w + i, len, a, out + i);
        }
        for (int i = 0; i < nr; ++i)
          for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r + i] = out[i][t];
      }
    }
  }
}

// ---- activation quantizers ---------------------------------------------------------------------

// 4 x int32[8] (32 values in order) -> 32 int8 in order.
inline __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i a = _mm256_packs_epi32(q0, q1), b = _mm256_packs_epi32(q2, q3);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), v); }
inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Q8_0 / Q8_1 as ggml's AVX2 quantizer: q = round_half_even(x * 127 / amax); d = f16(amax / 127).
inline void quantize_q8_32(const float* x, uint8_t* dst, const ActLayout& L) {
  float* d = reinterpret_cast<float*>(dst + L.off_d);
  float* s1 = L.kind == ActKind::kQ8_1 ? reinterpret_cast<float*>(dst + L.off_s) : nullptr;
  for (int64_t b = 0; b < L.n_cols / 32; ++b) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
    const float amax = hmax8(_mm256_max_ps(_mm256_max_ps(abs8(v[0]), abs8(v[1])), _mm256_max_ps(abs8(v[2]), abs8(v[3]))));
    const float df = amax / 127.f;
    d[b] = round_f16(df);
    const __m256 id = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k)
      q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (s1) {
      const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
      s1[b] = round_f16(df * (float)sum);
    }
    __m256i packed = pack32(q[0], q[1], q[2], q[3]);
    if constexpr (kBiasedAct) packed = _mm256_xor_si256(packed, _mm256_set1_epi8((char)0x80));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * b), packed);
  }
}

// Q8_K, bit-exact with quantize_row_q8_K_ref (cvtps rounds half to even like nearest_int).
inline void quantize_q8_K(const float* x, uint8_t* dst, const ActLayout& L) {
  float* d = reinterpret_cast<float*>(dst + L.off_d);
  auto* bs = reinterpret_cast<int16_t*>(dst + L.off_bs);
  for (int64_t b = 0; b < L.n_cols / 256; ++b, x += 256) {
    __m256 m = _mm256_setzero_ps(), vmax = _mm256_set1_ps(-INFINITY), vmin = _mm256_set1_ps(INFINITY);
    for (int k = 0; k < 256; k += 8) {
      const __m256 v = _mm256_loadu_ps(x + k);
      m = _mm256_max_ps(m, abs8(v));
      vmax = _mm256_max_ps(vmax, v);
      vmin = _mm256_min_ps(vmin, v);
    }
    const float amax = hmax8(m);
    uint8_t* q8 = dst + 256 * b;
    if (!(amax > 0.f)) {
      std::memset(q8, kBiasedAct ? 0x80 : 0, 256);
      std::memset(bs + 16 * b, 0, 32);
      d[b] = 0.f;
      continue;
    }
    // The signed value of the first element with |x| == amax (ggml's reference picks that one).
    const float hi = hmax8(vmax), lo = -hmax8(_mm256_sub_ps(_mm256_setzero_ps(), vmin));
    float max;
    if (hi == amax && lo != -amax) max = amax;
    else if (lo == -amax && hi != amax) max = -amax;
    else {  // both signs reach amax: scan for the first
      max = 0.f;
      for (int k = 0; k < 256; ++k)
        if (x[k] == amax || x[k] == -amax) { max = x[k]; break; }
    }
    const float iscale = -127.f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    for (int c = 0; c < 8; ++c) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k)
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * k), is)),
                                _mm256_set1_epi32(127));
      bs[16 * b + 2 * c] = (int16_t)hsum_i32(_mm256_add_epi32(q[0], q[1]));
      bs[16 * b + 2 * c + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q[2], q[3]));
      __m256i packed = pack32(q[0], q[1], q[2], q[3]);
      if constexpr (kBiasedAct) packed = _mm256_xor_si256(packed, _mm256_set1_epi8((char)0x80));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q8 + 32 * c), packed);
    }
    d[b] = 1.f / iscale;
  }
}

// ---- kernel table --------------------------------------------------------------------------------

template <int kMaxNR, int kDecodeNR>
bool fill_kernels(DType t, KernelSet* out) {
  auto q = [&](ActKind kind, GemmFn g) {
    out->act = kind;
    out->quantize = kind == ActKind::kQ8_K ? &quantize_q8_K : &quantize_q8_32;
    out->gemm = g;
    return true;
  };
  auto f = [&](GemmFn g) {
    out->act = ActKind::kF32;
    out->quantize = nullptr;
    out->gemm = g;
    return true;
  };
  switch (t) {
    case DType::Q8_0: return q(ActKind::kQ8_0, &gemm_q<DecQ8_0>);
    case DType::Q4_0: return q(ActKind::kQ8_0, &gemm_q<DecQ4_0>);
    case DType::Q5_0: return q(ActKind::kQ8_0, &gemm_q<DecQ5_0>);
    case DType::Q4_1: return q(ActKind::kQ8_1, &gemm_q<DecQ4_1>);
    case DType::Q5_1: return q(ActKind::kQ8_1, &gemm_q<DecQ5_1>);
    case DType::Q4_K: return q(ActKind::kQ8_K, &gemm_q<DecQ4_K>);
    case DType::Q5_K: return q(ActKind::kQ8_K, &gemm_q<DecQ5_K>);
    case DType::Q6_K: return q(ActKind::kQ8_K, &gemm_q<DecQ6_K>);
    case DType::F32: return f(&gemm_f<DecF32, kMaxNR, kDecodeNR>);
    case DType::F16: return f(&gemm_f<DecF16, kMaxNR, kDecodeNR>);
    case DType::BF16: return f(&gemm_f<DecBF16, kMaxNR, kDecodeNR>);
    default: return false;
  }
}

}  // namespace dspark::kernels::cpu::DSPARK_ISA_NS
