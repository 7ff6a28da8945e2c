// Scalar dot products (ggml-cpu's generic vec_dot_* in quants.c) and the two reference matrix products.
#include <cstring>
#include <vector>

#include "core/f16.h"
#include "core/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

// Weight value q (before offset / scale) of element e of a 32-block with 4-bit qs and optional qh.
inline int nib(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }
inline int bit5(const uint8_t* qh4, int e) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  return (int)((qh >> e) & 1) << 4;
}

float dot_q4_0(int64_t nb, const BlockQ4_0* w, const BlockQ8_0* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int s = 0;
    for (int e = 0; e < 32; ++e) s += (nib(w[i].qs, e) - 8) * a[i].qs[e];
    sum += (float)s * (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
  }
  return sum;
}

float dot_q4_1(int64_t nb, const BlockQ4_1* w, const BlockQ8_1* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int s = 0;
    for (int e = 0; e < 32; ++e) s += nib(w[i].qs, e) * a[i].qs[e];
    sum += (float)s * (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) + fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
  }
  return sum;
}

float dot_q5_0(int64_t nb, const BlockQ5_0* w, const BlockQ8_0* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int s = 0;
    for (int e = 0; e < 32; ++e) s += (nib(w[i].qs, e) + bit5(w[i].qh, e) - 16) * a[i].qs[e];
    sum += (float)s * (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
  }
  return sum;
}

float dot_q5_1(int64_t nb, const BlockQ5_1* w, const BlockQ8_1* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int s = 0;
    for (int e = 0; e < 32; ++e) s += (nib(w[i].qs, e) + bit5(w[i].qh, e)) * a[i].qs[e];
    sum += (float)s * (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d)) + fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
  }
  return sum;
}

float dot_q8_0(int64_t nb, const BlockQ8_0* w, const BlockQ8_0* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int s = 0;
    for (int e = 0; e < 32; ++e) s += w[i].qs[e] * a[i].qs[e];
    sum += (float)s * (fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
  }
  return sum;
}

// Q4_K / Q5_K: d*da*sum_j sc_j*isum_j - dmin*da*sum_j m_j*(bsums[2j] + bsums[2j+1]).
template <class B>
float dot_k45(int64_t nb, const B* w, const BlockQ8_K* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int sum_sc = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, w[i].scales, &sc, &m);
      const uint8_t* q = w[i].qs + 32 * (j / 2);
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
        if constexpr (requires { w[i].qh; }) v += ((w[i].qh[l] >> j) & 1) << 4;
        s += v * a[i].qs[32 * j + l];
      }
      sum_sc += sc * s;
      sum_m += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    sum += fp16_to_fp32(w[i].d) * a[i].d * (float)sum_sc - fp16_to_fp32(w[i].dmin) * a[i].d * (float)sum_m;
  }
  return sum;
}

float dot_q6_K(int64_t nb, const BlockQ6_K* w, const BlockQ8_K* a) {
  float sum = 0.f;
  for (int64_t i = 0; i < nb; ++i) {
    int total = 0;
    for (int k = 0; k < 16; ++k) {
      int s = 0;
      for (int e = 16 * k; e < 16 * k + 16; ++e) {
        const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
        const uint8_t lb = w[i].ql[64 * h + 32 * (g % 2) + l];
        const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
        const int hi = (w[i].qh[32 * h + l] >> (2 * g)) & 3;
        s += ((lo | (hi << 4)) - 32) * a[i].qs[e];
      }
      total += w[i].scales[k] * s;
    }
    sum += fp16_to_fp32(w[i].d) * a[i].d * (float)total;
  }
  return sum;
}

// F16 / BF16: ggml rounds the activation to the weight's type and accumulates in double.
float dot_half(int64_t n, const uint16_t* w, const uint16_t* a, bool bf16) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float wv = bf16 ? bf16_to_fp32(w[i]) : fp16_to_fp32(w[i]);
    const float av = bf16 ? bf16_to_fp32(a[i]) : fp16_to_fp32(a[i]);
    sum += (double)wv * (double)av;
  }
  return (float)sum;
}

}  // namespace

DType vec_dot_type(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: return DType::Q8_0;
    case DType::Q4_1: case DType::Q5_1: return DType::Q8_1;
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return DType::Q8_K;
    case DType::F16: return DType::F16;
    case DType::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

float vec_dot_ref(DType t, int64_t n, const void* w, const void* a) {
  switch (t) {
    case DType::Q4_0: return dot_q4_0(n / 32, static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(a));
    case DType::Q4_1: return dot_q4_1(n / 32, static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a));
    case DType::Q5_0: return dot_q5_0(n / 32, static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a));
    case DType::Q5_1: return dot_q5_1(n / 32, static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a));
    case DType::Q8_0: return dot_q8_0(n / 32, static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(a));
    case DType::Q4_K:
      return dot_k45(n / 256, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a));
    case DType::Q5_K:
      return dot_k45(n / 256, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a));
    case DType::Q6_K: return dot_q6_K(n / 256, static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(a));
    case DType::F16: return dot_half(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), false);
    case DType::BF16: return dot_half(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), true);
    case DType::F32: {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i)
        sum += (double)static_cast<const float*>(w)[i] * (double)static_cast<const float*>(a)[i];
      return (float)sum;
    }
    default: DSPARK_CHECK(false && "vec_dot_ref: unsupported type"); return 0.f;
  }
}

void matmul_ref(const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  const DType at = vec_dot_type(w.type);
  const size_t abytes = row_bytes(at, w.n_cols);
  std::vector<uint8_t> act(abytes);
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_row_ref(at, x + t * w.n_cols, act.data(), w.n_cols);
    for (int64_t r = 0; r < w.n_rows; ++r)
      y[t * ldy + r] = vec_dot_ref(w.type, w.n_cols, static_cast<const uint8_t*>(w.data) + r * w.row_stride, act.data());
  }
}

void matmul_f32_ref(const QMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  std::vector<float> row((size_t)w.n_cols);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, row.data(), w.n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < w.n_cols; ++c) sum += (double)row[c] * (double)x[t * w.n_cols + c];
      y[t * ldy + r] = (float)sum;
    }
  }
}

}  // namespace dspark::kernels
