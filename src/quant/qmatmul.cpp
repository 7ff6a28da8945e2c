// Quantized products: activation preparation (rotation, group sums), ISA choice and threading.
#include <algorithm>
#include <cstring>

#include "core/f16.h"
#include "core/status.h"
#include "quant/cpu/qcpu.h"
#include "quant/pack.h"
#include "quant/qmatrix.h"

namespace dspark::quant {

size_t QuantMatrix::storage_bytes() const {
  const size_t groups = (size_t)(n_rows * n_groups()) * 2;
  return (size_t)(n_rows * row_bytes()) + groups * (spec.method == Method::kAffine ? 2 : 1);
}

namespace {

constexpr int64_t kRowGrain = 16;  // rows per work unit handed to threads

cpu::QGemmFn pick(kernels::Isa isa, Method m) {
  isa = std::min(isa, kernels::detect_isa());  // never run code the CPU lacks
  if (isa == kernels::Isa::kAvx512) return cpu::qgemm_avx512(m);
  if (isa == kernels::Isa::kAvx2) return cpu::qgemm_avx2(m);
  return cpu::qgemm_scalar(m);
}

float* scratch_floats(kernels::MatmulContext& ctx, size_t n) {
  if (ctx.act_scratch.size() < n * 4 + 64) ctx.act_scratch.resize(n * 4 + 64);
  auto p = reinterpret_cast<uintptr_t>(ctx.act_scratch.data());
  return reinterpret_cast<float*>((p + 63) & ~(uintptr_t)63);
}

// Fills a.x / a.xsum for n_tokens rows of x.
void prepare(kernels::MatmulContext& ctx, const QuantMatrix& w, const float* x, int64_t n_tokens, cpu::QGemmArgs& a) {
  const int64_t n = w.n_cols, ng = w.n_groups(), g = w.spec.group_size;
  a.w = &w;
  a.n_tok = n_tokens;
  if (w.spec.method == Method::kTurbo) {
    float* xr = scratch_floats(ctx, (size_t)(n_tokens * n));
    std::memcpy(xr, x, (size_t)(n_tokens * n) * 4);
    for (int64_t t = 0; t < n_tokens; ++t) rotate(w.turbo->rot, xr + t * n, ctx.isa);
    a.x = xr;
  } else {
    float* xs = scratch_floats(ctx, (size_t)(n_tokens * ng));
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t gi = 0; gi < ng; ++gi) {
        float s = 0;
        for (int64_t j = 0; j < g; ++j) s += x[t * n + gi * g + j];
        xs[t * ng + gi] = s;
      }
    a.x = x;
    a.xsum = xs;
  }
}

template <class Fn>
void for_units(kernels::MatmulContext& ctx, int64_t n, const Fn& fn) {
  const int64_t n_units = (n + kRowGrain - 1) / kRowGrain;
  auto body = [&](int64_t u0, int64_t u1) { fn(u0 * kRowGrain, std::min(n, u1 * kRowGrain)); };
  if (ctx.pool && ctx.pool->size() > 1 && n_units > 1) ctx.pool->parallel_for(n_units, 1, body);
  else body(0, n_units);
}

}  // namespace

void matmul(kernels::MatmulContext& ctx, const QuantMatrix& w, const float* x, int64_t n_tokens, float* y,
            int64_t ldy) {
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  DSPARK_CHECK(w.spec.quantized() && w.n_cols % w.spec.group_size == 0);
  cpu::QGemmArgs a;
  prepare(ctx, w, x, n_tokens, a);
  a.y = y;
  a.ldy = ldy;
  const cpu::QGemmFn fn = pick(ctx.isa, w.spec.method);
  for_units(ctx, w.n_rows, [&](int64_t i0, int64_t i1) { fn(a, i0, i1); });
}

void matmul_rows(kernels::MatmulContext& ctx, const QuantMatrix& w, const int64_t* rows, int64_t n_sel,
                 const float* x, float* y) {
  if (n_sel <= 0) return;
  cpu::QGemmArgs a;
  prepare(ctx, w, x, 1, a);
  a.y = y;
  a.ldy = n_sel;
  a.rows = rows;
  const cpu::QGemmFn fn = pick(ctx.isa, w.spec.method);
  for_units(ctx, n_sel, [&](int64_t i0, int64_t i1) { fn(a, i0, i1); });
}

// Allocation-free (gathers run per draft slot): codes unpacked 256 at a time.
void dequantize_row(const QuantMatrix& w, int64_t r, float* out, kernels::Isa isa) {
  constexpr int64_t kChunk = 256;
  uint8_t codes[kChunk];
  const int64_t n = w.n_cols, g = w.spec.group_size, ng = w.n_groups();
  const uint8_t* row = w.codes + r * w.row_bytes();
  const uint16_t* sc = w.scales + r * ng;
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t m = std::min(kChunk, n - j0);  // n is a multiple of 32: whole bytes
    unpack_codes(row + j0 * w.spec.bits / 8, m, w.spec.bits, codes);
    for (int64_t j = j0; j < j0 + m; ++j) {
      const float s = bf16_to_fp32(sc[j / g]);
      if (w.spec.method == Method::kTurbo) out[j] = s * w.turbo->levels[codes[j - j0]];
      else out[j] = s * (float)codes[j - j0] + bf16_to_fp32(w.biases[r * ng + j / g]);
    }
  }
  if (w.spec.method == Method::kTurbo) unrotate(w.turbo->rot, out, isa);
}

}  // namespace dspark::quant
