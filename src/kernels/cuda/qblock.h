// Block arithmetic of the CUDA backend's matmul, written once for the device and the host.
//
// The CUDA kernels (cuda_matmul.cu) follow the CPU's canonical accumulation (kernels/cpu/cpu.h): the
// activation row is quantized by the same rule (Q8_0 / Q8_1 blocks of 32 or Q8_K blocks of 256), each
// block's integer sum is exact, and the f32 steps per (weight row, token) run block after block in the
// same order with the same fused multiply-adds. So a device matmul gives the CPU's bits, and the
// functions below are tested on the host against cpu/canonical_scalar.cpp, bit for bit, on any machine
// (tests/unit/kernels/test_cuda_qblock.cpp).
//
// Scalar activation row of 32-blocks (Act32), as canonical_scalar.cpp lays it out:
//   q [n] int8, then d [n / 32] f32 (f16-rounded scales), then s [n / 32] f32 (Q8_1: f16(d * sum q)).
// K-quant rows are BlockQ8_K [n / 256] (kernels/quant_blocks.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/quant_blocks.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define DSPARK_HD __host__ __device__ __forceinline__
#else
#define DSPARK_HD inline
#endif

namespace dspark::kernels::cuda {

DSPARK_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
DSPARK_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// IEEE binary16 <-> f32, exact / round to nearest even (core/f16.h's rules). On the device, the
// hardware's conversions: the same values for every input but NaN (whose payload may differ), at an
// instruction each; the host build's tests check the portable code below.
DSPARK_HD float half_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#endif
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    return bits_float(sign | (exp << 23) | ((mant & 0x3FFu) << 13));
  }
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant << 13));
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

DSPARK_HD uint16_t float_half(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#endif
  const uint32_t x = float_bits(f), sign = (x >> 16) & 0x8000u, absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) return (uint16_t)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0));
  if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
  if (absx < 0x38800000u) {
    if (absx < 0x33000000u) return (uint16_t)sign;
    const uint32_t e = absx >> 23, m = (absx & 0x7FFFFFu) | 0x800000u, shift = 126 - e;
    uint32_t v = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return (uint16_t)(sign | v);
  }
  uint32_t v = (absx >> 13) - ((127 - 15) << 10);
  const uint32_t rem = absx & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1))) ++v;
  return (uint16_t)(sign | v);
}

DSPARK_HD float round_half(float v) { return half_float(float_half(v)); }

DSPARK_HD float round_even(float v) {  // nearest integer, ties to even (the current rounding mode)
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return std::nearbyint(v);
#endif
}

// ---- activations ---------------------------------------------------------------------------

// One 32-block of a Q8_0 / Q8_1 activation row (canonical_scalar.cpp quantize32): d = f16(amax / 127),
// q = round_even(x * (127 / amax)), s = f16((amax / 127) * sum q).
DSPARK_HD void quantize_block32(const float* x, int8_t* q, float* d, float* s) {
  float amax = 0.f;
  for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float df = amax / 127.f;
  *d = round_half(df);
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int v = (int)round_even(x[i] * id);
    q[i] = (int8_t)v;
    sum += v;
  }
  *s = round_half(df * (float)sum);
}

// ggml's nearest_int: round half to even for |v| < 2^22 through the f32 mantissa.
DSPARK_HD int nearest_int(float v) {
  const uint32_t i = float_bits(v + 12582912.f);
  return (int)(i & 0x007fffffu) - 0x00400000;
}

// One Q8_K block (ref/quant_ref.cpp quantize_row_q8_K_ref): the signed value of largest magnitude
// (first on ties) sets iscale = -127 / max.
DSPARK_HD void quantize_block_q8_K(const float* x, BlockQ8_K* y) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < 256; ++j)
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  if (amax == 0.f) {
    memset(y, 0, sizeof(BlockQ8_K));
    return;
  }
  const float iscale = -127.f / max;
  for (int j = 0; j < 256; ++j) {
    const int v = nearest_int(iscale * x[j]);
    y->qs[j] = (int8_t)(v < 127 ? v : 127);
  }
  for (int k = 0; k < 16; ++k) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += y->qs[16 * k + l];
    y->bsums[k] = (int16_t)sum;
  }
  y->d = 1.f / iscale;
}

// ---- weights: exact integer sums of one block against its activations ----------------------

DSPARK_HD int nibble(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }
DSPARK_HD int fifth_bit(const uint8_t* qh4, int e) {
  const uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
  return (int)((qh >> e) & 1) << 4;
}

// The integer weight of element e (0..31) of a 32-block, as the dot product sees it.
DSPARK_HD int weight_q(const BlockQ8_0& b, int e) { return b.qs[e]; }
DSPARK_HD int weight_q(const BlockQ4_0& b, int e) { return nibble(b.qs, e) - 8; }
DSPARK_HD int weight_q(const BlockQ5_0& b, int e) { return nibble(b.qs, e) + fifth_bit(b.qh, e) - 16; }
DSPARK_HD int weight_q(const BlockQ4_1& b, int e) { return nibble(b.qs, e); }
DSPARK_HD int weight_q(const BlockQ5_1& b, int e) { return nibble(b.qs, e) + fifth_bit(b.qh, e); }

template <class B>
DSPARK_HD int block_isum(const B& b, const int8_t* a) {
  int s = 0;
  for (int e = 0; e < 32; ++e) s += weight_q(b, e) * a[e];
  return s;
}

template <class B>
inline constexpr bool kHasMin = false;
template <>
inline constexpr bool kHasMin<BlockQ4_1> = true;
template <>
inline constexpr bool kHasMin<BlockQ5_1> = true;

// One canonical step of a 32-block (cpu.h): acc = fma(isum, d_w * d_a, acc), then for Q4_1 / Q5_1
// acc = fma(m_w, s_a, acc).
template <class B>
DSPARK_HD float step32(float acc, const B& b, int isum, float d_a, float s_a) {
  acc = fmaf((float)isum, half_float(b.d) * d_a, acc);
  if constexpr (kHasMin<B>) acc = fmaf(half_float(b.m), s_a, acc);
  return acc;
}

// Q4_K / Q5_K 6-bit scale and min of sub-block j (quant_blocks.h get_scale_min_k4).
DSPARK_HD void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K sub-block j (0..7) of a super-block: its part of I = sum_j sc_j * isum_j and of
// M = sum_j m_j * (bsums[2j] + bsums[2j+1]). Integer sums, so the parts add up in any order.
template <class B>
DSPARK_HD void k45_sub(const B& w, const BlockQ8_K& a, int j, int32_t* I, int32_t* M) {
  int sc, m;
  scale_min_k4(j, w.scales, &sc, &m);
  const uint8_t* q = w.qs + 32 * (j / 2);
  int s = 0;
  for (int l = 0; l < 32; ++l) {
    int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
    if constexpr (sizeof(B) == sizeof(BlockQ5_K)) v += ((w.qh[l] >> j) & 1) << 4;
    s += v * a.qs[32 * j + l];
  }
  *I = sc * s;
  *M = m * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
}

template <class B>
DSPARK_HD void k45_sums(const B& w, const BlockQ8_K& a, int32_t* I_out, int32_t* M_out) {
  int32_t I = 0, M = 0;
  for (int j = 0; j < 8; ++j) {
    int32_t i, m;
    k45_sub(w, a, j, &i, &m);
    I += i;
    M += m;
  }
  *I_out = I;
  *M_out = M;
}

template <class B>
DSPARK_HD float step_k45(float acc, const B& w, const BlockQ8_K& a, int32_t I, int32_t M) {
  acc = fmaf((float)I, half_float(w.d) * a.d, acc);
  return fmaf(-(float)M, half_float(w.dmin) * a.d, acc);
}

// Q6_K sub-block k (0..15): scales[k] * isum_k over its 16 elements of (q - 32).
DSPARK_HD int32_t q6_K_sub(const BlockQ6_K& w, const BlockQ8_K& a, int k) {
  int s = 0;
  for (int e = 16 * k; e < 16 * k + 16; ++e) {
    const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
    const uint8_t lb = w.ql[64 * h + 32 * (g % 2) + l];
    const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
    const int hi = (w.qh[32 * h + l] >> (2 * g)) & 3;
    s += ((lo | (hi << 4)) - 32) * a.qs[e];
  }
  return w.scales[k] * s;
}

DSPARK_HD int32_t q6_K_sum(const BlockQ6_K& w, const BlockQ8_K& a) {
  int32_t I = 0;
  for (int k = 0; k < 16; ++k) I += q6_K_sub(w, a, k);
  return I;
}

DSPARK_HD float step_q6_K(float acc, const BlockQ6_K& w, const BlockQ8_K& a, int32_t I) {
  return fmaf((float)I, half_float(w.d) * a.d, acc);
}

// F32 / F16 / BF16 weights against f32 activations (cpu.h "ftile"): 8 lanes of fma in order, the
// fixed hsum8 tree, then the n % 8 tail with fma in order.
DSPARK_HD float load_weight(DType t, const uint8_t* w, int64_t i) {
  if (t == DType::F32) {
    float v;
    memcpy(&v, w + 4 * i, 4);
    return v;
  }
  const uint16_t h = (uint16_t)(w[2 * i] | (uint16_t)w[2 * i + 1] << 8);
  return t == DType::F16 ? half_float(h) : bits_float((uint32_t)h << 16);
}

DSPARK_HD float dot_float(DType t, int64_t n, const uint8_t* w, const float* x) {
  float l[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) l[k] = fmaf(load_weight(t, w, i + k), x[i + k], l[k]);
  float s[4];
  for (int k = 0; k < 4; ++k) s[k] = l[k] + l[k + 4];
  const float t0 = s[0] + s[2], t1 = s[1] + s[3];
  float r = t0 + t1;
  for (; i < n; ++i) r = fmaf(load_weight(t, w, i), x[i], r);
  return r;
}

// Element e of a row of type t, as ref/dequant_ref.cpp computes it (the same products and sums in
// the same order, so the same bits): the embedding rows the device gathers.
DSPARK_HD float dequant_at(DType t, const uint8_t* row, int64_t e) {
  const int i = (int)(e % 32);
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return load_weight(t, row, e);
    case DType::Q4_0: {
      const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[e / 32];
      return (float)(nibble(b.qs, i) - 8) * half_float(b.d);
    }
    case DType::Q4_1: {
      const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[e / 32];
      return (float)nibble(b.qs, i) * half_float(b.d) + half_float(b.m);
    }
    case DType::Q5_0: {
      const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[e / 32];
      return (float)(nibble(b.qs, i) + fifth_bit(b.qh, i) - 16) * half_float(b.d);
    }
    case DType::Q5_1: {
      const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[e / 32];
      return (float)(nibble(b.qs, i) + fifth_bit(b.qh, i)) * half_float(b.d) + half_float(b.m);
    }
    case DType::Q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[e / 32];
      return (float)b.qs[i] * half_float(b.d);
    }
    case DType::Q4_K: case DType::Q5_K: {
      const int64_t k = e % 256;
      const int j = (int)(k / 32), l = (int)(k % 32);
      // Q4_K and Q5_K share the header, scales and qs; Q5_K adds qh before qs.
      const uint8_t* blk = row + (e / 256) * (t == DType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K));
      const auto& h = *reinterpret_cast<const BlockQ4_K*>(blk);
      int sc, m;
      scale_min_k4(j, h.scales, &sc, &m);
      const uint8_t* qs = t == DType::Q4_K ? h.qs : reinterpret_cast<const BlockQ5_K*>(blk)->qs;
      const uint8_t q = qs[32 * (j / 2) + l];
      int v = (j % 2 == 0) ? (q & 0xF) : (q >> 4);
      if (t == DType::Q5_K) v += ((reinterpret_cast<const BlockQ5_K*>(blk)->qh[l] >> j) & 1) << 4;
      return half_float(h.d) * (float)sc * (float)v - half_float(h.dmin) * (float)m;
    }
    case DType::Q6_K: {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[e / 256];
      const int k = (int)(e % 256), h = k / 128, r = k % 128, g = r / 32, l = r % 32;
      const uint8_t lb = b.ql[64 * h + 32 * (g % 2) + l];
      const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
      const int hi = (b.qh[32 * h + l] >> (2 * g)) & 3;
      return half_float(b.d) * (float)b.scales[k / 16] * (float)((lo | (hi << 4)) - 32);
    }
    default: return 0.f;
  }
}

// The weight types the CUDA matmul runs and the activation rows they take.
enum class ActRow { kBlock32, kQ8_K, kF32 };
DSPARK_HD bool supported(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::Q4_1: case DType::Q5_1:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::F32: case DType::F16: case DType::BF16:
      return true;
    default: return false;
  }
}
DSPARK_HD ActRow act_row(DType t) {
  switch (t) {
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return ActRow::kQ8_K;
    case DType::F32: case DType::F16: case DType::BF16: return ActRow::kF32;
    default: return ActRow::kBlock32;
  }
}
// Bytes of one activation row of n elements (the Act32 layout above, BlockQ8_K blocks, or f32).
DSPARK_HD size_t act_row_bytes(DType t, int64_t n) {
  switch (act_row(t)) {
    case ActRow::kBlock32: return (size_t)n + (size_t)(n / 32) * 8;
    case ActRow::kQ8_K: return (size_t)(n / 256) * sizeof(BlockQ8_K);
    default: return (size_t)n * 4;
  }
}

// The whole dot of one weight row with one activation row, block after block: the host oracle of the
// device kernel's per-(row, token) chain (the device forms the block sums in parallel, then runs the
// same chain).
DSPARK_HD float row_dot(DType t, int64_t n, const uint8_t* w, const uint8_t* act) {
  const auto* q = reinterpret_cast<const int8_t*>(act);
  const auto* d = reinterpret_cast<const float*>(act + n);
  const auto* s = reinterpret_cast<const float*>(act + n + n / 32 * 4);
  const auto* ak = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.f;
  auto chain32 = [&](auto* blocks) {
    for (int64_t b = 0; b < n / 32; ++b) acc = step32(acc, blocks[b], block_isum(blocks[b], q + 32 * b), d[b], s[b]);
  };
  switch (t) {
    case DType::Q8_0: chain32(reinterpret_cast<const BlockQ8_0*>(w)); break;
    case DType::Q4_0: chain32(reinterpret_cast<const BlockQ4_0*>(w)); break;
    case DType::Q5_0: chain32(reinterpret_cast<const BlockQ5_0*>(w)); break;
    case DType::Q4_1: chain32(reinterpret_cast<const BlockQ4_1*>(w)); break;
    case DType::Q5_1: chain32(reinterpret_cast<const BlockQ5_1*>(w)); break;
    case DType::Q4_K:
    case DType::Q5_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        int32_t I, M;
        if (t == DType::Q4_K) {
          const auto& wb = reinterpret_cast<const BlockQ4_K*>(w)[b];
          k45_sums(wb, ak[b], &I, &M);
          acc = step_k45(acc, wb, ak[b], I, M);
        } else {
          const auto& wb = reinterpret_cast<const BlockQ5_K*>(w)[b];
          k45_sums(wb, ak[b], &I, &M);
          acc = step_k45(acc, wb, ak[b], I, M);
        }
      }
      break;
    case DType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        const auto& wb = reinterpret_cast<const BlockQ6_K*>(w)[b];
        acc = step_q6_K(acc, wb, ak[b], q6_K_sum(wb, ak[b]));
      }
      break;
    default: acc = dot_float(t, n, w, reinterpret_cast<const float*>(act)); break;
  }
  return acc;
}

// One activation row quantized for weight type t (act_row_bytes(t, n) bytes at dst).
DSPARK_HD void quantize_row(DType t, const float* x, uint8_t* dst, int64_t n) {
  switch (act_row(t)) {
    case ActRow::kBlock32: {
      auto* q = reinterpret_cast<int8_t*>(dst);
      auto* d = reinterpret_cast<float*>(dst + n);
      auto* s = reinterpret_cast<float*>(dst + n + n / 32 * 4);
      for (int64_t b = 0; b < n / 32; ++b) quantize_block32(x + 32 * b, q + 32 * b, d + b, s + b);
      break;
    }
    case ActRow::kQ8_K:
      for (int64_t b = 0; b < n / 256; ++b) quantize_block_q8_K(x + 256 * b, reinterpret_cast<BlockQ8_K*>(dst) + b);
      break;
    default: memcpy(dst, x, (size_t)n * 4); break;
  }
}

}  // namespace dspark::kernels::cuda
