// Shared body of the SIMD attention kernels (kernels/attention.h), written once against a vector
// traits struct V (width V::W floats) and included by attention_avx2.cpp / attention_avx512.cpp
// inside their own namespaces. Numerics follow attention_f16kv_ref; only f32 summation order and
// exp() (a degree-6 polynomial, ~2 ulp) differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"

template <class V>
struct AttentionImpl {
  using reg = typename V::reg;
  static constexpr int W = V::W;

  // scores[h * n_keys + j] = qh[h] . K[j] for heads h0..h0+G-1.
  template <int G>
  static void scores_group(const float* qh, int h0, int64_t hd, const dspark::kernels::KvView& kv,
                           int64_t first_pos, int64_t n_keys, float* scores) {
    int64_t slot = first_pos % kv.capacity;
    for (int64_t j = 0; j < n_keys; ++j) {
      const uint16_t* k = kv.k + slot * kv.stride;
      reg acc[G];
      for (int g = 0; g < G; ++g) acc[g] = V::zero();
      for (int64_t c = 0; c < hd; c += W) {
        const reg kvec = V::load_h(k + c);
        for (int g = 0; g < G; ++g) acc[g] = V::fmadd(V::load(qh + (h0 + g) * hd + c), kvec, acc[g]);
      }
      for (int g = 0; g < G; ++g) scores[(h0 + g) * n_keys + j] = V::reduce(acc[g]);
      if (++slot == kv.capacity) slot = 0;
    }
  }

  // out[h] = sum_j p[h][j] * V[j] for heads h0..h0+G-1 (p already rounded to f16).
  template <int G>
  static void values_group(const float* p, int h0, int64_t hd, const dspark::kernels::KvView& kv,
                           int64_t first_pos, int64_t n_keys, float* out) {
    for (int64_t c = 0; c < hd; c += W) {
      reg acc[G];
      for (int g = 0; g < G; ++g) acc[g] = V::zero();
      int64_t slot = first_pos % kv.capacity;
      for (int64_t j = 0; j < n_keys; ++j) {
        const reg v = V::load_h(kv.v + slot * kv.stride + c);
        for (int g = 0; g < G; ++g) acc[g] = V::fmadd(V::set1(p[(h0 + g) * n_keys + j]), v, acc[g]);
        if (++slot == kv.capacity) slot = 0;
      }
      for (int g = 0; g < G; ++g) V::store(out + (h0 + g) * hd + c, acc[g]);
    }
  }

  // In place: s[j] = f16(exp(s[j] - max) / sum).
  static void softmax_f16(float* s, int64_t n) {
    reg vmax = V::set1(-INFINITY);
    int64_t j = 0;
    for (; j + W <= n; j += W) vmax = V::max(vmax, V::load(s + j));
    float mx = V::reduce_max(vmax);
    for (; j < n; ++j) mx = std::fmax(mx, s[j]);
    double sum = 0;
    const reg vm = V::set1(mx);
    for (j = 0; j + W <= n; j += W) {
      const reg e = V::exp(V::sub(V::load(s + j), vm));
      V::store(s + j, e);
      sum += V::reduce(e);
    }
    for (; j < n; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const reg inv = V::set1((float)(1.0 / sum));
    for (j = 0; j + W <= n; j += W) V::store(s + j, V::round_f16(V::mul(V::load(s + j), inv)));
    const float finv = (float)(1.0 / sum);
    for (; j < n; ++j) {
      float t = s[j] * finv;
      V::store_scalar_round_f16(&s[j], t);
    }
  }

  static void run(const float* q, int n_q, int64_t hd, const dspark::kernels::KvView& kv, int64_t first_pos,
                  int64_t n_keys, float* scores, float* out) {
    alignas(64) float qh[dspark::kernels::kMaxAttnHeads * dspark::kernels::kMaxHeadDim];
    for (int64_t i = 0; i < n_q * hd; i += W) V::store(qh + i, V::round_f16(V::load(q + i)));
    // Query heads sharing this K/V row in groups of up to 4, so each K/V row is read once per group
    // (GQA groups of 3, as SmolLM2's, are one group). Each head's sums are its own: any grouping
    // gives the same bits. pass(G-tag, h) runs one group of G heads starting at h.
    auto groups = [n_q](auto&& pass) {
      int h = 0;
      for (; h + 4 <= n_q; h += 4) pass(std::integral_constant<int, 4>{}, h);
      switch (n_q - h) {
        case 3: pass(std::integral_constant<int, 3>{}, h); break;
        case 2: pass(std::integral_constant<int, 2>{}, h); break;
        case 1: pass(std::integral_constant<int, 1>{}, h); break;
        default: break;
      }
    };
    groups([&](auto g, int h) { scores_group<decltype(g)::value>(qh, h, hd, kv, first_pos, n_keys, scores); });
    for (int h = 0; h < n_q; ++h) softmax_f16(scores + h * n_keys, n_keys);
    groups([&](auto g, int h) { values_group<decltype(g)::value>(scores, h, hd, kv, first_pos, n_keys, out); });
  }
};
