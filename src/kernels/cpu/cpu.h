// Internal interface between the dispatcher (dispatch.cpp) and the per-ISA kernel files.
//
// SIMD kernels do not use ggml's activation blocks; matmul quantizes each activation row once into a
// SIMD-friendly "packed activation" row (same values as ggml's Q8_0 / Q8_1 / Q8_K, split into arrays):
//   qs    [n_cols]            int8 q (AVX2) or uint8 q + 128 (AVX-512 VNNI, for vpdpbusd), at offset 0
//   d     [n_cols / blk] f32  block scale (Q8_0/Q8_1: f16-rounded like ggml, blk 32; Q8_K: f32, blk 256)
//   s8    [n_cols / 32]  f32  Q8_1 only: s / 8 where s = f16(d * sum q)
//   bsums [n_cols / 16]  i16  Q8_K only: sums of q over 16 elements
// Rows are `stride` bytes apart (multiple of 64). F16 / BF16 / F32 weights use f32 activations
// directly (not rounded to f16 / bf16 as ggml does; slightly more accurate).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace dspark::kernels::cpu {

enum class ActKind { kQ8_0, kQ8_1, kQ8_K, kF32 };

struct ActLayout {
  ActKind kind = ActKind::kF32;
  int64_t n_cols = 0;
  size_t stride = 0;  // bytes per token row
  size_t off_d = 0, off_s = 0, off_bs = 0;
};

inline size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

inline ActLayout act_layout(ActKind kind, int64_t n_cols) {
  ActLayout L;
  L.kind = kind;
  L.n_cols = n_cols;
  if (kind == ActKind::kF32) {
    L.stride = (size_t)n_cols * 4;
    return L;
  }
  const int64_t blk = kind == ActKind::kQ8_K ? 256 : 32;
  size_t off = align64((size_t)n_cols);
  L.off_d = off;
  off = align64(off + (size_t)(n_cols / blk) * 4);
  if (kind == ActKind::kQ8_1) {
    L.off_s = off;
    off = align64(off + (size_t)(n_cols / 32) * 4);
  }
  if (kind == ActKind::kQ8_K) {
    L.off_bs = off;
    off = align64(off + (size_t)(n_cols / 16) * 2);
  }
  L.stride = off;
  return L;
}

// Quantize one f32 row x[n_cols] into one packed activation row.
using QuantizeFn = void (*)(const float* x, uint8_t* dst, const ActLayout& L);
// y[t * ldy + r] = dot(W[r], act[t]) for r in [r0, r1), t in [0, n_tok).
using GemmFn = void (*)(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L,
                        int64_t n_tok, float* y, int64_t ldy);

struct KernelSet {
  ActKind act = ActKind::kF32;
  QuantizeFn quantize = nullptr;  // nullptr for kF32 (x is used as is)
  GemmFn gemm = nullptr;
};

// Kernels for weight type t, or false if the ISA file has none.
bool kernels_avx2(DType t, KernelSet* out);
bool kernels_avx512(DType t, KernelSet* out);

// AMX-INT8 path for n_tokens >= amx_min_tokens(type) (gemm_amx.cpp; call only when amx_usable()).
// It takes the AVX-512 kernels' packed activations after amx_prepare_act (qs back to signed int8,
// Q8_K bsums turned into 32-element pair sums), with rows up to a multiple of kAmxTokenPad readable
// (zero filled) past n_tok.
constexpr int64_t kAmxMinTokens = 8;
constexpr int64_t kAmxMinTokensQ8_0 = 2;  // Q8_0 with <= 32 tokens reads raw weight rows as tiles
inline int64_t amx_min_tokens(DType t) { return t == DType::Q8_0 ? kAmxMinTokensQ8_0 : kAmxMinTokens; }
constexpr int64_t kAmxTokenPad = 32;
bool amx_usable();  // CPUID AMX-TILE/INT8 + OS tile state + Linux arch_prctl permission (once)
bool amx_supports(DType t);
void amx_prepare_act(uint8_t* row, const ActLayout& L);
void gemm_amx(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
              float* y, int64_t ldy);

}  // namespace dspark::kernels::cpu
