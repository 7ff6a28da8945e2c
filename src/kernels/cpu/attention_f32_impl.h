// Shared body of the SIMD versions of the drafter's f32 attention (kernels/attention_f32.h), written
// once against the vector traits of attention_avx2.cpp / attention_avx512.cpp (width V::W floats)
// and included there inside their own namespaces. head_dim must be a multiple of V::W.
//
// Numerics against attention_f32_ref: each dot product is summed in W lanes (column e in lane e % W,
// FMA in column order) and the lanes by V::reduce's pairwise tree; softmax takes the max, V::exp
// (a degree-6 polynomial, ~2 ulp; x - max <= 0), sums in double per W-wide chunk and scales by
// f32(1 / sum); each output element sums p * v over the keys in order. Only the dot products'
// summation order and exp differ from the reference (tests/unit/kernels/test_attention.cpp).
//
// Why not the portable version in attention_f32.cpp: that one reduces every (query, key) dot product
// by itself and calls std::exp per score. Here a block of W keys is reduced together (V::reduce_w)
// and a V row is loaded once for up to 4 queries.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/attention_f32.h"
#include "kernels/cpu/softmax_impl.h"

template <class V>
struct AttentionF32Impl {
  using reg = typename V::reg;
  static constexpr int W = V::W;
  using F32Rows = dspark::kernels::F32Rows;

  // scores[j * n_keys + i0 + i] = q_j . k_i for the rows of one segment.
  static void scores_seg(const float* const* q, int64_t n_q, int64_t hd, const F32Rows& seg, float* scores,
                         int64_t n_keys, int64_t i0) {
    int64_t i = 0;
    for (; i + W <= seg.n; i += W) {  // W keys at a time, reduced together
      const float* k = seg.k + i * seg.stride;
      for (int64_t j = 0; j < n_q; ++j) {
        reg acc[W];
        for (int r = 0; r < W; ++r) acc[r] = V::zero();
        for (int64_t e = 0; e < hd; e += W) {
          const reg qv = V::load(q[j] + e);
          for (int r = 0; r < W; ++r) acc[r] = V::fmadd(qv, V::load(k + r * seg.stride + e), acc[r]);
        }
        V::reduce_w(acc, scores + j * n_keys + i0 + i);
      }
    }
    for (; i < seg.n; ++i) {  // the rest one key at a time, the same sums
      const float* k = seg.k + i * seg.stride;
      for (int64_t j = 0; j < n_q; ++j) {
        reg acc = V::zero();
        for (int64_t e = 0; e < hd; e += W) acc = V::fmadd(V::load(q[j] + e), V::load(k + e), acc);
        scores[j * n_keys + i0 + i] = V::reduce(acc);
      }
    }
  }

  // In place: s[i] = exp(s[i] - max) / sum.
  static void softmax(float* s, int64_t n) {
    const double sum = softmax_exp_sum<V>(s, n);
    const float inv = (float)(1.0 / sum);
    const reg vinv = V::set1(inv);
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(s + i, V::mul(V::load(s + i), vinv));
    for (; i < n; ++i) s[i] *= inv;
  }

  // out_j[c0 .. c0 + CB * W) = sum_i p_ji v_i for G queries from j0, keys of every segment in order.
  template <int G, int CB>
  static void values_pass(float* const* out, int64_t j0, int64_t c0, const F32Rows* segs, int n_segs,
                          const float* probs, int64_t n_keys) {
    reg acc[G][CB];
    for (int g = 0; g < G; ++g)
      for (int b = 0; b < CB; ++b) acc[g][b] = V::zero();
    for (int s = 0, i0 = 0; s < n_segs; i0 += (int)segs[s].n, ++s) {
      for (int64_t i = 0; i < segs[s].n; ++i) {
        const float* v = segs[s].v + i * segs[s].stride + c0;
        reg p[G];
        for (int g = 0; g < G; ++g) p[g] = V::set1(probs[(j0 + g) * n_keys + i0 + i]);
        for (int b = 0; b < CB; ++b) {
          const reg vb = V::load(v + b * W);
          for (int g = 0; g < G; ++g) acc[g][b] = V::fmadd(p[g], vb, acc[g][b]);
        }
      }
    }
    for (int g = 0; g < G; ++g)
      for (int b = 0; b < CB; ++b) V::store(out[j0 + g] + c0 + b * W, acc[g][b]);
  }

  // Column chunks per pass: CB; queries per pass: G (G * CB accumulators + G broadcasts + a V chunk
  // fit the registers: 4 x 4 on AVX-512, 2 x 4 on AVX2).
  static constexpr int kCB = 4;
  static constexpr int kG = V::kRegs >= 32 ? 4 : 2;

  template <int G>
  static void values_queries(float* const* out, int64_t j0, int64_t hd, const F32Rows* segs, int n_segs,
                             const float* probs, int64_t n_keys) {
    int64_t c = 0;
    for (; c + kCB * W <= hd; c += kCB * W) values_pass<G, kCB>(out, j0, c, segs, n_segs, probs, n_keys);
    switch ((hd - c) / W) {
      case 0: break;
      case 1: values_pass<G, 1>(out, j0, c, segs, n_segs, probs, n_keys); break;
      case 2: values_pass<G, 2>(out, j0, c, segs, n_segs, probs, n_keys); break;
      default: values_pass<G, 3>(out, j0, c, segs, n_segs, probs, n_keys); break;
    }
  }

  static void run(const float* const* q, float* const* out, int64_t n_q, int64_t hd, const F32Rows* segs,
                  int n_segs, float* scores) {
    int64_t n_keys = 0;
    for (int s = 0; s < n_segs; ++s) n_keys += segs[s].n;
    for (int s = 0, i0 = 0; s < n_segs; i0 += (int)segs[s].n, ++s) scores_seg(q, n_q, hd, segs[s], scores, n_keys, i0);
    for (int64_t j = 0; j < n_q; ++j) softmax(scores + j * n_keys, n_keys);
    int64_t j = 0;
    for (; j + kG <= n_q; j += kG) values_queries<kG>(out, j, hd, segs, n_segs, scores, n_keys);
    for (; j < n_q; ++j) values_queries<1>(out, j, hd, segs, n_segs, scores, n_keys);
  }
};
