// AVX-512 (F+BW) kernels: 16 codes per chunk unpacked with one broadcast + byte shuffle + variable
// shift (any bit width: a code spans at most two bytes of the 2·bits-byte chunk), turbo levels
// looked up with vpermps, 8-token tiles; canonical order of qcpu.h with L = 16.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "quant/cpu/qcpu.h"

namespace dspark::quant::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int kTile = 8;

struct Unpack {
  __m512i ctrl, shift, mask;
  int64_t chunk_bytes;
  explicit Unpack(int bits) {
    alignas(64) uint8_t c[64];
    alignas(64) uint32_t s[16];
    for (int k = 0; k < kLanes; ++k) {
      const int bit = k * bits, byte = bit >> 3;
      c[4 * k] = (uint8_t)byte;
      c[4 * k + 1] = byte + 1 <= 15 ? (uint8_t)(byte + 1) : 0x80;
      c[4 * k + 2] = c[4 * k + 3] = 0x80;
      s[k] = (uint32_t)(bit & 7);
    }
    ctrl = _mm512_load_si512(c);
    shift = _mm512_load_si512(s);
    mask = _mm512_set1_epi32((1 << bits) - 1);
    chunk_bytes = 2 * bits;
  }
  __m512i codes(const uint8_t* p) const {
    const __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(v, ctrl), shift), mask);
  }
};

template <Method M, int NT>
void tile(const QGemmArgs& a, int64_t i0, int64_t i1, int64_t t0, const Unpack& U, __m512 table) {
  const QuantMatrix& w = *a.w;
  const int64_t n = w.n_cols, ng = w.n_groups(), cpg = w.spec.group_size / kLanes;
  const float* xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = a.x + (t0 + t) * n;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = a.rows ? a.rows[i] : i;
    const uint8_t* codes = row_codes(w, r);
    const uint16_t* sc = w.scales + r * ng;
    const uint16_t* bs = M == Method::kAffine ? w.biases + r * ng : nullptr;
    __m512 acc[NT];
    float bacc[NT];
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_setzero_ps();
      bacc[t] = 0.0f;
    }
    for (int64_t gi = 0; gi < ng; ++gi) {
      __m512 p[NT];
      for (int t = 0; t < NT; ++t) p[t] = _mm512_setzero_ps();
      for (int64_t c = 0; c < cpg; ++c) {
        const int64_t chunk = gi * cpg + c, e = chunk * kLanes;
        const __m512i ci = U.codes(codes + chunk * U.chunk_bytes);
        const __m512 v = M == Method::kTurbo ? _mm512_permutexvar_ps(ci, table) : _mm512_cvtepi32_ps(ci);
        for (int t = 0; t < NT; ++t) p[t] = _mm512_fmadd_ps(v, _mm512_loadu_ps(xt[t] + e), p[t]);
      }
      const __m512 s = _mm512_set1_ps(bf16_to_fp32(sc[gi]));
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(p[t], s, acc[t]);
      if constexpr (M == Method::kAffine) {
        const float b = bf16_to_fp32(bs[gi]);
        for (int t = 0; t < NT; ++t) bacc[t] = std::fma(b, a.xsum[(t0 + t) * ng + gi], bacc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.ldy + i] = _mm512_reduce_add_ps(acc[t]) + bacc[t];
  }
}

template <Method M>
void qgemm(const QGemmArgs& a, int64_t i0, int64_t i1) {
  const QuantMatrix& w = *a.w;
  const Unpack U(w.spec.bits);
  alignas(64) float lv[16] = {};
  if constexpr (M == Method::kTurbo) std::memcpy(lv, w.turbo->levels.data(), w.turbo->levels.size() * 4);
  const __m512 table = _mm512_load_ps(lv);
  int64_t t0 = 0;
  for (; t0 + kTile <= a.n_tok; t0 += kTile) tile<M, kTile>(a, i0, i1, t0, U, table);
  switch (a.n_tok - t0) {
    case 1: tile<M, 1>(a, i0, i1, t0, U, table); break;
    case 2: tile<M, 2>(a, i0, i1, t0, U, table); break;
    case 3: tile<M, 3>(a, i0, i1, t0, U, table); break;
    case 4: tile<M, 4>(a, i0, i1, t0, U, table); break;
    case 5: tile<M, 5>(a, i0, i1, t0, U, table); break;
    case 6: tile<M, 6>(a, i0, i1, t0, U, table); break;
    case 7: tile<M, 7>(a, i0, i1, t0, U, table); break;
    default: break;
  }
}

}  // namespace

QGemmFn qgemm_avx512(Method m) { return m == Method::kTurbo ? &qgemm<Method::kTurbo> : &qgemm<Method::kAffine>; }

// Stages h = 1, 2, 4, 8 inside each 16-lane vector (partner = a lane permutation, sign mask m:
// x_j + x_{j+h} in the lower half of each pair of h-runs, x_{j-h} - x_j in the upper half, the
// same IEEE operations as fwht_ref), then whole-vector stages h >= 16.
void fwht_block_avx512(float* x, int64_t n) {
  const __m512 m1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 m2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
  const __m512 m4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
  const __m512 m8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (int64_t i = 0; i < n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    v = _mm512_fmadd_ps(v, m1, _mm512_permute_ps(v, 0xB1));
    v = _mm512_fmadd_ps(v, m2, _mm512_permute_ps(v, 0x4E));
    v = _mm512_fmadd_ps(v, m4, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_fmadd_ps(v, m8, _mm512_shuffle_f32x4(v, v, 0x4E));
    _mm512_storeu_ps(x + i, v);
  }
  for (int64_t h = 16; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; j += 16) {
        const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
        _mm512_storeu_ps(x + j, _mm512_add_ps(a, b));
        _mm512_storeu_ps(x + j + h, _mm512_sub_ps(a, b));
      }
}

}  // namespace dspark::quant::cpu
