// AVX-512 VNNI kernels over the packed "x8" layout (kernels/packed.h; templates and records in
// packed_impl.h), on 256-bit vectors (AVX512VL): vpdpbusd forms each 4-byte group's unsigned x
// signed dot product and adds it to int32 lanes in one instruction, replacing AVX2's vpmaddubsw +
// vpaddw (+ vpmaddwd). vpdpbusd's latency is several cycles, so each accumulator keeps two
// independent chains (AVX-512 has 32 vector registers for them). The records here are Q4_1, Q4_K
// and Q6_K (int8 q activations); Q8_0 / Q4_0 / Q5_0 run on 16-row records (packed16_avx512.cpp).
// The int32 sums are exact: results are bitwise the AVX2 packed kernels' and the canonical ones.
// Used on AVX-512 CPUs without AMX (kernels/packed.h).
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

}  // namespace dspark::kernels::cpu::avx512p

#include "kernels/cpu/packed_impl.h"

namespace dspark::kernels::cpu {

bool packed_kernels_avx512(DType t, KernelSet* out) { return avx512p::packed_kernel_set(t, out); }

}  // namespace dspark::kernels::cpu
