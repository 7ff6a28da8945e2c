// Internal interface between the dispatcher (dispatch.cpp) and the per-ISA kernel files.
//
// SIMD kernels do not use ggml's activation blocks; matmul quantizes each activation row once into a
// SIMD-friendly "packed activation" row (same values as ggml's Q8_0 / Q8_1 / Q8_K, split into arrays):
//   qs    [n_cols]            int8 q (AVX2) or uint8 q + 128 (AVX-512 VNNI, for vpdpbusd), at offset 0
//   d     [n_cols / blk] f32  block scale (Q8_0/Q8_1: f16-rounded like ggml, blk 32; Q8_K: f32, blk 256)
//   s     [n_cols / 32]  f32  Q8_1 only: s = f16(d * sum q)
//   bsums [n_cols / 16]  i16  Q8_K only: sums of q over 16 elements
// Rows are `stride` bytes apart (multiple of 64). F16 / BF16 / F32 weights use f32 activations
// directly (not rounded to f16 / bf16 as ggml does; slightly more accurate).
//
// BATCH INVARIANCE. Every SIMD path (AVX2 and AVX-512 VNNI tiles, the AVX-512 Q8_0 matvec, AMX)
// computes y[t, r] with ONE canonical accumulation per (row r, token t), so the result is bitwise
// the same whatever n_tokens, the position of t in the batch, the thread count, and whether AMX
// runs (speculative verify == serial decode). All integer sums are exact (int32), so any SIMD
// layout may form them; the f32 operations below, and their order, are fixed (fma = one rounding,
// d_w / d_a / m_w / s_a are the f32 values of the stored scales, `*` a rounded f32 product):
//   Q8_0 / Q4_0 / Q5_0 (32-blocks b = 0, 1, ...): acc = 0;
//       acc = fma(f32(isum_b), d_w[b] * d_a[b], acc)
//   Q4_1 / Q5_1: the same, then per block acc = fma(m_w[b], s_a[b], acc)
//   Q4_K / Q5_K (super-blocks b of 256): I = sum_j sc_j * isum_j (int32, j = 32-element
//       sub-blocks), M = sum_j m_j * (bsums[2j] + bsums[2j+1]) (int32);
//       acc = fma(f32(I), d_w[b] * d_a[b], acc); acc = fma(-f32(M), dmin_w[b] * d_a[b], acc)
//   Q6_K: I = sum_k sc_k * isum_k (int32, k = 16-element sub-blocks, weights q - 32);
//       acc = fma(f32(I), d_w[b] * d_a[b], acc)
//   F32 / F16 / BF16: 8 lanes, lane l accumulates elements i = l mod 8 with fma in order, then
//       the fixed hsum8 tree, then the n % 8 tail with fma in order (ftile).
// SIMD vectorizes across rows (lanes = rows: VNNI tiles, matvec, AMX legacy/K) or tokens (AMX Q8_0
// direct), never across the blocks of one dot. Scalar (canonical_scalar.cpp), AVX2 and AVX-512
// (with or without AMX) share the quantizers and this order, so all ISAs are mutually invariant.
// (The ref/ oracle, matmul_ref, keeps ggml's quantizers and order; it is not bitwise equal.)
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

// Two int16 values as one int32 (lo in the low half), the operand vpmaddwd pairs with two int16 weights:
// the K-quant steps' bsums pairs (packed_impl.h, packed16_avx512.cpp).
inline int32_t pack_i16_pair(int lo, int hi) { return (int32_t)((uint32_t)(uint16_t)lo | ((uint32_t)(uint16_t)hi << 16)); }

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

// Scalar ISA (canonical_scalar.cpp): the same quantizers and canonical accumulation as the SIMD
// kernels, portable code. Activation row: scalar_act_bytes(t, n_cols) bytes.
size_t scalar_act_bytes(DType t, int64_t n_cols);
void scalar_quantize(DType t, const float* x, uint8_t* dst, int64_t n_cols);
float scalar_dot(DType t, int64_t n_cols, const uint8_t* w_row, const uint8_t* act_row);

// Kernels for weight type t, or false if the ISA file has none.
bool kernels_avx2(DType t, KernelSet* out);
bool kernels_avx512(DType t, KernelSet* out);

// Packed "x8" kernels (packed_impl.h, packed_avx2.cpp) over QMatrix::packed, rows [r0, r1) with r0
// a multiple of 8: the gemm and the quantizer of the activations it takes (int8 q). Records
// (kernels/packed.h: rows in groups of 8, record (g, b) at (g * n_blocks + b) * 8 * block_bytes):
//   Q8_0 (272 B): d[8] f16 (lane i = row i); for k = 0..7, 32 bytes: row i's int8 elements
//                 4k..4k+3 at bytes 4i..4i+3
//   Q4_1 (160 B): d[8] f16, m[8] f16; for j = 0..3, 32 bytes: byte 4i + e = element 4j + e of row i
//                 in the low nibble, element 16 + 4j + e in the high nibble
// GeluTable::gelu_mul with the table gathered 8 / 16 lanes at a time (ops_avx2.cpp, ops_avx512.cpp):
// the same f16 index (round to nearest even), the same +-10 cut-offs, so the same bits.
void gelu_table_mul_avx2(const float* table, const float* gate, const float* up, float* out, int64_t n);
void gelu_table_mul_avx512(const float* table, const float* gate, const float* up, float* out, int64_t n);

bool packed_kernels_avx2(DType t, KernelSet* out);
// The x16 layout (kernels/packed.h) under AVX-512 VNNI (packed16_avx512.cpp), rows [r0, r1) with r0
// a multiple of 16. decode_prefetch: single-token products prefetch the weight stream into L1 (else the
// hardware prefetcher alone: KernelPath::kPacked16Hw); the same bits either way.
bool packed16_kernels_avx512(DType t, KernelSet* out, bool decode_prefetch = true);
// The ActKind kQ8_0 / kQ8_1 quantizer under AVX-512 (quantize_avx512.cpp), bitwise the AVX2 one's
// (gemm_impl.h quantize_q8_32): int8 q, or u = q + 128 (biased, as the AVX-512 kernels take them).
void quantize_q8_32_avx512(const float* x, uint8_t* dst, const ActLayout& L);
void quantize_q8_32_avx512_biased(const float* x, uint8_t* dst, const ActLayout& L);

// AMX-INT8 path for n_tokens >= amx_min_tokens(type) (gemm_amx.cpp; call only when amx_usable()).
// It takes the AVX-512 kernels' packed activations after amx_prepare_act (qs back to signed int8,
// Q8_K bsums turned into 32-element pair sums), with rows up to a multiple of kAmxTokenPad readable
// (zero filled) past n_tok.
constexpr int64_t kAmxMinTokens = 8;
// Q8_0 with 1..kGemvMaxTokensQ8_0 tokens: the VNNI matvec that reads each weight tile once for all
// tokens (q8_0_gemv_avx512.cpp; the speculative verify windows); more: AMX (raw weight rows as
// tiles up to 32 tokens).
constexpr int64_t kGemvMaxTokensQ8_0 = 4;
constexpr int64_t kAmxMinTokensQ8_0 = kGemvMaxTokensQ8_0 + 1;
inline int64_t amx_min_tokens(DType t) { return t == DType::Q8_0 ? kAmxMinTokensQ8_0 : kAmxMinTokens; }
constexpr int64_t kAmxTokenPad = 32;
bool amx_usable();  // CPUID AMX-TILE/INT8 + OS tile state + Linux arch_prctl permission (once)
bool amx_supports(DType t);
void amx_prepare_act(uint8_t* row, const ActLayout& L);
void gemm_amx(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
              float* y, int64_t ldy);

}  // namespace dspark::kernels::cpu
