#include "kernels/attention_f32.h"

#include <algorithm>
#include <cmath>

#include "kernels/clones.h"

namespace dspark::kernels {

namespace {

int64_t total_keys(const F32Rows* segs, int n_segs) {
  int64_t n = 0;
  for (int s = 0; s < n_segs; ++s) n += segs[s].n;
  return n;
}

// softmax of each query's scores row in place, as the reference: max, exp in f32, sum in double.
void softmax_rows(float* scores, int64_t n_q, int64_t n_keys) {
  for (int64_t j = 0; j < n_q; ++j) {
    float* sc = scores + j * n_keys;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n_keys; ++i) mx = std::max(mx, sc[i]);
    double sum = 0;
    for (int64_t i = 0; i < n_keys; ++i) {
      sc[i] = std::exp(sc[i] - mx);
      sum += sc[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n_keys; ++i) sc[i] *= inv;
  }
}

// scores[j, i0 + i] = q_j · k_i for the rows of one segment; each K row is read once for all queries.
DSPARK_CLONES void scores_pass(const float* const* q, int64_t n_q, int64_t hd, const F32Rows& seg, float* scores,
                               int64_t n_keys, int64_t i0) {
  constexpr int kLanes = 16;
  for (int64_t i = 0; i < seg.n; ++i) {
    const float* k = seg.k + i * seg.stride;
    for (int64_t j = 0; j < n_q; ++j) {
      const float* qj = q[j];
      float acc[kLanes] = {0};
      int64_t e = 0;
      for (; e + kLanes <= hd; e += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += qj[e + l] * k[e + l];
      for (int w = kLanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
      float d = acc[0];
      for (; e < hd; ++e) d += qj[e] * k[e];
      scores[j * n_keys + i0 + i] = d;
    }
  }
}

// out_j += p_ji * v_i over the rows of one segment, keys in order for every output element.
DSPARK_CLONES void values_pass(float* const* out, int64_t n_q, int64_t hd, const F32Rows& seg, const float* probs,
                               int64_t n_keys, int64_t i0) {
  for (int64_t i = 0; i < seg.n; ++i) {
    const float* v = seg.v + i * seg.stride;
    for (int64_t j = 0; j < n_q; ++j) {
      const float p = probs[j * n_keys + i0 + i];
      float* o = out[j];
      for (int64_t e = 0; e < hd; ++e) o[e] += p * v[e];
    }
  }
}

}  // namespace

void attention_f32(Isa isa, const float* const* q, float* const* out, int64_t n_q, int64_t head_dim,
                   const F32Rows* segs, int n_segs, float* scores) {
  if (isa == Isa::kAvx512 && head_dim % 16 == 0) return cpu::attention_f32_avx512(q, out, n_q, head_dim, segs, n_segs, scores);
  if (isa >= Isa::kAvx2 && head_dim % 8 == 0) return cpu::attention_f32_avx2(q, out, n_q, head_dim, segs, n_segs, scores);
  const int64_t n_keys = total_keys(segs, n_segs);
  for (int s = 0, i0 = 0; s < n_segs; i0 += segs[s].n, ++s) scores_pass(q, n_q, head_dim, segs[s], scores, n_keys, i0);
  softmax_rows(scores, n_q, n_keys);
  for (int64_t j = 0; j < n_q; ++j) std::fill(out[j], out[j] + head_dim, 0.0f);
  for (int s = 0, i0 = 0; s < n_segs; i0 += segs[s].n, ++s) values_pass(out, n_q, head_dim, segs[s], scores, n_keys, i0);
}

}  // namespace dspark::kernels
