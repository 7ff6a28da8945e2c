// AVX-512 attention over an f16 K/V cache (see kernels/attention.h).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"

namespace dspark::kernels::cpu {
namespace {

struct V512 {
  using reg = __m512;
  static constexpr int W = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg x) { _mm512_storeu_ps(p, x); }
  static reg load_h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float reduce(reg x) { return _mm512_reduce_add_ps(x); }
  static float reduce_max(reg x) { return _mm512_reduce_max_ps(x); }
  static reg round_f16(reg x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  static void store_scalar_round_f16(float* p, float x) {
    *p = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  // exp(x) for x <= 0: 2^n * P(r), n = round(x / ln2), r = x - n ln2 (Cody-Waite), P degree 6.
  static reg exp(reg x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    const reg n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    reg p = _mm512_set1_ps(1.3981999507e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }
};

#include "kernels/cpu/attention_impl.h"

}  // namespace

void attention_f16kv_avx512(const float* q, int n_q, int64_t hd, const KvView& kv, int64_t first_pos, int64_t n_keys,
                            float* scores, float* out) {
  AttentionImpl<V512>::run(q, n_q, hd, kv, first_pos, n_keys, scores, out);
}

}  // namespace dspark::kernels::cpu
