// ISA detection, per-(type, ISA) kernel selection and the threaded matmul driver.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"
#include "kernels/packed.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {

Isa detect_isa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
      return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
      return Isa::kAvx2;
    return Isa::kScalar;
  }();
  return isa;
}

namespace cpu {

bool amx_usable() {
  static const bool ok = [] {
    if (detect_isa() != Isa::kAvx512) return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((d >> 24) & 1) || !((d >> 25) & 1)) return false;  // AMX-TILE, AMX-INT8
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return false;  // XTILECFG + XTILEDATA enabled by the OS
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

}  // namespace cpu

bool amx_available() { return cpu::amx_usable(); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512-vnni";
  }
  return "unknown";
}

namespace {

constexpr int64_t kRowGrain = 16;  // rows per work unit handed to threads
static_assert(kRowGrain % 8 == 0, "packed kernels start at multiples of 8 rows");

uint8_t* scratch(MatmulContext& ctx, size_t bytes) {
  if (ctx.act_scratch.size() < bytes + 64) ctx.act_scratch.resize(bytes + 64);
  auto p = reinterpret_cast<uintptr_t>(ctx.act_scratch.data());
  return reinterpret_cast<uint8_t*>((p + 63) & ~(uintptr_t)63);
}

// fn(row_begin, row_end) over all rows, split across the pool in multiples of kRowGrain.
template <class Fn>
void for_rows(MatmulContext& ctx, int64_t n_rows, const Fn& fn) {
  const int64_t n_units = (n_rows + kRowGrain - 1) / kRowGrain;
  auto body = [&](int64_t u0, int64_t u1) { fn(u0 * kRowGrain, std::min(n_rows, u1 * kRowGrain)); };
  if (ctx.pool && ctx.pool->size() > 1 && n_units > 1) ctx.pool->parallel_for(n_units, 1, body);
  else body(0, n_units);
}

template <class Fn>
void for_tokens(MatmulContext& ctx, int64_t n_tokens, const Fn& fn) {
  if (ctx.pool && ctx.pool->size() > 1 && n_tokens >= 8) {
    ctx.pool->parallel_for(n_tokens, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) fn(t);
    });
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) fn(t);
  }
}

// Scalar path: portable canonical kernels (bitwise equal to the SIMD paths), threaded.
void matmul_scalar(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  const size_t abytes = cpu::align64(cpu::scalar_act_bytes(w.type, w.n_cols));
  uint8_t* act = scratch(ctx, abytes * (size_t)n_tokens);
  for_tokens(ctx, n_tokens, [&](int64_t t) { cpu::scalar_quantize(w.type, x + t * w.n_cols, act + t * abytes, w.n_cols); });
  const auto* base = static_cast<const uint8_t*>(w.data);
  for_rows(ctx, w.n_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = r0; r < r1; ++r)
        y[t * ldy + r] = cpu::scalar_dot(w.type, w.n_cols, base + r * w.row_stride, act + t * abytes);
  });
}

// A path that runs w over n tokens on isa (already capped by the CPU's) and its kernel set.
struct Choice {
  cpu::KernelSet ks;
  KernelPath path = KernelPath::kScalar;
};

bool amx_runs(const QMatrix& w, Isa isa, bool allow_amx) {
  return isa == Isa::kAvx512 && allow_amx && w.data && cpu::amx_supports(w.type) && cpu::amx_usable();
}

// Fills c for `want` when it can run w with n tokens on isa; false (c untouched) otherwise.
bool try_path(const QMatrix& w, Isa isa, KernelPath want, int64_t n, Choice* c) {
  cpu::KernelSet ks;
  bool ok = false;
  switch (want) {
    case KernelPath::kPacked16:
    case KernelPath::kPacked16Hw:
      ok = isa == Isa::kAvx512 && w.packed && w.packed_rows == 16 &&
           cpu::packed16_kernels_avx512(w.type, &ks, want == KernelPath::kPacked16);
      break;
    case KernelPath::kPacked8:
      ok = isa >= Isa::kAvx2 && w.packed && w.packed_rows == 8 && cpu::packed_kernels_avx2(w.type, &ks);
      break;
    case KernelPath::kAmx:
      ok = n >= cpu::amx_min_tokens(w.type) && amx_runs(w, isa, true) && cpu::kernels_avx512(w.type, &ks);
      break;
    case KernelPath::kAvx512: ok = isa == Isa::kAvx512 && w.data && cpu::kernels_avx512(w.type, &ks); break;
    case KernelPath::kAvx2: ok = isa >= Isa::kAvx2 && w.data && cpu::kernels_avx2(w.type, &ks); break;
    case KernelPath::kScalar: ok = w.data != nullptr; break;
  }
  if (ok) *c = Choice{ks, want};
  return ok;
}

// Today's rule (default_path), resolved to a kernel set.
Choice choose_default(const QMatrix& w, Isa isa, bool allow_amx, int64_t n) {
  Choice c;
  const bool packed = w.packed && pack_supported(w.type, isa) && w.packed_rows == packed_group_rows(w.type, isa);
  if (packed) {
    const bool have = try_path(w, isa, w.packed_rows == 16 ? KernelPath::kPacked16 : KernelPath::kPacked8, n, &c);
    DSPARK_CHECK(have);
    return c;
  }
  if (allow_amx && n >= cpu::amx_min_tokens(w.type) && try_path(w, isa, KernelPath::kAmx, n, &c)) return c;
  if (try_path(w, isa, KernelPath::kAvx512, n, &c) || try_path(w, isa, KernelPath::kAvx2, n, &c)) return c;
  c.path = KernelPath::kScalar;
  return c;
}

// Runs a resolved choice.
void run_choice(MatmulContext& ctx, const Choice& choice, const QMatrix& w, const float* x, int64_t n_tokens, float* y,
                int64_t ldy) {
  if (choice.path == KernelPath::kScalar) {
    DSPARK_CHECK(w.data != nullptr);  // packed-only matrices: callers check packed_usable
    matmul_scalar(ctx, w, x, n_tokens, y, ldy);
    return;
  }
  const cpu::KernelSet& ks = choice.ks;
  const cpu::ActLayout L = cpu::act_layout(ks.act, w.n_cols);
  if (choice.path == KernelPath::kAmx) {
    const int64_t n_pad = (n_tokens + cpu::kAmxTokenPad - 1) / cpu::kAmxTokenPad * cpu::kAmxTokenPad;
    uint8_t* buf = scratch(ctx, L.stride * (size_t)n_pad);
    for_tokens(ctx, n_tokens, [&](int64_t t) {
      ks.quantize(x + t * w.n_cols, buf + t * L.stride, L);
      cpu::amx_prepare_act(buf + t * L.stride, L);
    });
    std::memset(buf + (size_t)n_tokens * L.stride, 0, (size_t)(n_pad - n_tokens) * L.stride);
    for_rows(ctx, w.n_rows, [&](int64_t r0, int64_t r1) { cpu::gemm_amx(w, r0, r1, buf, L, n_tokens, y, ldy); });
    return;
  }
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  if (ks.quantize) {
    uint8_t* buf = scratch(ctx, L.stride * (size_t)n_tokens);
    for_tokens(ctx, n_tokens, [&](int64_t t) { ks.quantize(x + t * w.n_cols, buf + t * L.stride, L); });
    act = buf;
  }
  for_rows(ctx, w.n_rows, [&](int64_t r0, int64_t r1) { ks.gemm(w, r0, r1, act, L, n_tokens, y, ldy); });
}

}  // namespace

const char* kernel_path_name(KernelPath p) {
  switch (p) {
    case KernelPath::kScalar: return "scalar";
    case KernelPath::kAvx2: return "avx2";
    case KernelPath::kAvx512: return "avx512";
    case KernelPath::kPacked8: return "packed8";
    case KernelPath::kPacked16: return "packed16";
    case KernelPath::kAmx: return "amx";
    case KernelPath::kPacked16Hw: return "packed16-hw";
  }
  return "unknown";
}

KernelPath default_path(const QMatrix& w, Isa isa, bool allow_amx, int64_t n_tokens) {
  return choose_default(w, std::min(isa, detect_isa()), allow_amx, n_tokens).path;
}

MatmulPath matmul_path(const QMatrix& w, Isa isa, bool allow_amx) {
  isa = std::min(isa, detect_isa());
  const Choice c = choose_default(w, isa, false, 1);
  if (c.path == KernelPath::kScalar)
    return {isa == Isa::kScalar ? std::string("scalar reference kernels")
                                : std::string("scalar reference (no ") + isa_name(isa) + " kernel for " + dtype_name(w.type) + ")",
            false};
  const bool packed = c.path == KernelPath::kPacked16 || c.path == KernelPath::kPacked8;  // default_path: never kPacked16Hw
  std::string k = packed ? std::string("packed x") + std::to_string(w.packed_rows) + " tiles, " + isa_name(isa)
                         : std::string(isa_name(isa)) + " kernels";
  if (!packed && amx_runs(w, isa, allow_amx))
    k += ", AMX-INT8 from " + std::to_string(cpu::amx_min_tokens(w.type)) + " tokens";
  return {k, true};
}

void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  DSPARK_CHECK(w.n_cols % dtype_info(w.type).block_elems == 0);
  const Isa isa = std::min(ctx.isa, detect_isa());  // never run code the CPU lacks
  run_choice(ctx, choose_default(w, isa, ctx.allow_amx, n_tokens), w, x, n_tokens, y, ldy);
}

void matmul_on(MatmulContext& ctx, KernelPath path, const QMatrix& w, const float* x, int64_t n_tokens, float* y,
               int64_t ldy) {
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  DSPARK_CHECK(w.n_cols % dtype_info(w.type).block_elems == 0);
  const Isa isa = std::min(ctx.isa, detect_isa());
  Choice c;
  if (!try_path(w, isa, path, n_tokens, &c)) c = choose_default(w, isa, ctx.allow_amx, n_tokens);
  run_choice(ctx, c, w, x, n_tokens, y, ldy);
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) { dequantize_row_ref(type, src, dst, n); }

}  // namespace dspark::kernels
