// Shared SIMD kernel templates, included by kernels_avx2.cpp and kernels_avx512.cpp only.
// The includer defines DSPARK_ISA_NS (a distinct namespace per ISA, so the two instantiations never
// merge at link time) and, inside it, before including:
//   constexpr bool kBiasedAct;            // activation qs stored as q + 128 (uint8)
//   struct Prep; Prep prep(__m256i w);    // per-chunk prepared signed int8 weights [32]
//   __m256i dot(const Prep&, __m256i a);  // int32 [8]: lane i = sum of bytes 4i..4i+3 of w*a
//
// Weight types are "decoders" that turn one block into 32-element int8 chunks plus per-lane f32
// weight scales; one generic tile computes NR rows x NT tokens, so each weight chunk is decoded
// once and reused for NT tokens, and each activation chunk is reused for NR rows.
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
// Each: kElems/kBytes per block, kChunks 32-element chunks, kAct activation kind,
// begin(block, St&), chunk(St, c, sw) -> int8 weights (sw = per-lane f32 weight scale),
// extra(St, act_row, L, b, acc) adds terms outside the int8 product (mins / offsets).

struct DecQ8_0 {
  static constexpr int kElems = 32, kBytes = 34, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int, __m256& sw) { sw = _mm256_set1_ps(s.d); return loadu256(s.p + 2); }
  static __m256 extra(const St&, const uint8_t*, const ActLayout&, int64_t, __m256 acc) { return acc; }
};

struct DecQ4_0 {
  static constexpr int kElems = 32, kBytes = 18, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int, __m256& sw) {
    sw = _mm256_set1_ps(s.d);
    return _mm256_sub_epi8(nibbles32(s.p + 2), _mm256_set1_epi8(8));
  }
  static __m256 extra(const St&, const uint8_t*, const ActLayout&, int64_t, __m256 acc) { return acc; }
};

struct DecQ5_0 {
  static constexpr int kElems = 32, kBytes = 22, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_0;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); }
  static __m256i chunk(const St& s, int, __m256& sw) {
    sw = _mm256_set1_ps(s.d);
    const __m256i nib = nibbles32(s.p + 6);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    uint32_t qh;
    std::memcpy(&qh, s.p + 2, 4);  // bit set: w = nib; clear: w = nib - 16 = nib | 0xF0
    return _mm256_mask_blend_epi8((__mmask32)qh, _mm256_or_si256(nib, _mm256_set1_epi8((char)0xF0)), nib);
#else
    return _mm256_or_si256(nib, _mm256_andnot_si256(bits32(s.p + 2), _mm256_set1_epi8((char)0xF0)));
#endif
  }
  static __m256 extra(const St&, const uint8_t*, const ActLayout&, int64_t, __m256 acc) { return acc; }
};

// Q4_1 / Q5_1: + m_w * s_a per block (s_a stored as s / 8 so it can be spread over 8 lanes).
inline __m256 extra_m(float m, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
  const float s8 = reinterpret_cast<const float*>(a + L.off_s)[b];
  return _mm256_fmadd_ps(_mm256_set1_ps(m), _mm256_set1_ps(s8), acc);
}

struct DecQ4_1 {
  static constexpr int kElems = 32, kBytes = 20, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_1;
  struct St { const uint8_t* p; float d, m; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); s.m = h2f(b + 2); }
  static __m256i chunk(const St& s, int, __m256& sw) { sw = _mm256_set1_ps(s.d); return nibbles32(s.p + 4); }
  static __m256 extra(const St& s, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
    return extra_m(s.m, a, L, b, acc);
  }
};

struct DecQ5_1 {
  static constexpr int kElems = 32, kBytes = 24, kChunks = 1;
  static constexpr ActKind kAct = ActKind::kQ8_1;
  struct St { const uint8_t* p; float d, m; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b); s.m = h2f(b + 2); }
  static __m256i chunk(const St& s, int, __m256& sw) {
    sw = _mm256_set1_ps(s.d);
    return _mm256_or_si256(nibbles32(s.p + 8), _mm256_and_si256(bits32(s.p + 4), _mm256_set1_epi8(0x10)));
  }
  static __m256 extra(const St& s, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
    return extra_m(s.m, a, L, b, acc);
  }
};

// Q4_K / Q5_K shared state: sub-block scales (f32, times d) and mins (int16 pairs for bsums).
struct StK {
  const uint8_t* p;
  float dmin;
  float sc[8];
  __m256i mins16;  // m0 m0 m1 m1 ... m7 m7
};
inline void begin_k45(const uint8_t* b, StK& s) {
  s.p = b;
  const float d = h2f(b);
  s.dmin = h2f(b + 2);
  alignas(32) int16_t m16[16];
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, b + 4, &sc, &m);
    s.sc[j] = d * (float)sc;
    m16[2 * j] = m16[2 * j + 1] = m;
  }
  s.mins16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(m16));
}
// - dmin * d_a * sum_j m_j * (bsums[2j] + bsums[2j+1]), spread over lanes.
inline __m256 extra_k45(const StK& s, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
  const __m256i bs = loadu256(a + L.off_bs + (size_t)b * 32);
  const float da = reinterpret_cast<const float*>(a + L.off_d)[b];
  const __m256 mm = _mm256_cvtepi32_ps(_mm256_madd_epi16(s.mins16, bs));
  return _mm256_fnmadd_ps(mm, _mm256_set1_ps(s.dmin * da), acc);
}
inline __m256i k4_nibbles(const uint8_t* qs, int c) {
  const __m256i raw = loadu256(qs + 32 * (c >> 1));
  return _mm256_and_si256((c & 1) ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
}

struct DecQ4_K {
  static constexpr int kElems = 256, kBytes = 144, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  using St = StK;
  static void begin(const uint8_t* b, St& s) { begin_k45(b, s); }
  static __m256i chunk(const St& s, int c, __m256& sw) {
    sw = _mm256_set1_ps(s.sc[c]);
    return k4_nibbles(s.p + 16, c);
  }
  static __m256 extra(const St& s, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
    return extra_k45(s, a, L, b, acc);
  }
};

struct DecQ5_K {
  static constexpr int kElems = 256, kBytes = 176, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  using St = StK;
  static void begin(const uint8_t* b, St& s) { begin_k45(b, s); }
  static __m256i chunk(const St& s, int c, __m256& sw) {
    sw = _mm256_set1_ps(s.sc[c]);
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(loadu256(s.p + 16), c), _mm256_set1_epi8(1));
    return _mm256_or_si256(k4_nibbles(s.p + 48, c), _mm256_slli_epi16(hb, 4));
  }
  static __m256 extra(const St& s, const uint8_t* a, const ActLayout& L, int64_t b, __m256 acc) {
    return extra_k45(s, a, L, b, acc);
  }
};

struct DecQ6_K {
  static constexpr int kElems = 256, kBytes = 210, kChunks = 8;
  static constexpr ActKind kAct = ActKind::kQ8_K;
  struct St { const uint8_t* p; float d; };
  static void begin(const uint8_t* b, St& s) { s.p = b; s.d = h2f(b + 208); }
  static __m256i chunk(const St& s, int c, __m256& sw) {
    const int h = c >> 2, g = c & 3;
    const auto* sc = reinterpret_cast<const int8_t*>(s.p + 192);
    sw = _mm256_setr_m128(_mm_set1_ps(s.d * (float)sc[2 * c]), _mm_set1_ps(s.d * (float)sc[2 * c + 1]));
    const __m256i lq = loadu256(s.p + 64 * h + 32 * (g & 1));
    const __m256i lo = _mm256_and_si256(g < 2 ? lq : _mm256_srli_epi16(lq, 4), _mm256_set1_epi8(0x0F));
    const __m256i hq = _mm256_and_si256(_mm256_srli_epi16(loadu256(s.p + 128 + 32 * h), 2 * g), _mm256_set1_epi8(3));
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hq, 4)), _mm256_set1_epi8(32));
  }
  static __m256 extra(const St&, const uint8_t*, const ActLayout&, int64_t, __m256 acc) { return acc; }
};

// ---- generic quantized tile ------------------------------------------------------------------

// out[r][t] = dot(w[r], a[t]) over nb blocks.
template <class D, int NR, int NT>
inline void qtile(const uint8_t* const* w, int64_t nb, const uint8_t* const* a, const ActLayout& L,
                  float (*out)[4]) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    typename D::St st[NR];
    for (int r = 0; r < NR; ++r) D::begin(w[r] + b * D::kBytes, st[r]);
    __m256 da[NT];
    for (int t = 0; t < NT; ++t) da[t] = _mm256_set1_ps(reinterpret_cast<const float*>(a[t] + L.off_d)[b]);
    for (int c = 0; c < D::kChunks; ++c) {
      Prep p[NR];
      __m256 sw[NR];
      for (int r = 0; r < NR; ++r) p[r] = prep(D::chunk(st[r], c, sw[r]));
      for (int t = 0; t < NT; ++t) {
        const __m256i av = loadu256(a[t] + b * D::kElems + 32 * c);
        for (int r = 0; r < NR; ++r)
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot(p[r], av)), _mm256_mul_ps(sw[r], da[t]), acc[r][t]);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = D::extra(st[r], a[t], L, b, acc[r][t]);
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) out[r][t] = hsum8(acc[r][t]);
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
      for (int64_t k = i; k < n; ++k) s += D::load1(w[r] + k * D::kSize) * reinterpret_cast<const float*>(a[t])[k];
      out[r][t] = s;
    }
}

// ---- driver: rows [r0, r1) x all tokens --------------------------------------------------------

template <class D, bool kQuant, int NR, int NT>
inline void run_tile(const uint8_t* const* w, int64_t len, const uint8_t* const* a, const ActLayout& L, float (*out)[4]) {
  if constexpr (kQuant) qtile<D, NR, NT>(w, len, a, L, out);
  else ftile<D, NR, NT>(w, len, a, L, out);
}

template <class D, bool kQuant, int NR>
inline void tile_nt(int nt, const uint8_t* const* w, int64_t len, const uint8_t* const* a, const ActLayout& L,
                    float (*out)[4]) {
  switch (nt) {
    case 1: run_tile<D, kQuant, NR, 1>(w, len, a, L, out); break;
    case 2: run_tile<D, kQuant, NR, 2>(w, len, a, L, out); break;
    case 3: run_tile<D, kQuant, NR, 3>(w, len, a, L, out); break;
    default: run_tile<D, kQuant, NR, 4>(w, len, a, L, out); break;
  }
}

// kMaxNR rows per tile when n_tok > 1 (tiles of up to 4 tokens), kDecodeNR rows when n_tok == 1.
template <class D, bool kQuant, int kMaxNR, int kDecodeNR>
void gemm_rows(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
               float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(wm.data);
  int64_t len;  // blocks (quantized) or elements (float)
  if constexpr (kQuant) len = wm.n_cols / D::kElems;
  else len = wm.n_cols;
  float out[4][4];
  const uint8_t* w[4];
  const uint8_t* a[4];
  if (n_tok == 1) {
    a[0] = act;
    int64_t r = r0;
    for (; r + kDecodeNR <= r1; r += kDecodeNR) {
      for (int i = 0; i < kDecodeNR; ++i) w[i] = base + (r + i) * wm.row_stride;
      run_tile<D, kQuant, kDecodeNR, 1>(w, len, a, L, out);
      for (int i = 0; i < kDecodeNR; ++i) y[r + i] = out[i][0];
    }
    for (; r < r1; ++r) {
      w[0] = base + r * wm.row_stride;
      run_tile<D, kQuant, 1, 1>(w, len, a, L, out);
      y[r] = out[0][0];
    }
    return;
  }
  // Rows in groups that stay in L1 / L2 while all token tiles stream past them.
  const int64_t rb_rows = std::max<int64_t>(kMaxNR, (int64_t)(32768 / std::max<size_t>(wm.row_stride, 1)) / kMaxNR * kMaxNR);
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
      const int nt = (int)std::min<int64_t>(4, n_tok - t0);
      for (int t = 0; t < nt; ++t) a[t] = act + (t0 + t) * L.stride;
      for (int64_t r = rb; r < re; r += kMaxNR) {
        const int nr = (int)std::min<int64_t>(kMaxNR, re - r);
        for (int i = 0; i < nr; ++i) w[i] = base + (r + i) * wm.row_stride;
        if (nr == kMaxNR) tile_nt<D, kQuant, kMaxNR>(nt, w, len, a, L, out);
        else if constexpr (kMaxNR > 1) {
          for (int i = 0; i < nr; ++i) tile_nt<D, kQuant, 1>(nt, w + i, len, a, L, out + i);
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
  float* s8 = L.kind == ActKind::kQ8_1 ? reinterpret_cast<float*>(dst + L.off_s) : nullptr;
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
    if (s8) {
      const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
      s8[b] = round_f16(df * (float)sum) * 0.125f;
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
    case DType::Q8_0: return q(ActKind::kQ8_0, &gemm_rows<DecQ8_0, true, kMaxNR, kDecodeNR>);
    case DType::Q4_0: return q(ActKind::kQ8_0, &gemm_rows<DecQ4_0, true, kMaxNR, kDecodeNR>);
    case DType::Q5_0: return q(ActKind::kQ8_0, &gemm_rows<DecQ5_0, true, kMaxNR, kDecodeNR>);
    case DType::Q4_1: return q(ActKind::kQ8_1, &gemm_rows<DecQ4_1, true, kMaxNR, kDecodeNR>);
    case DType::Q5_1: return q(ActKind::kQ8_1, &gemm_rows<DecQ5_1, true, kMaxNR, kDecodeNR>);
    case DType::Q4_K: return q(ActKind::kQ8_K, &gemm_rows<DecQ4_K, true, kMaxNR, kDecodeNR>);
    case DType::Q5_K: return q(ActKind::kQ8_K, &gemm_rows<DecQ5_K, true, kMaxNR, kDecodeNR>);
    case DType::Q6_K: return q(ActKind::kQ8_K, &gemm_rows<DecQ6_K, true, kMaxNR, kDecodeNR>);
    case DType::F32: return f(&gemm_rows<DecF32, false, kMaxNR, kDecodeNR>);
    case DType::F16: return f(&gemm_rows<DecF16, false, kMaxNR, kDecodeNR>);
    case DType::BF16: return f(&gemm_rows<DecBF16, false, kMaxNR, kDecodeNR>);
    default: return false;
  }
}

}  // namespace dspark::kernels::cpu::DSPARK_ISA_NS
