// AVX-512 VNNI kernels over the packed "x8" layout (kernels/packed.h; templates and records in
// packed_impl.h), on 256-bit vectors (AVX512VL): vpdpbusd forms each 4-byte group's unsigned x
// signed dot product and adds it to int32 lanes in one instruction, replacing AVX2's vpmaddubsw +
// vpaddw (+ vpmaddwd). vpdpbusd's latency is several cycles, so each accumulator keeps two
// independent chains (AVX-512 has 32 vector registers for them). Q8_0 records take activations
// biased to unsigned (S8Rec below); the others take int8 q. The int32 sums are exact:
// results are bitwise the AVX2 packed kernels' and the canonical ones. Used on AVX-512 CPUs
// without AMX (kernels/packed.h).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/keep_in_register.h"

#define DSPARK_ISA_NS avx512p

namespace dspark::kernels::cpu::avx512p {

constexpr int kMaxTileTokens = 8;  // 32 vector registers: a verify window of up to 8 in one pass

struct U4Acc {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();  // int32, one chain each
  void add(__m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    lo = _mm256_dpbusd_epi32(lo, u1, s1);
    hi = _mm256_dpbusd_epi32(hi, u2, s2);
  }
  __m256i finish() const { return _mm256_add_epi32(lo, hi); }
  void pin() {
    keep_in_register(lo);
    keep_in_register(hi);
  }
};

struct S8Acc {
  __m256i c[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};  // int32: even and odd steps
  void add(int k, __m256i u, __m256i s) { c[k & 1] = _mm256_dpbusd_epi32(c[k & 1], u, s); }
  __m256i finish() const { return _mm256_add_epi32(c[0], c[1]); }
  void pin() {
    keep_in_register(c[0]);
    keep_in_register(c[1]);
  }
};

// Signed weights against activations stored as u = q + 128 (the AVX-512 kernels' quantizer):
// vpdpbusd(u, w) sums (q + 128) * w, so each token costs one instruction per step; the record's
// 128 * sum(w), formed once for all tokens (one vpdpbusd per step), is subtracted at the end.
constexpr bool kBiasedQ8Act = true;
struct S8Rec {
  __m256i w, corr = _mm256_setzero_si256();
  void set(__m256i v) {
    w = v;
    corr = _mm256_dpbusd_epi32(corr, _mm256_set1_epi8((char)0x80), w);
  }
  void add(S8Acc& s, int k, __m256i u4) const { s.add(k, u4, w); }
  __m256i finish(const S8Acc& s) const { return _mm256_sub_epi32(s.finish(), corr); }
};

// q - 16 = q4 where the fifth bit is set, else q4 - 16: one masked subtraction.
inline __m256i q5_signed(__m256i q4, uint32_t m) {
  return _mm256_mask_sub_epi8(q4, (__mmask32)~m, q4, _mm256_set1_epi8(16));
}

}  // namespace dspark::kernels::cpu::avx512p

#include "kernels/cpu/packed_impl.h"

namespace dspark::kernels::cpu {

bool packed_kernels_avx512(DType t, KernelSet* out) { return avx512p::packed_kernel_set(t, out); }

}  // namespace dspark::kernels::cpu
