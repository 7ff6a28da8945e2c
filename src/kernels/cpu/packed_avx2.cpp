// AVX2 kernels over the packed "x8" layout (kernels/packed.h; records in cpu.h): lanes = the 8 rows
// of a group. For each 4-element group k of a block, vpmaddubsw of the 8 rows' 4 weights (32 bytes)
// against the token's 4 activations broadcast gives each row's pair sums in its own lane, so the
// exact int32 block sums need no transpose; the f32 steps are the canonical ones (cpu.h), bitwise
// equal to qrows8 and the scalar kernels.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "kernels/cpu/cpu.h"

namespace dspark::kernels::cpu {
namespace {

constexpr int64_t kTokGroup = 16;  // tokens per pass over a row block

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i bcast4(const uint8_t* p) {  // 4 activation bytes into every 32-bit lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Q4_1 record: d[8] f16, m[8] f16, 4 x 32 bytes of nibble pairs (element 4j+e low, 16+4j+e high).
struct PackQ4_1 {
  static constexpr size_t kRec = 160;
  struct W { __m256i q[8]; __m256 d, m; };  // q[k]: rows' elements 4k..4k+3 as uint8 0..15
  static void load(const uint8_t* p, W& w) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = load256(p + 32 + 32 * j);
      w.q[j] = _mm256_and_si256(raw, lo4);
      w.q[4 + j] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
    }
    w.d = load_f16x8(p);
    w.m = load_f16x8(p + 16);
  }
  // Exact block sums of the 8 rows with the 32 activations a (int8). |pair| <= 2 * 15 * 127, so
  // eight pair sums stay within int16 before the one widening vpmaddwd.
  static __m256i isum(const W& w, const uint8_t* a) {
    __m256i s = _mm256_maddubs_epi16(w.q[0], bcast4(a));
    for (int k = 1; k < 8; ++k) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w.q[k], bcast4(a + 4 * k)));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
  }
  static __m256 step(__m256 A, const W& w, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    const float sa = reinterpret_cast<const float*>(act + L.off_s)[b];
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(w.d, _mm256_set1_ps(da)), A);
    return _mm256_fmadd_ps(w.m, _mm256_set1_ps(sa), A);
  }
};

// Q8_0 record: d[8] f16, 8 x 32 bytes (rows' elements 4k..4k+3, int8).
struct PackQ8_0 {
  static constexpr size_t kRec = 272;
  struct W { const uint8_t* q; __m256 d; };
  static void load(const uint8_t* p, W& w) {
    w.q = p + 16;
    w.d = load_f16x8(p);
  }
  // Signed x signed via the sign trick; |pair| <= 2 * 127 * 127 fits int16, widened every step.
  static __m256i isum(const W& w, const uint8_t* a) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i q = load256(w.q + 32 * k);
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(bcast4(a + 4 * k), q));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, one));
    }
    return s;
  }
  static __m256 step(__m256 A, const W& w, __m256i is, const uint8_t* act, const ActLayout& L, int64_t b) {
    const float da = reinterpret_cast<const float*>(act + L.off_d)[b];
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(w.d, _mm256_set1_ps(da)), A);
  }
};

// Rows [r0, r1) x all tokens: tokens in groups of kTokGroup (their accumulators stay in registers /
// L1), rows in blocks of about kRowBlockBytes of packed weights so that a block stays in L2 while
// every token group passes over it (prefill); decode and verify windows are one group.
template <class P>
void gemm_packed(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
                 float* y, int64_t ldy) {
  DSPARK_CHECK(r0 % 8 == 0);
  constexpr size_t kRowBlockBytes = 256 * 1024;
  const int64_t nb = wm.n_cols / 32;
  const size_t group_bytes = (size_t)nb * P::kRec;
  const int64_t rb_rows = n_tok <= kTokGroup ? r1 - r0 : 8 * std::max<int64_t>(1, (int64_t)(kRowBlockBytes / group_bytes));
  alignas(32) float out[kTokGroup][8];
  for (int64_t rb = r0; rb < r1; rb += rb_rows) {
    const int64_t re = std::min(r1, rb + rb_rows);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokGroup) {
      const int64_t nt = std::min(kTokGroup, n_tok - t0);
      const uint8_t* a0 = act + (size_t)t0 * L.stride;
      for (int64_t r = rb; r < re; r += 8) {
        const uint8_t* g = wm.packed + (size_t)(r / 8) * group_bytes;
        __m256 A[kTokGroup];
        for (int64_t t = 0; t < nt; ++t) A[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
          typename P::W w;
          P::load(g + (size_t)b * P::kRec, w);
          for (int64_t t = 0; t < nt; ++t) {
            const uint8_t* a = a0 + (size_t)t * L.stride;
            A[t] = P::step(A[t], w, P::isum(w, a + 32 * b), a, L, b);
          }
        }
        const int nr = (int)std::min<int64_t>(8, re - r);
        for (int64_t t = 0; t < nt; ++t) {
          _mm256_store_ps(out[t], A[t]);
          for (int i = 0; i < nr; ++i) y[(t0 + t) * ldy + r + i] = out[t][i];
        }
      }
    }
  }
}

}  // namespace

bool packed_kernels_avx2(DType t, GemmFn* out) {
  switch (t) {
    case DType::Q8_0: *out = &gemm_packed<PackQ8_0>; return true;
    case DType::Q4_1: *out = &gemm_packed<PackQ4_1>; return true;
    default: return false;
  }
}

}  // namespace dspark::kernels::cpu
