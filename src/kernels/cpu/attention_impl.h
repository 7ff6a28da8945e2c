// Shared body of the SIMD attention kernels (kernels/attention.h), written once against a vector
// traits struct V (width V::W floats) and included by attention_avx2.cpp / attention_avx512.cpp
// inside their own namespaces. Numerics follow attention_f16kv_ref; only f32 summation order and
// exp() (a degree-6 polynomial, ~2 ulp) differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/cpu/softmax_impl.h"

template <class V>
struct AttentionImpl {
  using reg = typename V::reg;
  static constexpr int W = V::W;

  // acc[i][g] = qh[h0 + g] . K[key i] for KB keys (K rows k[i]): one accumulator per (key, head),
  // summed over the column chunks in order; the KB * G chains are independent, so the FMA latency
  // of one chain is hidden by the others.
  template <int G, int KB>
  static void dots(const float* qh, int h0, int64_t hd, const uint16_t* const* k, reg (*acc)[G]) {
    for (int i = 0; i < KB; ++i)
      for (int g = 0; g < G; ++g) acc[i][g] = V::zero();
    for (int64_t c = 0; c < hd; c += W) {
      for (int i = 0; i < KB; ++i) {
        const reg kvec = V::load_h(k[i] + c);
        for (int g = 0; g < G; ++g) acc[i][g] = V::fmadd(V::load(qh + (h0 + g) * hd + c), kvec, acc[i][g]);
      }
    }
  }

  // The call's keys in order: n_main positions from first_pos (slots advance with one wrap test,
  // no division per row), then kv.extra's positions (a token tree's ancestors; few, just written).
  // kTree false (no extra keys, every forward but a token tree's): the plain slot walk, with no test
  // per key (the test cost SmolLM2's 64-wide heads ~7 % of the kernel's time).
  template <bool kTree>
  struct KeyCursor {
    int64_t slot, cap, j = 0, n_main;
    const int64_t* extra;
    KeyCursor(const dspark::kernels::KvView& kv, int64_t first_pos, int64_t n)
        : slot(first_pos % kv.capacity), cap(kv.capacity), n_main(n), extra(kv.extra) {}
    int64_t next() {
      if constexpr (!kTree) {
        const int64_t s = slot;
        if (++slot == cap) slot = 0;
        return s;
      }
      if (j < n_main) {
        ++j;
        const int64_t s = slot;
        if (++slot == cap) slot = 0;
        return s;
      }
      return extra[j++ - n_main] % cap;
    }
  };

  // Software prefetch of n whole K or V rows (hd f16 each) from position pos on. In decode the cache
  // was last touched a whole token ago, so its rows come from memory; the hardware prefetcher alone
  // left the attention of one head group at ~3.7x its time on cache-resident rows (Gemma 3, 512 keys).
  // One `%` per call, not one per row (an integer division per 128-byte row of SmolLM2's 64-wide heads).
  static void prefetch_rows(const uint16_t* base, const dspark::kernels::KvView& kv, int64_t pos, int64_t n, int64_t hd) {
    if (n <= 0) return;
    int64_t slot = pos % kv.capacity;
    for (int64_t i = 0; i < n; ++i) {
      const char* row = reinterpret_cast<const char*>(base + slot * kv.stride);
      for (int64_t b = 0; b < hd * 2; b += 64) __builtin_prefetch(row + b, 0, 3);
      if (++slot == kv.capacity) slot = 0;
    }
  }

  // scores[h * ld + j] = qh[h] . K[j] for heads h0..h0+G-1, KB keys at a time (G * KB <= 12
  // accumulators). Where V has reduce_w (W accumulators to W sums, each in V::reduce's order), a
  // block of W keys is reduced together; else each sum is reduced alone. The keys: n_main from
  // first_pos, then kv.n_extra more (KeyCursor); n_keys = n_main + kv.n_extra. A score's bits do not
  // depend on the block it was reduced in, so any range of keys gives the same scores.
  template <int G, bool kTree>
  static void scores_group(const float* qh, int h0, int64_t hd, const dspark::kernels::KvView& kv,
                           int64_t first_pos, int64_t n_main, float* scores, int64_t ld) {
    constexpr int KB = G <= 3 ? 4 : 2;  // divides W (8 or 16)
    const int64_t n_keys = n_main + kv.n_extra;
    KeyCursor<kTree> cur(kv, first_pos, n_main);
    auto next_rows = [&](int n, const uint16_t** k) {
      for (int i = 0; i < n; ++i) k[i] = kv.k + cur.next() * kv.stride;
    };
    constexpr bool kBlockReduce = requires(reg* r, float* out) { V::reduce_w(r, out); };
    constexpr int kStep = kBlockReduce ? W : KB;
    int64_t j = 0;
    for (; j + kStep <= n_keys; j += kStep) {
      const int64_t ahead = n_main - j - kStep;  // rows of the contiguous range past this block
      if (ahead > 0) prefetch_rows(kv.k, kv, first_pos + j + kStep, ahead < kStep ? ahead : kStep, hd);
      alignas(64) reg tile[G][kBlockReduce ? W : 1];  // [head][key in the block]
      for (int i0 = 0; i0 < kStep; i0 += KB) {
        const uint16_t* k[KB];
        next_rows(KB, k);
        reg acc[KB][G];
        dots<G, KB>(qh, h0, hd, k, acc);
        for (int i = 0; i < KB; ++i)
          for (int g = 0; g < G; ++g) {
            if constexpr (kBlockReduce) tile[g][i0 + i] = acc[i][g];
            else scores[(h0 + g) * ld + j + i0 + i] = V::reduce(acc[i][g]);
          }
      }
      if constexpr (kBlockReduce)
        for (int g = 0; g < G; ++g) V::reduce_w(tile[g], scores + (h0 + g) * ld + j);
    }
    for (; j < n_keys; ++j) {
      const uint16_t* k[1];
      next_rows(1, k);
      reg acc[1][G];
      dots<G, 1>(qh, h0, hd, k, acc);
      for (int g = 0; g < G; ++g) scores[(h0 + g) * ld + j] = V::reduce(acc[0][g]);
    }
  }

  // out[h] = sum_j p[h][j] * V[j] for heads h0..h0+G-1 (p already rounded to f16), over the CB
  // column chunks from c0. Each output chunk is one accumulator summed over j in order; the G * CB
  // chains are independent (one chain per chunk was bound by the FMA latency), and a V chunk is
  // converted once for the G heads.
  // Columns [pf0, pf1) of the V rows ahead are prefetched (the first pass over a row's columns; none
  // where pf1 <= pf0).
  template <int G, int CB, bool kTree>
  static void values_pass(const float* p, int h0, int64_t c0, const dspark::kernels::KvView& kv,
                          int64_t first_pos, int64_t n_main, int64_t hd, float* out, int64_t pf0, int64_t pf1) {
    reg acc[G][CB];
    for (int g = 0; g < G; ++g)
      for (int b = 0; b < CB; ++b) acc[g][b] = V::zero();
    const int64_t n_keys = n_main + kv.n_extra;
    KeyCursor<kTree> cur(kv, first_pos, n_main);
    constexpr int64_t kAhead = 8;  // rows; the first pass brings whole rows, so the later passes hit L2
    int64_t ahead = (first_pos + kAhead) % kv.capacity;  // slot of row j + kAhead
    for (int64_t j = 0; j < n_keys; ++j) {
      if (pf1 > pf0 && j + kAhead < n_main) {
        const char* row = reinterpret_cast<const char*>(kv.v + ahead * kv.stride);
        for (int64_t b = pf0 * 2; b < pf1 * 2; b += 64) __builtin_prefetch(row + b, 0, 3);
      }
      if (++ahead == kv.capacity) ahead = 0;
      const uint16_t* v = kv.v + cur.next() * kv.stride + c0;
      reg pj[G];
      for (int g = 0; g < G; ++g) pj[g] = V::set1(p[(h0 + g) * n_keys + j]);
      for (int b = 0; b < CB; ++b) {
        const reg vb = V::load_h(v + b * W);
        for (int g = 0; g < G; ++g) acc[g][b] = V::fmadd(pj[g], vb, acc[g][b]);
      }
    }
    for (int g = 0; g < G; ++g)
      for (int b = 0; b < CB; ++b) V::store(out + (h0 + g) * hd + c0 + b * W, acc[g][b]);
  }

  // Columns [c_begin, c_end) (multiples of W) of out[h] for heads h0..h0+G-1. Column chunks per pass
  // over the V rows: G * CB accumulators + G broadcasts + a V chunk in the registers. AVX2 (16): 3 / 5 /
  // 8 for G 3-4 / 2 / 1, as measured before; AVX-512 (32): up to 8, so SmolLM2's hd 64 takes one pass
  // instead of two and Gemma 3's 256 three instead of six. Each accumulator sums its keys in order, so
  // a column's bits do not depend on the range it was computed in.
  template <int G, bool kTree>
  static void values_cols(const float* p, int h0, int64_t hd, const dspark::kernels::KvView& kv,
                          int64_t first_pos, int64_t n_main, float* out, int64_t c_begin, int64_t c_end) {
    constexpr int kFit = (V::kRegs - G - 1) / G;
    constexpr int CB = V::kRegs >= 32 ? (kFit < 8 ? kFit : 8) : (G >= 3 ? 3 : G == 2 ? 5 : 8);
    int64_t c = c_begin;
    auto pass = [&](auto cb) {
      constexpr int kCB = decltype(cb)::value;
      const bool first = c == c_begin;  // brings the rows' columns in for the later passes
      values_pass<G, kCB, kTree>(p, h0, c, kv, first_pos, n_main, hd, out, first ? c_begin : 0, first ? c_end : 0);
      c += kCB * W;
    };
    while (c + CB * W <= c_end) pass(std::integral_constant<int, CB>{});
    switch ((c_end - c) / W) {  // the remaining chunks in one pass
      case 0: break;
      case 1: pass(std::integral_constant<int, 1>{}); break;
      case 2: pass(std::integral_constant<int, 2>{}); break;
      case 3: pass(std::integral_constant<int, 3>{}); break;
      case 4: pass(std::integral_constant<int, 4>{}); break;
      case 5: pass(std::integral_constant<int, 5>{}); break;
      case 6: pass(std::integral_constant<int, 6>{}); break;
      default: pass(std::integral_constant<int, 7>{}); break;
    }
  }
  template <int G, bool kTree>
  static void values_group(const float* p, int h0, int64_t hd, const dspark::kernels::KvView& kv,
                           int64_t first_pos, int64_t n_main, float* out) {
    values_cols<G, kTree>(p, h0, hd, kv, first_pos, n_main, out, 0, hd);
  }

  // In place: s[j] = f16(exp(s[j] - max) / sum).
  static void softmax_f16(float* s, int64_t n) {
    const double sum = softmax_exp_sum<V>(s, n);
    const reg inv = V::set1((float)(1.0 / sum));
    int64_t j = 0;
    for (; j + W <= n; j += W) V::store(s + j, V::round_f16(V::mul(V::load(s + j), inv)));
    const float finv = (float)(1.0 / sum);
    for (; j < n; ++j) {
      float t = s[j] * finv;
      V::store_scalar_round_f16(&s[j], t);
    }
  }

  // pass(G-tag, h) for the query heads in groups of up to 4 from h = 0, then the rest in one group.
  template <class Pass>
  static void head_groups(int n_q, Pass&& pass) {
    int h = 0;
    for (; h + 4 <= n_q; h += 4) pass(std::integral_constant<int, 4>{}, h);
    switch (n_q - h) {
      case 3: pass(std::integral_constant<int, 3>{}, h); break;
      case 2: pass(std::integral_constant<int, 2>{}, h); break;
      case 1: pass(std::integral_constant<int, 1>{}, h); break;
      default: break;
    }
  }

  // ---- one row split over parts (kernels/attention.h, AttnSplit) ----
  // The first key of `part`'s share (whole blocks of 16, the last part also the tail); n_keys past the last.
  static int64_t split_key(const dspark::kernels::AttnSplit& s, int part) {
    if (part >= s.n_parts) return s.n_keys;
    return 16 * (s.n_keys / 16 * part / s.n_parts);
  }
  // Phase 0: the part's scores and their maximum per head; 1: exp(score - max) and the sums of its
  // whole W-chunks (softmax_exp_sum's, chunk by chunk); 2: the row's sum (the chunks' in order, then
  // the tail's), the probabilities into p, and the part's columns of the output (values_cols). Every part
  // with columns of this head forms all its probabilities (n_q * n_keys multiplies, against the values'
  // n_q * n_keys * its columns FMAs) rather than share them out behind a fourth join.
  static void split(const dspark::kernels::AttnSplit& s, int phase, int part, float* p) {
    const int64_t n = s.n_keys, hd = s.head_dim, j0 = split_key(s, part), j1 = split_key(s, part + 1);
    const int64_t n_full = n / W * W, cs = n / 8 + 1;  // chunk_sums' row stride (W >= 8)
    auto groups = [&](auto&& pass) { head_groups(s.n_q, pass); };
    if (phase == 0) {
      if (j1 > j0) {
        alignas(64) float qh[dspark::kernels::kMaxAttnHeads * dspark::kernels::kMaxHeadDim];
        for (int64_t i = 0; i < s.n_q * hd; i += W) V::store(qh + i, V::round_f16(V::load(s.q + i)));
        groups([&](auto g, int h) {
          scores_group<decltype(g)::value, false>(qh, h, hd, s.kv, s.first_pos + j0, j1 - j0, s.scores + j0, n);
        });
      }
      for (int h = 0; h < s.n_q; ++h) {
        const float* sh = s.scores + h * n;
        reg vmax = V::set1(-INFINITY);
        int64_t j = j0;
        for (; j + W <= j1; j += W) vmax = V::max(vmax, V::load(sh + j));
        float mx = V::reduce_max(vmax);
        for (; j < j1; ++j) mx = std::fmax(mx, sh[j]);
        s.part_max[part * s.n_q + h] = mx;
      }
      return;
    }
    if (phase == 1) {
      for (int h = 0; h < s.n_q; ++h) {
        float mx = -INFINITY;
        for (int q = 0; q < s.n_parts; ++q) mx = std::fmax(mx, s.part_max[q * s.n_q + h]);
        float* sh = s.scores + h * n;
        const reg vm = V::set1(mx);
        for (int64_t j = j0; j < std::min(j1, n_full); j += W) {
          const reg e = V::exp(V::sub(V::load(sh + j), vm));
          V::store(sh + j, e);
          s.chunk_sums[h * cs + j / W] = V::reduce(e);
        }
        if (j1 == n)
          for (int64_t j = std::max(j0, n_full); j < n; ++j) sh[j] = std::exp(sh[j] - mx);
      }
      return;
    }
    const int64_t nc = hd / 16;
    const int64_t c0 = s.cols ? s.cols[part] : 16 * (nc * part / s.n_parts);
    const int64_t c1 = s.cols ? s.cols[part + 1] : 16 * (nc * (part + 1) / s.n_parts);
    if (c1 <= c0) return;  // no columns of this head: its probabilities are not needed here
    for (int h = 0; h < s.n_q; ++h) {
      const float* sh = s.scores + h * n;
      double sum = 0;
      for (int64_t c = 0; c < n_full / W; ++c) sum += s.chunk_sums[h * cs + c];
      for (int64_t j = n_full; j < n; ++j) sum += sh[j];
      const reg inv = V::set1((float)(1.0 / sum));
      float* ph = p + h * n;
      for (int64_t j = 0; j < n_full; j += W) V::store(ph + j, V::round_f16(V::mul(V::load(sh + j), inv)));
      const float finv = (float)(1.0 / sum);
      for (int64_t j = n_full; j < n; ++j) V::store_scalar_round_f16(&ph[j], sh[j] * finv);
    }
    groups([&](auto g, int h) { values_cols<decltype(g)::value, false>(p, h, hd, s.kv, s.first_pos, n, s.out, c0, c1); });
  }

  // n_main contiguous keys from first_pos, then kv.n_extra more; scores: [n_q, n_main + kv.n_extra].
  static void run(const float* q, int n_q, int64_t hd, const dspark::kernels::KvView& kv, int64_t first_pos,
                  int64_t n_main, float* scores, float* out) {
    const int64_t n_keys = n_main + kv.n_extra;
    alignas(64) float qh[dspark::kernels::kMaxAttnHeads * dspark::kernels::kMaxHeadDim];
    for (int64_t i = 0; i < n_q * hd; i += W) V::store(qh + i, V::round_f16(V::load(q + i)));
    // Query heads sharing this K/V row in groups of up to 4, so each K/V row is read once per group
    // (GQA groups of 3, as SmolLM2's, are one group). Each head's sums are its own: any grouping
    // gives the same bits. pass(G-tag, h) runs one group of G heads starting at h.
    auto groups = [n_q](auto&& pass) { head_groups(n_q, pass); };
    auto body = [&](auto tree) {
      constexpr bool kTree = decltype(tree)::value;
      groups([&](auto g, int h) {
        scores_group<decltype(g)::value, kTree>(qh, h, hd, kv, first_pos, n_main, scores, n_keys);
      });
      for (int h = 0; h < n_q; ++h) softmax_f16(scores + h * n_keys, n_keys);
      groups([&](auto g, int h) { values_group<decltype(g)::value, kTree>(scores, h, hd, kv, first_pos, n_main, out); });
    };
    if (kv.n_extra > 0) body(std::true_type{});
    else body(std::false_type{});
  }
};
