// keep_in_register: an empty asm that takes x in a register, so the compiler cannot reassociate the
// integer sums across it into a wide tree (which kept every product live and spilled them to the
// stack). For the SIMD kernel files only (packed_impl.h and its includers). "v": any vector register
// (ymm16-31 too where AVX-512 is enabled; "x" forced the values into ymm0-15 and added moves).
#pragma once

#include <immintrin.h>

namespace dspark::kernels::cpu {

inline void keep_in_register(__m256i& x) { asm volatile("" : "+v"(x)); }

}  // namespace dspark::kernels::cpu
