// Scalar dequantizers (ggml's dequantize_row_*), written straight from the layouts in quant_blocks.h.
#include <cstring>

#include "core/f16.h"
#include "core/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

void deq_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int e = 0; e < 16; ++e) {
      y[e] = (float)((b[i].qs[e] & 0xF) - 8) * d;
      y[e + 16] = (float)((b[i].qs[e] >> 4) - 8) * d;
    }
  }
}

void deq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int e = 0; e < 16; ++e) {
      y[e] = (float)(b[i].qs[e] & 0xF) * d + m;
      y[e + 16] = (float)(b[i].qs[e] >> 4) * d + m;
    }
  }
}

void deq_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int e = 0; e < 16; ++e) {
      const int q0 = (b[i].qs[e] & 0xF) | (int)(((qh >> e) & 1) << 4);
      const int q1 = (b[i].qs[e] >> 4) | (int)(((qh >> (e + 16)) & 1) << 4);
      y[e] = (float)(q0 - 16) * d;
      y[e + 16] = (float)(q1 - 16) * d;
    }
  }
}

void deq_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int e = 0; e < 16; ++e) {
      const int q0 = (b[i].qs[e] & 0xF) | (int)(((qh >> e) & 1) << 4);
      const int q1 = (b[i].qs[e] >> 4) | (int)(((qh >> (e + 16)) & 1) << 4);
      y[e] = (float)q0 * d + m;
      y[e + 16] = (float)q1 * d + m;
    }
  }
}

void deq_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int e = 0; e < 32; ++e) y[e] = (float)b[i].qs[e] * d;
  }
}

void deq_q8_1(const BlockQ8_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int e = 0; e < 32; ++e) y[e] = (float)b[i].qs[e] * d;
  }
}

void deq_q4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
        y[32 * j + l] = d * (float)sc * (float)v - dmin * (float)m;
      }
    }
  }
}

void deq_q5_K(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
        v += ((b[i].qh[l] >> j) & 1) << 4;
        y[32 * j + l] = d * (float)sc * (float)v - dmin * (float)m;
      }
    }
  }
}

void deq_q6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = fp16_to_fp32(b[i].d);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
      const uint8_t lb = b[i].ql[64 * h + 32 * (g % 2) + l];
      const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
      const int hi = (b[i].qh[32 * h + l] >> (2 * g)) & 3;
      y[e] = d * (float)b[i].scales[e / 16] * (float)((lo | (hi << 4)) - 32);
    }
  }
}

void deq_q8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256)
    for (int e = 0; e < 256; ++e) y[e] = b[i].d * (float)b[i].qs[e];
}

}  // namespace

void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, (size_t)n * 4); return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case DType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / 32); return;
    case DType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / 32); return;
    case DType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, n / 32); return;
    case DType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, n / 32); return;
    case DType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / 32); return;
    case DType::Q8_1: deq_q8_1(static_cast<const BlockQ8_1*>(src), dst, n / 32); return;
    case DType::Q4_K: deq_q4_K(static_cast<const BlockQ4_K*>(src), dst, n / 256); return;
    case DType::Q5_K: deq_q5_K(static_cast<const BlockQ5_K*>(src), dst, n / 256); return;
    case DType::Q6_K: deq_q6_K(static_cast<const BlockQ6_K*>(src), dst, n / 256); return;
    case DType::Q8_K: deq_q8_K(static_cast<const BlockQ8_K*>(src), dst, n / 256); return;
    default: DSPARK_CHECK(false && "dequantize_row_ref: unsupported type");
  }
}

}  // namespace dspark::kernels
