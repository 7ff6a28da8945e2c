// AVX2 kernels over the packed "x8" layout (kernels/packed.h; templates and records in
// packed_impl.h): unsigned x signed 4-byte groups via vpmaddubsw, whose int16 pair sums are added
// in int16 (|pair| <= 2 * 15 * 127 and at most eight per lane before a finish: within int16) and
// widened once by vpmaddwd; signed x signed via the sign trick, widened every step
// (|pair| <= 2 * 127 * 127). One chain per accumulator: integer adds have 1-cycle latency.
#include <immintrin.h>

#include "kernels/cpu/keep_in_register.h"

#define DSPARK_ISA_NS avx2p

namespace dspark::kernels::cpu::avx2p {

constexpr int kMaxTileTokens = 4;  // 16 ymm registers

struct U4Acc {
  __m256i s = _mm256_setzero_si256();  // int16 pair sums
  void add(__m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)));
  }
  __m256i finish() const { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
  void pin() { keep_in_register(s); }
};

struct S8Acc {
  __m256i s = _mm256_setzero_si256();  // int32
  void add(int, __m256i absw, __m256i sa) {
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(absw, sa), _mm256_set1_epi16(1)));
  }
  __m256i finish() const { return s; }
  void pin() { keep_in_register(s); }
};

}  // namespace dspark::kernels::cpu::avx2p

#include "kernels/cpu/packed_impl.h"

namespace dspark::kernels::cpu {

bool packed_kernels_avx2(DType t, GemmFn* out) { return avx2p::packed_kernels(t, out); }

}  // namespace dspark::kernels::cpu
