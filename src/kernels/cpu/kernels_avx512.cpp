// AVX-512 VNNI kernels (F+BW+DQ+VL+VNNI). Activations are stored biased as uint8 (q + 128) so
// vpdpbusd multiplies them directly with signed int8 weights: sum (a + 128) * w = sum a * w +
// 128 * sum w. The correction 128 * sum w is computed once per weight chunk (one more vpdpbusd)
// and used as the accumulator's start value, so each token costs a single vpdpbusd per chunk.
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define DSPARK_ISA_NS avx512

namespace dspark::kernels::cpu::avx512 {

constexpr bool kBiasedAct = true;

struct Prep {
  __m256i w, negcorr;
};
inline Prep prep(__m256i w) {
  const __m256i corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w);
  return {w, _mm256_sub_epi32(_mm256_setzero_si256(), corr)};
}
inline __m256i dot(const Prep& p, __m256i a) { return _mm256_dpbusd_epi32(p.negcorr, a, p.w); }

}  // namespace dspark::kernels::cpu::avx512

#include "kernels/cpu/gemm_impl.h"

namespace dspark::kernels::cpu {

bool gemv_q8_0_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, float* y);
bool gemv_q8_0_multi_avx512(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L,
                            int64_t n_tok, float* y, int64_t ldy);

namespace {

// Q8_0: the dedicated matvec (q8_0_gemv_avx512.cpp) for up to kGemvMaxTokensQ8_0 tokens, the
// generic tiles otherwise.
void gemm_q8_0(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
               float* y, int64_t ldy) {
  if (n_tok <= kGemvMaxTokensQ8_0 && gemv_q8_0_multi_avx512(w, r0, r1, act, L, n_tok, y, ldy)) return;
  avx512::gemm_q<avx512::DecQ8_0>(w, r0, r1, act, L, n_tok, y, ldy);
}

}  // namespace

bool kernels_avx512(DType t, KernelSet* out) {
  if (!avx512::fill_kernels<2, 4>(t, out)) return false;
  if (t == DType::Q8_0) out->gemm = &gemm_q8_0;
  return true;
}

}  // namespace dspark::kernels::cpu
