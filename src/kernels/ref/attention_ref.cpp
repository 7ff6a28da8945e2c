// Scalar reference attention (the oracle for cpu/attention_*.cpp).
#include <cmath>

#include "core/f16.h"
#include "kernels/attention.h"

namespace dspark::kernels {

void attention_f16kv_ref(const float* q, int n_q, int64_t hd, const KvView& kv, int64_t first_pos,
                         int64_t n_keys, float* scores, float* out) {
  for (int h = 0; h < n_q; ++h) {
    float qh[kMaxHeadDim];
    for (int64_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(q[h * hd + i]));
    float* s = scores + h * n_keys;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; ++j) {
      const uint16_t* k = kv.k + ((first_pos + j) % kv.capacity) * kv.stride;
      float acc = 0;
      for (int64_t i = 0; i < hd; ++i) acc += qh[i] * fp16_to_fp32(k[i]);
      s[j] = acc;
      mx = std::fmax(mx, acc);
    }
    double sum = 0;
    for (int64_t j = 0; j < n_keys; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const float inv = (float)(1.0 / sum);
    float* o = out + h * hd;
    for (int64_t i = 0; i < hd; ++i) o[i] = 0;
    for (int64_t j = 0; j < n_keys; ++j) {
      const float p = fp16_to_fp32(fp32_to_fp16(s[j] * inv));
      const uint16_t* v = kv.v + ((first_pos + j) % kv.capacity) * kv.stride;
      for (int64_t i = 0; i < hd; ++i) o[i] += p * fp16_to_fp32(v[i]);
    }
  }
}

}  // namespace dspark::kernels
