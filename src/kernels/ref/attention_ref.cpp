// Scalar reference attention (the oracles for cpu/attention_*.cpp and attention_f32.cpp).
#include <algorithm>
#include <cmath>

#include "core/f16.h"
#include "kernels/attention.h"
#include "kernels/attention_f32.h"

namespace dspark::kernels {

void attention_f16kv_ref(const float* q, int n_q, int64_t hd, const KvView& kv, int64_t first_pos,
                         int64_t n_main, float* scores, float* out) {
  const int64_t n_keys = n_main + kv.n_extra;
  auto slot = [&](int64_t j) { return (j < n_main ? first_pos + j : kv.extra[j - n_main]) % kv.capacity; };
  for (int h = 0; h < n_q; ++h) {
    float qh[kMaxHeadDim];
    for (int64_t i = 0; i < hd; ++i) qh[i] = fp16_to_fp32(fp32_to_fp16(q[h * hd + i]));
    float* s = scores + h * n_keys;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; ++j) {
      const uint16_t* k = kv.k + slot(j) * kv.stride;
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
      const uint16_t* v = kv.v + slot(j) * kv.stride;
      for (int64_t i = 0; i < hd; ++i) o[i] += p * fp16_to_fp32(v[i]);
    }
  }
}

// One query at a time, keys in order, each dot product summed left to right.
void attention_f32_ref(const float* const* q, float* const* out, int64_t n_q, int64_t head_dim, const F32Rows* segs,
                       int n_segs, float* scores) {
  int64_t n_keys = 0;
  for (int s = 0; s < n_segs; ++s) n_keys += segs[s].n;
  auto row = [&](int64_t i, bool value) {
    int s = 0;
    while (i >= segs[s].n) i -= segs[s++].n;
    return (value ? segs[s].v : segs[s].k) + i * segs[s].stride;
  };
  for (int64_t j = 0; j < n_q; ++j) {
    float* sc = scores + j * n_keys;
    for (int64_t i = 0; i < n_keys; ++i) {
      const float* k = row(i, false);
      float d = 0;
      for (int64_t e = 0; e < head_dim; ++e) d += q[j][e] * k[e];
      sc[i] = d;
    }
  }
  for (int64_t j = 0; j < n_q; ++j) {
    float* p = scores + j * n_keys;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n_keys; ++i) mx = std::max(mx, p[i]);
    double sum = 0;
    for (int64_t i = 0; i < n_keys; ++i) {
      p[i] = std::exp(p[i] - mx);
      sum += p[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n_keys; ++i) p[i] *= inv;
    std::fill(out[j], out[j] + head_dim, 0.0f);
    for (int64_t i = 0; i < n_keys; ++i) {
      const float* v = row(i, true);
      for (int64_t e = 0; e < head_dim; ++e) out[j][e] += p[i] * v[e];
    }
  }
}

}  // namespace dspark::kernels
