// AVX2 + FMA kernels: 8 codes per chunk (bits bytes) unpacked with a broadcast + byte shuffle +
// variable shift, turbo levels via vpermps (two tables and a blend for 4-bit codes), 4-token
// tiles; canonical order of qcpu.h with L = 8.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "quant/cpu/qcpu.h"

namespace dspark::quant::cpu {

namespace {

constexpr int kLanes = 8;
constexpr int kTile = 4;

struct Unpack {
  __m256i ctrl, shift, mask;
  int64_t chunk_bytes;
  explicit Unpack(int bits) {
    alignas(32) uint8_t c[32];
    alignas(32) uint32_t s[8];
    for (int k = 0; k < kLanes; ++k) {
      const int bit = k * bits, byte = bit >> 3;  // byte + 1 <= 8: inside the 16-byte lane copy
      c[4 * k] = (uint8_t)byte;
      c[4 * k + 1] = (uint8_t)(byte + 1);
      c[4 * k + 2] = c[4 * k + 3] = 0x80;
      s[k] = (uint32_t)(bit & 7);
    }
    ctrl = _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
    shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(s));
    mask = _mm256_set1_epi32((1 << bits) - 1);
    chunk_bytes = bits;
  }
  __m256i codes(const uint8_t* p) const {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, ctrl), shift), mask);
  }
};

struct Levels {
  __m256 lo, hi;
  bool wide;  // 16 levels
  __m256 lookup(__m256i c) const {
    const __m256 l = _mm256_permutevar8x32_ps(lo, c);
    if (!wide) return l;
    return _mm256_blendv_ps(l, _mm256_permutevar8x32_ps(hi, c), _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
  }
};

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <Method M, int NT>
void tile(const QGemmArgs& a, int64_t i0, int64_t i1, int64_t t0, const Unpack& U, const Levels& L) {
  const QuantMatrix& w = *a.w;
  const int64_t n = w.n_cols, ng = w.n_groups(), cpg = w.spec.group_size / kLanes;
  const float* xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = a.x + (t0 + t) * n;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = a.rows ? a.rows[i] : i;
    const uint8_t* codes = row_codes(w, r);
    const uint16_t* sc = w.scales + r * ng;
    const uint16_t* bs = M == Method::kAffine ? w.biases + r * ng : nullptr;
    __m256 acc[NT];
    float bacc[NT];
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_setzero_ps();
      bacc[t] = 0.0f;
    }
    for (int64_t gi = 0; gi < ng; ++gi) {
      __m256 p[NT];
      for (int t = 0; t < NT; ++t) p[t] = _mm256_setzero_ps();
      for (int64_t c = 0; c < cpg; ++c) {
        const int64_t chunk = gi * cpg + c, e = chunk * kLanes;
        const __m256i ci = U.codes(codes + chunk * U.chunk_bytes);
        const __m256 v = M == Method::kTurbo ? L.lookup(ci) : _mm256_cvtepi32_ps(ci);
        for (int t = 0; t < NT; ++t) p[t] = _mm256_fmadd_ps(v, _mm256_loadu_ps(xt[t] + e), p[t]);
      }
      const __m256 s = _mm256_set1_ps(bf16_to_fp32(sc[gi]));
      for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(p[t], s, acc[t]);
      if constexpr (M == Method::kAffine) {
        const float b = bf16_to_fp32(bs[gi]);
        for (int t = 0; t < NT; ++t) bacc[t] = std::fma(b, a.xsum[(t0 + t) * ng + gi], bacc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.ldy + i] = hsum(acc[t]) + bacc[t];
  }
}

template <Method M>
void qgemm(const QGemmArgs& a, int64_t i0, int64_t i1) {
  const QuantMatrix& w = *a.w;
  const Unpack U(w.spec.bits);
  alignas(32) float lv[16] = {};
  if constexpr (M == Method::kTurbo) std::memcpy(lv, w.turbo->levels.data(), w.turbo->levels.size() * 4);
  const Levels L{_mm256_load_ps(lv), _mm256_load_ps(lv + 8), w.spec.bits > 3};
  int64_t t0 = 0;
  for (; t0 + kTile <= a.n_tok; t0 += kTile) tile<M, kTile>(a, i0, i1, t0, U, L);
  switch (a.n_tok - t0) {
    case 1: tile<M, 1>(a, i0, i1, t0, U, L); break;
    case 2: tile<M, 2>(a, i0, i1, t0, U, L); break;
    case 3: tile<M, 3>(a, i0, i1, t0, U, L); break;
    default: break;
  }
}

}  // namespace

QGemmFn qgemm_avx2(Method m) { return m == Method::kTurbo ? &qgemm<Method::kTurbo> : &qgemm<Method::kAffine>; }

// As fwht_block_avx512 with 8 lanes: stages h = 1, 2, 4 in-register, then whole vectors.
void fwht_block_avx2(float* x, int64_t n) {
  const __m256 m1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
  const __m256 m2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
  const __m256 m4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    v = _mm256_fmadd_ps(v, m1, _mm256_permute_ps(v, 0xB1));
    v = _mm256_fmadd_ps(v, m2, _mm256_permute_ps(v, 0x4E));
    v = _mm256_fmadd_ps(v, m4, _mm256_permute2f128_ps(v, v, 0x01));
    _mm256_storeu_ps(x + i, v);
  }
  for (int64_t h = 8; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; j += 8) {
        const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
        _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
      }
}

}  // namespace dspark::quant::cpu
