// Portable (baseline x86-64) matmul kernels with the SIMD paths' quantizers and the canonical
// accumulation of cpu.h, so the scalar ISA gives bitwise the same y as AVX2 / AVX-512 / AMX.
// fmaf is correctly rounded everywhere (hardware FMA or glibc's exact emulation).
#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "core/status.h"
#include "kernels/cpu/cpu.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels::cpu {
namespace {

// Scalar activation row for 32-blocks: int8 q[n], then f32 d[n / 32], then f32 s[n / 32].
struct Act32 {
  const int8_t* q;
  const float* d;
  const float* s;
};
Act32 act32(const uint8_t* p, int64_t n) {
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + n),
          reinterpret_cast<const float*>(p + n + n / 32 * 4)};
}

inline float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// As quantize_q8_32 (gemm_impl.h): d = f16(amax / 127), q = round_half_even(x * (127 / amax)),
// s = f16((amax / 127) * sum q).
void quantize32(const float* x, uint8_t* dst, int64_t n) {
  auto* q = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + n);
  auto* s = reinterpret_cast<float*>(dst + n + n / 32 * 4);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[32 * b + i]));
    const float df = amax / 127.f;
    d[b] = round_f16(df);
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int v = (int)std::nearbyint(x[32 * b + i] * id);
      q[32 * b + i] = (int8_t)v;
      sum += v;
    }
    s[b] = round_f16(df * (float)sum);
  }
}

inline int nib(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }
inline int bit5(const uint8_t* qh4, int e) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  return (int)((qh >> e) & 1) << 4;
}

template <class B, class W>
float dot32(int64_t n, const uint8_t* wp, const Act32& a, W weight, bool with_min) {
  const auto* w = reinterpret_cast<const B*>(wp);
  float acc = 0.f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int e = 0; e < 32; ++e) isum += weight(w[b], e) * a.q[32 * b + e];
    acc = std::fmaf((float)isum, fp16_to_fp32(w[b].d) * a.d[b], acc);
    if (with_min) {
      if constexpr (requires { w[b].m; }) acc = std::fmaf(fp16_to_fp32(w[b].m), a.s[b], acc);
    }
  }
  return acc;
}

template <class B>
float dot_k45(int64_t n, const uint8_t* wp, const BlockQ8_K* a) {
  const auto* w = reinterpret_cast<const B*>(wp);
  float acc = 0.f;
  for (int64_t b = 0; b < n / 256; ++b) {
    int32_t I = 0, M = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, w[b].scales, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
        if constexpr (requires { w[b].qh; }) v += ((w[b].qh[l] >> j) & 1) << 4;
        s += v * a[b].qs[32 * j + l];
      }
      I += sc * s;
      M += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    acc = std::fmaf((float)I, fp16_to_fp32(w[b].d) * a[b].d, acc);
    acc = std::fmaf(-(float)M, fp16_to_fp32(w[b].dmin) * a[b].d, acc);
  }
  return acc;
}

float dot_q6_K(int64_t n, const uint8_t* wp, const BlockQ8_K* a) {
  const auto* w = reinterpret_cast<const BlockQ6_K*>(wp);
  float acc = 0.f;
  for (int64_t b = 0; b < n / 256; ++b) {
    int32_t I = 0;
    for (int k = 0; k < 16; ++k) {
      int s = 0;
      for (int e = 16 * k; e < 16 * k + 16; ++e) {
        const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
        const uint8_t lb = w[b].ql[64 * h + 32 * (g % 2) + l];
        const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
        const int hi = (w[b].qh[32 * h + l] >> (2 * g)) & 3;
        s += ((lo | (hi << 4)) - 32) * a[b].qs[e];
      }
      I += w[b].scales[k] * s;
    }
    acc = std::fmaf((float)I, fp16_to_fp32(w[b].d) * a[b].d, acc);
  }
  return acc;
}

// ftile (gemm_impl.h): 8 lanes of fma, hsum8's tree, fma tail.
template <class Load>
float dot_float(int64_t n, const uint8_t* w, const float* x, Load load) {
  float l[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) l[k] = std::fmaf(load(w, i + k), x[i + k], l[k]);
  float s[4];
  for (int k = 0; k < 4; ++k) s[k] = l[k] + l[k + 4];
  const float t0 = s[0] + s[2], t1 = s[1] + s[3];
  float r = t0 + t1;
  for (; i < n; ++i) r = std::fmaf(load(w, i), x[i], r);
  return r;
}

}  // namespace

size_t scalar_act_bytes(DType t, int64_t n_cols) {
  switch (vec_dot_type(t)) {
    case DType::Q8_0:
    case DType::Q8_1: return (size_t)n_cols + (size_t)(n_cols / 32) * 8;
    case DType::Q8_K: return row_bytes(DType::Q8_K, n_cols);
    default: return (size_t)n_cols * 4;
  }
}

void scalar_quantize(DType t, const float* x, uint8_t* dst, int64_t n_cols) {
  switch (vec_dot_type(t)) {
    case DType::Q8_0:
    case DType::Q8_1: quantize32(x, dst, n_cols); break;
    case DType::Q8_K: quantize_row_q8_K_ref(x, dst, n_cols); break;  // bit-exact with the SIMD Q8_K
    default: std::memcpy(dst, x, (size_t)n_cols * 4); break;
  }
}

float scalar_dot(DType t, int64_t n, const uint8_t* w, const uint8_t* act) {
  const Act32 a = act32(act, n);
  const auto* ak = reinterpret_cast<const BlockQ8_K*>(act);
  const auto* x = reinterpret_cast<const float*>(act);
  switch (t) {
    case DType::Q8_0:
      return dot32<BlockQ8_0>(n, w, a, [](const BlockQ8_0& b, int e) { return (int)b.qs[e]; }, false);
    case DType::Q4_0:
      return dot32<BlockQ4_0>(n, w, a, [](const BlockQ4_0& b, int e) { return nib(b.qs, e) - 8; }, false);
    case DType::Q5_0:
      return dot32<BlockQ5_0>(n, w, a, [](const BlockQ5_0& b, int e) { return nib(b.qs, e) + bit5(b.qh, e) - 16; },
                              false);
    case DType::Q4_1:
      return dot32<BlockQ4_1>(n, w, a, [](const BlockQ4_1& b, int e) { return nib(b.qs, e); }, true);
    case DType::Q5_1:
      return dot32<BlockQ5_1>(n, w, a, [](const BlockQ5_1& b, int e) { return nib(b.qs, e) + bit5(b.qh, e); }, true);
    case DType::Q4_K: return dot_k45<BlockQ4_K>(n, w, ak);
    case DType::Q5_K: return dot_k45<BlockQ5_K>(n, w, ak);
    case DType::Q6_K: return dot_q6_K(n, w, ak);
    case DType::F32:
      return dot_float(n, w, x, [](const uint8_t* p, int64_t i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
      });
    case DType::F16:
      return dot_float(n, w, x, [](const uint8_t* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return fp16_to_fp32(h);
      });
    case DType::BF16:
      return dot_float(n, w, x, [](const uint8_t* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return bf16_to_fp32(h);
      });
    default: DSPARK_CHECK(false && "scalar_dot: unsupported type"); return 0.f;
  }
}

}  // namespace dspark::kernels::cpu
