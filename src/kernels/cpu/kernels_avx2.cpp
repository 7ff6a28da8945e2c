// AVX2 + FMA + F16C kernels: signed x signed int8 dots via vpmaddubsw with the sign trick
// (|w| as unsigned times a with w's sign; max pair sum 2 * 128 * 127 fits int16).
#include <immintrin.h>

#define DSPARK_ISA_NS avx2

namespace dspark::kernels::cpu::avx2 {

constexpr bool kBiasedAct = false;  // activations stored as int8 q

struct Prep {
  __m256i absw, w;
};
inline Prep prep(__m256i w) { return {_mm256_sign_epi8(w, w), w}; }
inline __m256i dot(const Prep& p, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(p.absw, _mm256_sign_epi8(a, p.w)), _mm256_set1_epi16(1));
}

}  // namespace dspark::kernels::cpu::avx2

#include "kernels/cpu/gemm_impl.h"

namespace dspark::kernels::cpu {

// Float-weight tiles: 1 row x 4 tokens for n_tok > 1 (16 ymm registers), 2 rows for n_tok == 1.
// Quantized weights: qrows8 (8-row tiles, canonical order).
bool kernels_avx2(DType t, KernelSet* out) { return avx2::fill_kernels<1, 2>(t, out); }

}  // namespace dspark::kernels::cpu
