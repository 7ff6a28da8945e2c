// Scalar quantizers. Activation quantizers and legacy weight quantizers follow ggml's
// quantize_row_*_ref (src/ggml-quants.c); K-quant weight quantizers are a simple min/max fit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "core/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

// Round half to even for |v| < 2^22 (ggml nearest_int).
inline int nearest_int(float v) {
  float val = v + 12582912.f;
  int i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Signed value of largest magnitude in x[0..n) (first one wins on ties), and its magnitude.
inline float signed_absmax(const float* x, int n, float* amax_out) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax_out) *amax_out = amax;
  return max;
}

// Packs 6-bit (sc, m) of sub-block j into Q4_K/Q5_K scales[12] (inverse of get_scale_min_k4).
void pack_scale_min_k4(int j, uint8_t sc, uint8_t m, uint8_t* s) {
  if (j < 4) {
    s[j] = (uint8_t)((s[j] & 0xC0) | sc);
    s[j + 4] = (uint8_t)((s[j + 4] & 0xC0) | m);
  } else {
    s[j + 4] = (uint8_t)((sc & 0xF) | ((m & 0xF) << 4));
    s[j - 4] = (uint8_t)(s[j - 4] | ((sc >> 4) << 6));
    s[j] = (uint8_t)(s[j] | ((m >> 4) << 6));
  }
}

// Q4_K / Q5_K: per sub-block of 32, fit y = scale*q - min with q in [0, qmax]; scales and mins
// are then quantized to 6 bits against super-block d / dmin. Returns q in L[256].
void quantize_k_block(const float* x, int qmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales,
                      uint8_t* L) {
  float sc_f[8], mn_f[8];
  float max_sc = 0.f, max_mn = 0.f;
  for (int j = 0; j < 8; ++j) {
    float lo = x[32 * j], hi = x[32 * j];
    for (int l = 1; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    lo = std::min(lo, 0.f);  // min term is subtracted: keep it non-negative
    sc_f[j] = (hi - lo) / (float)qmax;
    mn_f[j] = -lo;
    max_sc = std::max(max_sc, sc_f[j]);
    max_mn = std::max(max_mn, mn_f[j]);
  }
  const float d = max_sc / 63.f, dmin = max_mn / 63.f;
  *d_out = fp32_to_fp16(d);
  *dmin_out = fp32_to_fp16(dmin);
  const float dq = fp16_to_fp32(*d_out), dminq = fp16_to_fp32(*dmin_out);
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    int ls = dq > 0 ? std::clamp(nearest_int(sc_f[j] / dq), 0, 63) : 0;
    int lm = dminq > 0 ? std::clamp(nearest_int(mn_f[j] / dminq), 0, 63) : 0;
    pack_scale_min_k4(j, (uint8_t)ls, (uint8_t)lm, scales);
    const float s = dq * (float)ls, m = dminq * (float)lm;
    for (int l = 0; l < 32; ++l) {
      const int q = s > 0 ? nearest_int((x[32 * j + l] + m) / s) : 0;
      L[32 * j + l] = (uint8_t)std::clamp(q, 0, qmax);
    }
  }
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = (int8_t)std::round(x[j] * id);
  }
}

void quantize_row_q8_1_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[i].qs[j] = (int8_t)std::round(x[j] * id);
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16((float)sum * d);
  }
}

void quantize_row_q8_K_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    float amax;
    const float max = signed_absmax(x, 256, &amax);
    if (amax == 0.f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) y[i].qs[j] = (int8_t)std::min(127, nearest_int(iscale * x[j]));
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * k + l];
      y[i].bsums[k] = (int16_t)sum;
    }
    y[i].d = 1.f / iscale;
  }
}

void quantize_row_q4_0_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float max = signed_absmax(x, 32, nullptr);
    const float d = max / -8.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const uint8_t a = (uint8_t)std::min(15, (int)(int8_t)(x[j] * id + 8.5f));
      const uint8_t b = (uint8_t)std::min(15, (int)(int8_t)(x[j + 16] * id + 8.5f));
      y[i].qs[j] = (uint8_t)(a | (b << 4));
    }
  }
}

void quantize_row_q4_1_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
    const float d = (hi - lo) / 15.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(lo);
    for (int j = 0; j < 16; ++j) {
      const uint8_t a = (uint8_t)std::min(15, (int)(int8_t)((x[j] - lo) * id + 0.5f));
      const uint8_t b = (uint8_t)std::min(15, (int)(int8_t)((x[j + 16] - lo) * id + 0.5f));
      y[i].qs[j] = (uint8_t)(a | (b << 4));
    }
  }
}

void quantize_row_q5_0_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float max = signed_absmax(x, 32, nullptr);
    const float d = max / -16.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int a = std::min(31, (int)(int8_t)(x[j] * id + 16.5f));
      const int b = std::min(31, (int)(int8_t)(x[j + 16] * id + 16.5f));
      y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
      qh |= (uint32_t)((a & 0x10) >> 4) << j;
      qh |= (uint32_t)((b & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q5_1_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
    const float d = (hi - lo) / 31.f;
    const float id = d ? 1.f / d : 0.f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int a = std::min(31, (int)((x[j] - lo) * id + 0.5f));
      const int b = std::min(31, (int)((x[j + 16] - lo) * id + 0.5f));
      y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
      qh |= (uint32_t)((a & 0x10) >> 4) << j;
      qh |= (uint32_t)((b & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q4_K_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  uint8_t L[256];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    quantize_k_block(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int j = 0; j < 8; j += 2)
      for (int l = 0; l < 32; ++l)
        y[i].qs[16 * j + l] = (uint8_t)(L[32 * j + l] | (L[32 * (j + 1) + l] << 4));
  }
}

void quantize_row_q5_K_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  uint8_t L[256];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    quantize_k_block(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, 32);
    for (int j = 0; j < 8; ++j)
      for (int l = 0; l < 32; ++l) y[i].qh[l] = (uint8_t)(y[i].qh[l] | (((L[32 * j + l] >> 4) & 1) << j));
    for (int j = 0; j < 8; j += 2)
      for (int l = 0; l < 32; ++l)
        y[i].qs[16 * j + l] = (uint8_t)((L[32 * j + l] & 0xF) | ((L[32 * (j + 1) + l] & 0xF) << 4));
  }
}

void quantize_row_q6_K_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    float sub[16];
    float max_scale = 0.f, amax_scale = 0.f;
    for (int k = 0; k < 16; ++k) {
      sub[k] = signed_absmax(x + 16 * k, 16, nullptr) / -32.f;
      if (std::fabs(sub[k]) > amax_scale) amax_scale = std::fabs(sub[k]), max_scale = sub[k];
    }
    std::memset(&y[i], 0, sizeof(BlockQ6_K));
    if (amax_scale == 0.f) continue;
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1.f / iscale);
    const float d = fp16_to_fp32(y[i].d);
    uint8_t L[256];
    for (int k = 0; k < 16; ++k) {
      const int ls = std::min(127, nearest_int(iscale * sub[k]));
      y[i].scales[k] = (int8_t)ls;
      const float s = d * (float)ls;
      for (int l = 0; l < 16; ++l) {
        const int q = s != 0.f ? nearest_int(x[16 * k + l] / s) : 0;
        L[16 * k + l] = (uint8_t)(std::clamp(q, -32, 31) + 32);
      }
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
      uint8_t& lb = y[i].ql[64 * h + 32 * (g % 2) + l];
      lb = (uint8_t)(lb | (g < 2 ? (L[e] & 0xF) : ((L[e] & 0xF) << 4)));
      y[i].qh[32 * h + l] = (uint8_t)(y[i].qh[32 * h + l] | ((L[e] >> 4) << (2 * g)));
    }
  }
}

void quantize_row_ref(DType type, const float* x, void* y, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(y, x, (size_t)n * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = fp32_to_fp16(x[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(y)[i] = fp32_to_bf16(x[i]);
      return;
    case DType::Q4_0: quantize_row_q4_0_ref(x, y, n); return;
    case DType::Q4_1: quantize_row_q4_1_ref(x, y, n); return;
    case DType::Q5_0: quantize_row_q5_0_ref(x, y, n); return;
    case DType::Q5_1: quantize_row_q5_1_ref(x, y, n); return;
    case DType::Q8_0: quantize_row_q8_0_ref(x, y, n); return;
    case DType::Q8_1: quantize_row_q8_1_ref(x, y, n); return;
    case DType::Q4_K: quantize_row_q4_K_ref(x, y, n); return;
    case DType::Q5_K: quantize_row_q5_K_ref(x, y, n); return;
    case DType::Q6_K: quantize_row_q6_K_ref(x, y, n); return;
    case DType::Q8_K: quantize_row_q8_K_ref(x, y, n); return;
    default: DSPARK_CHECK(false && "quantize_row_ref: unsupported type");
  }
}

}  // namespace dspark::kernels
