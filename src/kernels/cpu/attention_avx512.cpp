// AVX-512 attention over an f16 K/V cache (see kernels/attention.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_f32.h"

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
  static constexpr int kRegs = 32;  // architectural vector registers (values_group's budget)
  static float reduce(reg x) { return _mm512_reduce_add_ps(x); }
  // W = 16 reductions at once, out[i] = reduce(x[i]) bit for bit. reduce (GCC's
  // _mm512_reduce_add_ps) adds lanes i + i+8, then i + i+4, then i + i+2, then 0 + 1; the same
  // pairs here, four vectors' worth per add (IEEE addition is commutative, so operand order within
  // a pair does not matter).
  static void reduce_w(const reg* x, float* out) {
    reg c[8];  // c[i] = [i+8 sums of x[2i] | of x[2i+1]]
    for (int i = 0; i < 8; ++i)
      c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                           _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xEE));
    reg g[4];  // g[i] = 128-bit blocks of i+4 sums of x[4i], x[4i+1], x[4i+2], x[4i+3]
    for (int i = 0; i < 4; ++i)
      g[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                           _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
    reg u[2];  // u[i], block b = [i+2 sums of x[8i+b] (2 lanes) | of x[8i+b+4] (2 lanes)]
    for (int i = 0; i < 2; ++i)
      u[i] = _mm512_add_ps(_mm512_shuffle_ps(g[2 * i], g[2 * i + 1], 0x44),
                           _mm512_shuffle_ps(g[2 * i], g[2 * i + 1], 0xEE));
    // r, block b = [sums of x[b], x[b+4], x[b+8], x[b+12]]: lane 4b + j holds key b + 4j.
    const reg r = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
    const __m512i key_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(key_order, r));
  }
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
#include "kernels/cpu/attention_f32_impl.h"
#include "kernels/cpu/attention_rows_impl.h"

}  // namespace

void attention_reduce_w_avx512(const float* x, float* block, float* single) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(x + 16 * i);
  V512::reduce_w(r, block);
  for (int i = 0; i < 16; ++i) single[i] = V512::reduce(r[i]);
}

void attention_f16kv_split_avx512(const AttnSplit& s, int phase, int part, float* p) {
  AttentionImpl<V512>::split(s, phase, part, p);
}

void attention_f16kv_avx512(const float* q, int n_q, int64_t hd, const KvView& kv, int64_t first_pos, int64_t n_keys,
                            float* scores, float* out) {
  AttentionImpl<V512>::run(q, n_q, hd, kv, first_pos, n_keys, scores, out);
}

void attention_f16kv_rows_avx512(const AttnRows& rows, int n_q, int64_t hd, const KvView& kv, float* scores) {
  AttentionRowsImpl<V512>::run(rows, n_q, hd, kv, scores);
}

void attention_f32_avx512(const float* const* q, float* const* out, int64_t n_q, int64_t hd, const F32Rows* segs, int n_segs,
                          float* scores) {
  AttentionF32Impl<V512>::run(q, out, n_q, hd, segs, n_segs, scores);
}

}  // namespace dspark::kernels::cpu
