// The first half of the SIMD attention kernels' softmax, shared by attention_impl.h (f16 K/V) and
// attention_f32_impl.h (the drafter's f32 attention), written against the same vector traits V
// (width V::W floats) and included inside each ISA's namespace.
#pragma once

#include <cmath>
#include <cstdint>

// In place over scores s [n] f32: s[i] = exp(s[i] - max(s)), V::exp (a degree-6 polynomial, ~2 ulp;
// its argument is <= 0) on full W-wide chunks and std::exp on the tail. Returns the sum of the new
// s[i], accumulated in double per chunk. The callers scale by f32(1 / sum) in their own way.
template <class V>
double softmax_exp_sum(float* s, int64_t n) {
  using reg = typename V::reg;
  constexpr int W = V::W;
  reg vmax = V::set1(-INFINITY);
  int64_t i = 0;
  for (; i + W <= n; i += W) vmax = V::max(vmax, V::load(s + i));
  float mx = V::reduce_max(vmax);
  for (; i < n; ++i) mx = std::fmax(mx, s[i]);
  double sum = 0;
  const reg vm = V::set1(mx);
  for (i = 0; i + W <= n; i += W) {
    const reg e = V::exp(V::sub(V::load(s + i), vm));
    V::store(s + i, e);
    sum += V::reduce(e);
  }
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum += s[i];
  }
  return sum;
}
