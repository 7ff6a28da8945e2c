// AVX2 kernels over the packed "x8" layout (kernels/packed.h; templates and records in
// packed_impl.h): unsigned x signed 4-byte groups via vpmaddubsw, whose int16 pair sums are added
// in int16 (|pair| <= 2 * 15 * 127 and at most eight per lane before a finish: within int16) and
// widened once by vpmaddwd; signed x signed via the sign trick, widened every step
// (|pair| <= 2 * 127 * 127). Activations: int8 q (kernels_avx2's quantizer) for every record. One chain per accumulator: integer adds have 1-cycle latency.
#include <immintrin.h>

#include <cstdint>

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

// Signed x signed via the sign trick: |w| (unsigned) times a with w's sign.
struct S8Rec {
  __m256i w, absw;
  void set(__m256i v) {
    w = v;
    absw = _mm256_sign_epi8(w, w);
  }
  void add(S8Acc& s, int k, __m256i a4) const { s.add(k, absw, _mm256_sign_epi8(a4, w)); }
  __m256i finish(const S8Acc& s) const { return s.finish(); }
};

// q - 16 = q4 - 16 + 16 * bit: byte b / 8 of m spread over its 8-byte run, one bit per byte
// selected and compared (0xFF where set), then 16 where set.
inline __m256i q5_signed(__m256i q4, uint32_t m) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull), sixteen = _mm256_set1_epi8(16);
  const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread), bit);
  const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), sixteen);
  return _mm256_sub_epi8(_mm256_or_si256(q4, hi), sixteen);
}

}  // namespace dspark::kernels::cpu::avx2p

#include "kernels/cpu/packed_impl.h"

namespace dspark::kernels::cpu {

bool packed_kernels_avx2(DType t, KernelSet* out) { return avx2p::packed_kernel_set(t, out); }

}  // namespace dspark::kernels::cpu
