// The quantized matrix-product API. Model code calls only this header and ops.h.
//
// Semantics follow ggml's CPU path (ggml-cpu type_traits_cpu vec_dot_type): the f32 activation row is quantized
// once to the weight type's "vec_dot" format (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K
// for the K-quants, f16/bf16 for F16/BF16, f32 for F32), then dotted with every weight row using
// exact int32 inner sums. Scalar references (ref/) are the oracle; cpu/ holds SIMD versions picked
// at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/threadpool.h"

namespace dspark::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };  // kAvx512 = F+BW+DQ+VL+VNNI

Isa detect_isa();                 // best ISA this CPU supports (CPUID + OS XSAVE state)
const char* isa_name(Isa isa);

// A weight matrix [n_rows, n_cols] of `type`, rows contiguous at `row_stride` bytes.
struct QMatrix {
  DType type = DType::F32;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  const void* data = nullptr;
  size_t row_stride = 0;  // bytes between rows; row_bytes(type, n_cols) for packed tensors
  // Optional row-interleaved copy of the same values (kernels/packed.h), used by matmul instead of
  // `data` where the ISA has a packed kernel for the type; the owner keeps it alive.
  const uint8_t* packed = nullptr;
  int packed_rows = 8;  // rows per record group of `packed` (kernels/packed.h: 8, or 16 under AVX-512 VNNI)
};

// Per-caller state for matmul: ISA, threads and reusable scratch (no allocation in steady state).
// Thread safety: one context per calling thread.
struct MatmulContext {
  Isa isa = Isa::kScalar;
  ThreadPool* pool = nullptr;        // nullptr = single-threaded
  std::vector<uint8_t> act_scratch;  // quantized activations
  // With isa == kAvx512: use AMX-INT8 tiles for n_tokens >= 8 when the CPU and OS allow it
  // (see amx_available()). false forces the AVX-512 VNNI path (tests, benchmarks).
  bool allow_amx = true;
};

// True if this CPU/OS can run the AMX-INT8 matmul path (checked and permission requested once).
bool amx_available();

// y[t, r] = dot(W[r, :], x[t, :]) for t < n_tokens, r < n_rows.
// x: [n_tokens, n_cols] f32, row stride n_cols; y: [n_tokens, ldy] f32 (only first n_rows written).
// Batch-invariant: y[t, r] is bitwise the same whatever n_tokens, t's position in the batch, the
// pool size, allow_amx, and the ISA (one canonical accumulation order, cpu/cpu.h), so a token
// verified in a batch gets exactly the logits it gets when decoded alone.
void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy);

// Which kernel matmul() runs for w with this isa (capped by the CPU's), for reports (--verbose):
// kernel describes it ("packed x16 tiles, avx512-vnni", "avx2 tiles", "scalar reference: no SIMD
// kernel for this type"); simd is false for the scalar path. matmul() makes the same choice.
struct MatmulPath {
  std::string kernel;
  bool simd = false;
};
MatmulPath matmul_path(const QMatrix& w, Isa isa, bool allow_amx = true);

// The matmul paths a CPU may have for one weight type; all give the same bits (cpu/cpu.h). A
// KernelPlan (kernels/plan.h) picks one per (weight type, token count); matmul() uses a fixed rule.
//   kScalar   portable canonical kernels (canonical_scalar.cpp)
//   kAvx2     the GGUF layout, AVX2 tiles             kAvx512  the GGUF layout, AVX-512 VNNI tiles
//   kPacked8  the x8 packed copy, AVX2 kernels         kPacked16 the x16 packed copy, AVX-512 VNNI
//   kAmx      the GGUF layout, AMX-INT8 tiles (n >= cpu::amx_min_tokens(type) only)
// kPacked16Hw: the packed x16 kernels with a single token's weight stream left to the hardware
// prefetcher (kPacked16 prefetches it into L1 in software); verify windows and prefill run kPacked16's code.
enum class KernelPath : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kPacked8 = 3, kPacked16 = 4, kAmx = 5, kPacked16Hw = 6 };
inline constexpr int kNumKernelPaths = 7;
const char* kernel_path_name(KernelPath p);  // "scalar", "avx2", "avx512", "packed8", "packed16", "amx", "packed16-hw"

// The path matmul() runs for w over n tokens on isa (capped by the CPU's): today's fixed rule (a
// packed copy of the ISA's layout, else AMX from amx_min_tokens where allowed and usable, else the
// ISA's kernels for the type, else scalar).
KernelPath default_path(const QMatrix& w, Isa isa, bool allow_amx, int64_t n_tokens);

// matmul() on a given path. Where that path cannot run w (no packed copy of its layout, no source
// bytes, fewer tokens than AMX takes, an ISA this CPU or ctx.isa lacks) it runs default_path's
// instead: the bits are the same whichever runs.
void matmul_on(MatmulContext& ctx, KernelPath path, const QMatrix& w, const float* x, int64_t n_tokens, float* y,
               int64_t ldy);

// Dequantize n elements (a multiple of the block size) of `type` from src to f32.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace dspark::kernels
