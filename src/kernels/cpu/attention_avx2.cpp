// AVX2 + FMA + F16C attention over an f16 K/V cache (see kernels/attention.h).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/attention_f32.h"

namespace dspark::kernels::cpu {
namespace {

struct V256 {
  using reg = __m256;
  static constexpr int W = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg x) { _mm256_storeu_ps(p, x); }
  static reg load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static constexpr int kRegs = 16;  // architectural vector registers (values_group's budget)
  static float reduce(reg x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // W = 8 reductions at once, out[i] = reduce(x[i]) bit for bit: reduce adds the halves (x_i + x_i+4),
  // then lanes 0+2 and 1+3, then those two; the same pairs, transposed.
  static void reduce_w(const reg* x, float* out) {
    __m256 s[4];  // s[i] = [half sums of x[2i] | half sums of x[2i+1]]
    for (int i = 0; i < 4; ++i)
      s[i] = _mm256_add_ps(_mm256_permute2f128_ps(x[2 * i], x[2 * i + 1], 0x20),
                           _mm256_permute2f128_ps(x[2 * i], x[2 * i + 1], 0x31));
    // t[i] = [a0+a2, a1+a3, c0+c2, c1+c3 | b0+b2, b1+b3, d0+d2, d1+d3] for (a,b) = s[2i], (c,d) = s[2i+1]
    __m256 t[2];
    for (int i = 0; i < 2; ++i)
      t[i] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // u = [r0, r2, r4, r6 | r1, r3, r5, r7] with r_i = (t0 + t1) of x[i]
    const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
    // Back into key order.
    _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(u, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  static float reduce_max(reg x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static reg round_f16(reg x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  static void store_scalar_round_f16(float* p, float x) {
    *p = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  static reg exp(reg x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    const reg n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    reg p = _mm256_set1_ps(1.3981999507e-3f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    // 2^n via the exponent bits (n >= -126 after the clamp above).
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
};

#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/attention_f32_impl.h"

}  // namespace

void attention_reduce_w_avx2(const float* x, float* block, float* single) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + 8 * i);
  V256::reduce_w(r, block);
  for (int i = 0; i < 8; ++i) single[i] = V256::reduce(r[i]);
}

void attention_f16kv_split_avx2(const AttnSplit& s, int phase, int part, float* p) {
  AttentionImpl<V256>::split(s, phase, part, p);
}

void attention_f16kv_avx2(const float* q, int n_q, int64_t hd, const KvView& kv, int64_t first_pos, int64_t n_keys,
                          float* scores, float* out) {
  AttentionImpl<V256>::run(q, n_q, hd, kv, first_pos, n_keys, scores, out);
}

void attention_f32_avx2(const float* const* q, float* const* out, int64_t n_q, int64_t hd, const F32Rows* segs, int n_segs,
                        float* scores) {
  AttentionF32Impl<V256>::run(q, out, n_q, hd, segs, n_segs, scores);
}

}  // namespace dspark::kernels::cpu
