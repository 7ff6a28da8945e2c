// Several query rows of one sequence against one K/V head (kernels/attention.h, attention_f16kv_rows),
// included by attention_avx512.cpp after attention_impl.h, inside its namespace (V: 16 f32 lanes).
//
// The one-row kernel sums a score q . k in 16 lane chains (lane l: dims l, l + 16, .. in order, each
// step an FMA) and then reduces the 16 lanes by a fixed tree (i + i+8, then + 4, + 2, + 1). Here the
// keys are first converted to f32 once for all rows and laid out transposed, 16 keys to a block:
//   kt[(b * hd + d) * 16 + l] = K[p0 + 16 b + l][d]          (b: block, d: dim, l: key in the block)
// so one FMA advances lane chain l of 16 keys at once, and the reduction tree is 15 vector adds over
// the 16 chains, not shuffles: the same products and additions in the same order, so every score,
// and with the one-row kernel's softmax and value pass every output, has the one-row kernel's bits.
// The includer includes <immintrin.h>, <algorithm>, <cstdint> and <vector> first (this header sits
// inside its namespace).
#pragma once

template <class V>
struct AttentionRowsImpl {
  using reg = typename V::reg;
  using One = AttentionImpl<V>;
  static_assert(V::W == 16, "the transposed layout is built for 16-lane vectors");

  // In place: r[i] (row i of a 16 x 16 f32 block) becomes column i.
  static void transpose16(__m512* r) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {  // t[2i] / t[2i+1]: rows 2i, 2i+1 interleaved (low / high pairs per 128 bits)
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // 4-row groups: each 128-bit block holds one column of 4 rows
      r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    // r[4i + k], 128-bit block m: column 4m + k of rows 4i .. 4i+3. Gather the four row groups.
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int k = 0; k < 4; ++k) {
      // blocks (m) of rows 0-3 and 4-7 / 8-11 and 12-15, paired: [g0 m0, g1 m0, g0 m1, g1 m1] and m2, m3
      const __m512i a = _mm512_castps_si512(r[k]), b = _mm512_castps_si512(r[4 + k]);
      const __m512i c = _mm512_castps_si512(r[8 + k]), d = _mm512_castps_si512(r[12 + k]);
      const __m512i ab_lo = _mm512_permutex2var_epi64(a, lo, b), ab_hi = _mm512_permutex2var_epi64(a, hi, b);
      const __m512i cd_lo = _mm512_permutex2var_epi64(c, lo, d), cd_hi = _mm512_permutex2var_epi64(c, hi, d);
      // ab_lo: [g0 m0 | g1 m0 | g0 m1 | g1 m1]; cd_lo: [g2 m0 | g3 m0 | g2 m1 | g3 m1]
      t[k] = _mm512_castsi512_ps(_mm512_shuffle_i64x2(ab_lo, cd_lo, 0x44));       // column k:      m0
      t[4 + k] = _mm512_castsi512_ps(_mm512_shuffle_i64x2(ab_lo, cd_lo, 0xEE));   // column 4 + k:  m1
      t[8 + k] = _mm512_castsi512_ps(_mm512_shuffle_i64x2(ab_hi, cd_hi, 0x44));   // column 8 + k:  m2
      t[12 + k] = _mm512_castsi512_ps(_mm512_shuffle_i64x2(ab_hi, cd_hi, 0xEE));  // column 12 + k: m3
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
  }

  // kt <- keys [p0, p0 + n) of the view, transposed in blocks of 16 (lanes past n zero).
  static void transpose_keys(const dspark::kernels::KvView& kv, int64_t p0, int64_t n, int64_t hd, float* kt) {
    int64_t slot = p0 % kv.capacity;
    for (int64_t b = 0; b * 16 < n; ++b) {
      const int nl = (int)std::min<int64_t>(16, n - 16 * b);
      const uint16_t* row[16];
      for (int l = 0; l < nl; ++l) {
        row[l] = kv.k + slot * kv.stride;
        if (++slot == kv.capacity) slot = 0;
      }
      float* blk = kt + b * hd * 16;
      for (int64_t c = 0; c < hd; c += 16) {
        __m512 r[16];
        for (int l = 0; l < 16; ++l) r[l] = l < nl ? V::load_h(row[l] + c) : V::zero();
        transpose16(r);
        for (int d = 0; d < 16; ++d) V::store(blk + (c + d) * 16, r[d]);
      }
    }
  }

  // a[g] = lane chain A(l) of the 16 keys of block blk ([hd][16]) for query head q + g * hd: the sum over
  // c in order of q[l + 16 c] * k[l + 16 c], as the one-row kernel's lane l sums it. kC: hd / 16 when
  // known at compile time (0: runtime).
  template <int G, int kC>
  __attribute__((always_inline)) static inline void chain(const float* q, int64_t hd, const float* blk, int l, reg* a) {
    const int64_t n_c = kC > 0 ? kC : hd / 16;
#pragma GCC unroll 16
    for (int64_t c = 0; c < n_c; ++c) {
      reg k = V::load(blk + (l + 16 * c) * 16);
      asm volatile("" : "+v"(k));  // one load for the G heads; each head's query element then rides on its FMA
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) a[g] = V::fmadd(V::set1(q[g * hd + l + 16 * c]), k, c == 0 ? V::zero() : a[g]);
    }
  }
  // tree<kSpan>(i): the partial sum the reduction forms from kSpan lane chains: tree<1>(i) = A(i),
  // tree<2k>(i) = tree<k>(i) + tree<k>(i + 16 / 2k); tree<16>(0) is the score.
  template <int G, int kC, int kSpan>
  __attribute__((always_inline)) static inline void tree(const float* q, int64_t hd, const float* blk, int i, reg* out) {
    if constexpr (kSpan == 1) {
      chain<G, kC>(q, hd, blk, i, out);
    } else {
      reg x[G], y[G];
      tree<G, kC, kSpan / 2>(q, hd, blk, i, x);
      tree<G, kC, kSpan / 2>(q, hd, blk, i + 16 / kSpan, y);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) out[g] = _mm512_add_ps(x[g], y[g]);
    }
  }
  // S[g] = the 16 scores of block blk for query heads q + g * hd: the lane chains combined by the one-row
  // kernel's reduction tree, in an order that keeps few partial sums alive.
  template <int G, int kC>
  static void block_scores(const float* q, int64_t hd, const float* blk, reg* S) {
    tree<G, kC, 16>(q, hd, blk, 0, S);
  }

  // scores[(h0 + g) * n + j] for the row's keys kt indices [i0, i0 + n), heads h0 .. h0 + G - 1.
  template <int G, int kC>
  static void scores_group(const float* qh, int h0, int64_t hd, const float* kt, int64_t i0, int64_t n, float* scores) {
    for (int64_t b = i0 / 16; 16 * b < i0 + n; ++b) {
      reg S[G];
      block_scores<G, kC>(qh + h0 * hd, hd, kt + b * hd * 16, S);
      const int64_t j0 = 16 * b - i0;  // the row's key index of lane 0
      if (j0 >= 0 && j0 + 16 <= n) {
        for (int g = 0; g < G; ++g) V::store(scores + (h0 + g) * n + j0, S[g]);
      } else {
        alignas(64) float tmp[16];
        for (int g = 0; g < G; ++g) {
          V::store(tmp, S[g]);
          for (int l = 0; l < 16; ++l)
            if (j0 + l >= 0 && j0 + l < n) scores[(h0 + g) * n + j0 + l] = tmp[l];
        }
      }
    }
  }

  // Where the value pass reads V: at(pos) is a cursor at position pos; load(c) the 16 values from
  // column c as f32, next() the following position.
  // - CacheValues: the cache's f16 rows, converted as they are read (a conversion per 16 values per pair
  //   of rows).
  // - F32Values: the group's V rows converted to f32 once (exact) in position order, for groups of
  //   kValuesF32MinRows rows or more: BM_AttentionRows (Intel Xeon family 6 model 207), ns per row-key,
  //   512 keys: 8 rows 12.5 -> 12.9-13.3 (twice the bytes to stream for 4 pairs), 16 rows 11.5 -> 11.1-11.3,
  //   64 rows 10.3-10.9 -> 9.6-10.1; 512 rows x 2,048 keys 8.9-9.3 -> 8.3-8.4.
  static constexpr int kValuesF32MinRows = 16;
  struct CacheValues {
    const dspark::kernels::KvView* kv;
    struct Cursor {
      const dspark::kernels::KvView* kv;
      int64_t slot;
      reg load(int64_t c) const { return V::load_h(kv->v + slot * kv->stride + c); }
      void next() {
        if (++slot == kv->capacity) slot = 0;
      }
    };
    Cursor at(int64_t pos) const { return {kv, pos % kv->capacity}; }
  };
  struct F32Values {
    const float* v;  // [n][hd], position p0 first
    int64_t p0, hd;
    struct Cursor {
      const float* row;
      int64_t hd;
      reg load(int64_t c) const { return V::load(row + c); }
      void next() { row += hd; }
    };
    Cursor at(int64_t pos) const { return {v + (pos - p0) * hd, hd}; }
  };
  // vf <- values [p0, p0 + n) of the view as f32, [n][hd].
  static void convert_values(const dspark::kernels::KvView& kv, int64_t p0, int64_t n, int64_t hd, float* vf) {
    int64_t slot = p0 % kv.capacity;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t* row = kv.v + slot * kv.stride;
      if (++slot == kv.capacity) slot = 0;
      for (int64_t c = 0; c < hd; c += 16) V::store(vf + i * hd + c, V::load_h(row + c));
    }
  }

  // Values of two rows at once, each V chunk loaded once for both: out_r[h] = sum over row r's keys
  // (in order) of p_r[h][j] * V[j], for CB column chunks from c0 and heads h0 .. h0 + G - 1; each
  // accumulator sums its keys in order, as the one-row kernel's values_pass does, so the bits are its.
  // Keys only one row sees (before or after the other's range) are summed for that row alone.
  template <int G, int CB>
  struct Acc {
    reg a[2][G][CB];
  };
  // Positions [lo, hi), seen by row 0 (A0) and / or row 1 (A1); the accumulators in registers throughout.
  template <bool A0, bool A1, int G, int CB, class Src>
  static void values_seg(Acc<G, CB>& acc_io, const float* const* p, const int64_t* first, const int64_t* n, int h0,
                         int64_t c0, const Src& src, int64_t lo, int64_t hi) {
    reg acc[2][G][CB];
#pragma GCC unroll 2
    for (int r = 0; r < 2; ++r)
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
        for (int b = 0; b < CB; ++b) acc[r][g][b] = acc_io.a[r][g][b];
    constexpr bool kActive[2] = {A0, A1};
    // row r's probability of position lo for head h0
    const float* pr[2] = {p[0] + h0 * n[0] + (lo - first[0]), p[1] + h0 * n[1] + (lo - first[1])};
    auto cur = src.at(lo);
    for (int64_t i = 0; i < hi - lo; ++i, cur.next()) {
      reg vb[CB];
#pragma GCC unroll 8
      for (int b = 0; b < CB; ++b) vb[b] = cur.load(c0 + b * 16);
#pragma GCC unroll 2
      for (int r = 0; r < 2; ++r) {
        if (!kActive[r]) continue;
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const reg pj = V::set1(pr[r][g * n[r] + i]);
#pragma GCC unroll 8
          for (int b = 0; b < CB; ++b) acc[r][g][b] = V::fmadd(pj, vb[b], acc[r][g][b]);
        }
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < 2; ++r)
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
        for (int b = 0; b < CB; ++b) acc_io.a[r][g][b] = acc[r][g][b];
  }

  template <int G, int CB, class Src>
  static void values_pair(const float* const* p, const int64_t* first, const int64_t* n, int h0, int64_t c0,
                          const Src& src, int64_t hd, float* const* out) {
    Acc<G, CB> acc;
    for (int r = 0; r < 2; ++r)
      for (int g = 0; g < G; ++g)
        for (int b = 0; b < CB; ++b) acc.a[r][g][b] = V::zero();
    const int64_t e0 = first[0] + n[0], e1 = first[1] + n[1];
    const int64_t lo = std::max(first[0], first[1]), hi = std::min(e0, e1);
    if (lo >= hi) {  // disjoint ranges: each alone
      values_seg<true, false>(acc, p, first, n, h0, c0, src, first[0], e0);
      values_seg<false, true>(acc, p, first, n, h0, c0, src, first[1], e1);
    } else {
      if (first[0] < lo) values_seg<true, false>(acc, p, first, n, h0, c0, src, first[0], lo);
      if (first[1] < lo) values_seg<false, true>(acc, p, first, n, h0, c0, src, first[1], lo);
      values_seg<true, true>(acc, p, first, n, h0, c0, src, lo, hi);
      if (e0 > hi) values_seg<true, false>(acc, p, first, n, h0, c0, src, hi, e0);
      if (e1 > hi) values_seg<false, true>(acc, p, first, n, h0, c0, src, hi, e1);
    }
    for (int r = 0; r < 2; ++r)
      for (int g = 0; g < G; ++g)
        for (int b = 0; b < CB; ++b) V::store(out[r] + (h0 + g) * hd + c0 + b * 16, acc.a[r][g][b]);
  }

  // Both rows' values for heads h0 .. h0 + G - 1, in passes of CB chunks (2 * G * CB accumulators and CB
  // chunks of V within the 32 registers), the remaining chunks one at a time.
  template <int G, class Src>
  static void values_pair_group(const float* const* p, const int64_t* first, const int64_t* n, int h0,
                                const Src& src, int64_t hd, float* const* out) {
    constexpr int kFit = (V::kRegs - 2) / (2 * G + 1);
    constexpr int CB = kFit < 4 ? kFit : 4;
    int64_t c = 0;
    for (; c + CB * 16 <= hd; c += CB * 16) values_pair<G, CB>(p, first, n, h0, c, src, hd, out);
    for (; c < hd; c += 16) values_pair<G, 1>(p, first, n, h0, c, src, hd, out);
  }

  static void run(const dspark::kernels::AttnRows& rows, int n_q, int64_t hd, const dspark::kernels::KvView& kv,
                  float* scores) {
    int64_t p0 = rows.first_pos[0], p1 = p0;
    for (int r = 0; r < rows.n_rows; ++r) {
      p0 = std::min(p0, rows.first_pos[r]);
      p1 = std::max(p1, rows.first_pos[r] + rows.n_keys[r]);
    }
    thread_local std::vector<float> kt;
    kt.resize((size_t)((p1 - p0 + 15) / 16 * 16 * hd));
    transpose_keys(kv, p0, p1 - p0, hd, kt.data());
    thread_local std::vector<float> vbuf;
    const bool f32_values = rows.n_rows >= kValuesF32MinRows;
    if (f32_values) {
      vbuf.resize((size_t)((p1 - p0) * hd));
      convert_values(kv, p0, p1 - p0, hd, vbuf.data());
    }
    alignas(64) float qh[dspark::kernels::kMaxAttnHeads * dspark::kernels::kMaxHeadDim];
    auto groups = [n_q](auto&& pass) { One::head_groups(n_q, pass); };  // as the one-row kernel's
    thread_local std::vector<float> scores2;  // the second row of a pair
    int64_t max_n = 0;
    for (int r = 0; r < rows.n_rows; ++r) max_n = std::max(max_n, rows.n_keys[r]);
    scores2.resize((size_t)(n_q * max_n));
    auto row_scores = [&](int r, float* sc) {  // scores and probabilities of row r, heads in groups
      const float* q = rows.q + r * rows.q_stride;
      const int64_t first = rows.first_pos[r], n = rows.n_keys[r];
      for (int64_t i = 0; i < n_q * hd; i += 16) V::store(qh + i, V::round_f16(V::load(q + i)));
      groups([&](auto g, int h) {
        constexpr int G = decltype(g)::value;
        if (hd == 64) scores_group<G, 4>(qh, h, hd, kt.data(), first - p0, n, sc);
        else scores_group<G, 0>(qh, h, hd, kt.data(), first - p0, n, sc);
      });
      for (int h = 0; h < n_q; ++h) One::softmax_f16(sc + h * n, n);
    };
    int r = 0;
    for (; r + 2 <= rows.n_rows; r += 2) {  // pairs: each V chunk converted once for both rows
      row_scores(r, scores);
      row_scores(r + 1, scores2.data());
      const float* p[2] = {scores, scores2.data()};
      float* out[2] = {rows.out + r * rows.out_stride, rows.out + (r + 1) * rows.out_stride};
      groups([&](auto g, int h) {
        constexpr int G = decltype(g)::value;
        if (f32_values)
          values_pair_group<G>(p, rows.first_pos + r, rows.n_keys + r, h, F32Values{vbuf.data(), p0, hd}, hd, out);
        else
          values_pair_group<G>(p, rows.first_pos + r, rows.n_keys + r, h, CacheValues{&kv}, hd, out);
      });
    }
    for (; r < rows.n_rows; ++r) {
      row_scores(r, scores);
      groups([&](auto g, int h) {
        One::template values_group<decltype(g)::value, false>(scores, h, hd, kv, rows.first_pos[r], rows.n_keys[r],
                                                              rows.out + r * rows.out_stride);
      });
    }
  }
};
