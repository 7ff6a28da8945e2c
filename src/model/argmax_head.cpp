#include "model/argmax_head.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "core/f16.h"
#include "kernels/clones.h"
#include "kernels/quant_blocks.h"

namespace dspark::model {

namespace {

// Rounded up to the next float: a stored bound (u_i, v_i) must not be below the double it stands for.
float round_up(double v) {
  float f = (float)v;
  if ((double)f < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// max_i (y_i - (u_i a + v_i b)) in 16 lanes (vectorises; NaN entries are skipped unless all are NaN).
DSPARK_CLONES float max_lower(const float* y, const float* u, const float* v, float a, float b, int64_t n) {
  float m[16];
  for (int j = 0; j < 16; ++j) m[j] = y[0] - (u[0] * a + v[0] * b);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      const float w = y[i + j] - (u[i + j] * a + v[i + j] * b);
      m[j] = w > m[j] ? w : m[j];
    }
  float best = m[0];
  for (int j = 1; j < 16; ++j) best = m[j] > best ? m[j] : best;
  for (; i < n; ++i) {
    const float w = y[i] - (u[i] * a + v[i] * b);
    best = w > best ? w : best;
  }
  return best;
}

// Appends every i with y_i + u_i a + v_i b >= t to ids, stopping past cap entries (returns false
// then): a lane-wise max over blocks of 64, a scalar scan only of blocks that reach t.
DSPARK_CLONES bool collect_upper(const float* y, const float* u, const float* v, float a, float b, float t, int64_t n,
                                 size_t cap, std::vector<int32_t>& ids) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    float m[16];
    for (int j = 0; j < 16; ++j) m[j] = y[i + j] + (u[i + j] * a + v[i + j] * b);
    for (int q = 1; q < 4; ++q)
      for (int j = 0; j < 16; ++j) {
        const int64_t k = i + 16 * q + j;
        const float w = y[k] + (u[k] * a + v[k] * b);
        m[j] = w > m[j] ? w : m[j];
      }
    bool any = false;
    for (int j = 0; j < 16; ++j) any |= m[j] >= t;
    if (!any) continue;
    for (int64_t k = i; k < i + 64; ++k)
      if (y[k] + (u[k] * a + v[k] * b) >= t) ids.push_back((int32_t)k);
    if (ids.size() > cap) return false;
  }
  for (; i < n; ++i)
    if (y[i] + (u[i] * a + v[i] * b) >= t) ids.push_back((int32_t)i);
  return ids.size() <= cap;
}

constexpr size_t kGatherAhead = 8;

}  // namespace

// Per 32-block: w = d8 q (exact in f32), the first element of largest |w| (signed_absmax: the first
// largest |q|, as |w| = |d8| |q|), then ggml's Q5_0 rounding, as quantize_row_q5_0_ref does on the
// dequantized row. The error sums run in f32 lanes (they vectorise) and are inflated by
// kRequantStatsSlack for their rounding (32-term f32 sums err by < 2e-6 relative).
// No contraction: w id + 16.5 must round twice, as the reference's (FMA-less) code does.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
DSPARK_CLONES RequantStats requantize_q8_0_to_q5_0(const void* src_row, void* dst_row, int64_t n) {
  constexpr double kRequantStatsSlack = 1e-5;
  const auto* src = static_cast<const kernels::BlockQ8_0*>(src_row);
  auto* dst = static_cast<kernels::BlockQ5_0*>(dst_row);
  float e2[16] = {}, w2[16] = {}, t2[16] = {}, emax[16] = {};
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d8 = fp16_to_fp32(src[b].d);
    const int8_t* qs = src[b].qs;
    float w[32];
    int amax = 0;
    for (int j = 0; j < 32; ++j) {
      w[j] = d8 * (float)qs[j];
      amax = std::max(amax, std::abs((int)qs[j]));
    }
    int jmax = 0;
    while (jmax < 31 && std::abs((int)qs[jmax]) != amax) ++jmax;
    // All |w| = 0 (or d8 NaN): the reference keeps its +0 start (then d = -0).
    const float mx = amax == 0 || !(std::fabs(d8) > 0) ? 0.f : w[jmax];
    const float d = mx / -16.f;
    const float id = d ? 1.f / d : 0.f;
    dst[b].d = fp32_to_fp16(d);
    const float dh = fp16_to_fp32(dst[b].d);
    // |w| <= |mx|, so w id + 16.5 is in [0.5, 32.5]: truncation to int is the reference's int8_t one.
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = std::min(31, (int)(w[j] * id + 16.5f));
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      dst[b].qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      qh |= (uint32_t)((q[j] & 0x10) >> 4) << j;
      qh |= (uint32_t)((q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(dst[b].qh, &qh, 4);
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 16; ++l) {
        const int j = 16 * half + l;
        const float wt = dh * (float)(q[j] - 16), e = std::fabs(w[j] - wt);
        e2[l] += e * e;
        w2[l] += w[j] * w[j];
        t2[l] += wt * wt;
        emax[l] = e > emax[l] ? e : emax[l];
      }
  }
  double se = 0, sw = 0, st = 0, em = 0;
  for (int l = 0; l < 16; ++l) {
    se += e2[l];
    sw += w2[l];
    st += t2[l];
    em = std::max(em, (double)emax[l]);
  }
  const double k = 1.0 + kRequantStatsSlack;
  return {std::sqrt(se) * k, em * k, std::sqrt(sw) * k, std::sqrt(st) * k};
}
#pragma GCC pop_options

ActivationSplit split_activation_bound(const float* x, int64_t n, float u_typ, float v_typ, std::vector<float>& tmp) {
  // x̂_j = q_j · f16(d), d = amax / 127, |q_j| <= 127: |x_j - x̂_j| <= d / 2 + 127 |d - f16(d)|
  // <= 0.57 d + 127 · 2⁻²⁵ (f16 rounding: 2⁻¹¹ relative, 2⁻²⁵ absolute in the subnormals), so
  // |x̂_j| <= m_j = |x_j| + amax / 127 + 4e-6.
  tmp.resize((size_t)n);
  double total = 0;
  for (int64_t b = 0; b < n; b += 32) {
    const int64_t e = std::min<int64_t>(n, b + 32);
    float amax = 0;
    for (int64_t j = b; j < e; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double err = (double)amax / 127.0 + 4e-6;
    for (int64_t j = b; j < e; ++j) {
      tmp[(size_t)j] = (float)((double)std::fabs(x[j]) + err);
      total += (double)tmp[(size_t)j] * tmp[(size_t)j];
    }
  }
  // The k largest m_j form A: try k = 0 .. kMaxOutliers, keep the cheapest for a typical row.
  const int64_t kmax = std::min<int64_t>(n, ArgmaxHead::kMaxOutliers);
  std::partial_sort(tmp.begin(), tmp.begin() + kmax, tmp.end(), std::greater<float>());
  ActivationSplit best{0.0, std::sqrt(total)};
  double l1 = 0, rest = total, best_cost = (double)v_typ * best.b;
  for (int64_t k = 0; k < kmax; ++k) {
    l1 += tmp[(size_t)k];
    rest -= (double)tmp[(size_t)k] * tmp[(size_t)k];
    const double b = std::sqrt(std::max(rest, 0.0));
    const double cost = (double)u_typ * l1 + (double)v_typ * b;
    if (cost < best_cost) {
      best_cost = cost;
      best = {l1, b};
    }
  }
  // Guard the subtraction's rounding: rest >= the true sum over B minus a relative 1e-12 of total.
  best.b = std::sqrt(best.b * best.b + 1e-12 * total);
  return best;
}

bool ArgmaxHead::worth_building(const ModelWeights& w) {
  auto bytes = [](const kernels::QMatrix& m) { return row_bytes(m.type, m.n_cols) * (size_t)m.n_rows; };
  size_t total = bytes(w.output);
  for (const LayerWeights& L : w.layers)
    for (const kernels::QMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) total += bytes(*m);
  return (double)bytes(w.output) >= kMinHeadShare * (double)total;
}

std::unique_ptr<ArgmaxHead> ArgmaxHead::build(const kernels::QMatrix& head, const kernels::Backend& be) {
  if (head.type != DType::Q8_0 || !head.data || head.n_cols % 32 != 0 || !be.host_memory()) return nullptr;
  const int64_t V = head.n_rows, H = head.n_cols, nb = H / 32;
  std::unique_ptr<ArgmaxHead> h(new ArgmaxHead(head, be));
  const size_t qrow = row_bytes(DType::Q5_0, H);
  h->screen_data_ = be.alloc(qrow * (size_t)V);
  h->screen_ = kernels::QMatrix{DType::Q5_0, V, H, h->screen_data_.data(), qrow};
  if (!be.matmul_path(h->screen_).simd) return nullptr;
  h->linf_.resize((size_t)V);
  h->l2_.resize((size_t)V);

  // Rows in parallel (independent; the same values whatever the split).
  const double fp = (double)(nb + 2) * std::ldexp(1.0, -23);
  auto work = [&](int64_t r0, int64_t r1) {
    auto* dst = static_cast<uint8_t*>(h->screen_data_.data());
    for (int64_t i = r0; i < r1; ++i) {
      const RequantStats st = requantize_q8_0_to_q5_0(
          static_cast<const uint8_t*>(head.data) + (size_t)i * head.row_stride, dst + (size_t)i * qrow, H);
      const double slop = fp * (st.norm_w + st.norm_wt);
      h->linf_[(size_t)i] = round_up((st.linf + slop) * (1.0 + 1e-9));
      h->l2_[(size_t)i] = round_up((st.l2 + slop) * (1.0 + 1e-9));
    }
  };
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), 8));
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < nt; ++t) threads.emplace_back(work, V * t / nt, V * (t + 1) / nt);
  work(0, V / nt);
  for (std::thread& t : threads) t.join();

  // Typical coefficients (medians) choose each activation row's split (split_activation_bound).
  for (auto [src, dst] : {std::pair{&h->linf_, &h->linf_typ_}, std::pair{&h->l2_, &h->l2_typ_}}) {
    std::vector<float> t = *src;
    std::nth_element(t.begin(), t.begin() + (ptrdiff_t)(t.size() / 2), t.end());
    *dst = t[t.size() / 2];
  }
  if (be.prepare_weight(&h->screen_, &h->screen_storage_) && be.weight_prepared(h->screen_)) {
    h->screen_.data = nullptr;  // runs from the packed copy alone
    h->screen_data_ = kernels::Buffer();
  }
  return h;
}

void ArgmaxHead::run(kernels::MatmulContext& mm, const float* x, int64_t n, float* y, int64_t ldy,
                     ArgmaxScratch& s) const {
  const int64_t V = head_.n_rows, H = head_.n_cols;
  const size_t rb = row_bytes(DType::Q8_0, H);
  if (n > kMaxScreenRows || s.skip > 0) {
    s.skip = std::max<int64_t>(0, s.skip - n);
    s.full_rows += n;
    be_->matmul(mm, head_, x, n, y, ldy);
    return;
  }
  be_->matmul(mm, screen_, x, n, y, ldy);  // ỹ [n, V]
  const float *u = linf_.data(), *v = l2_.data();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * H;
    float* yt = y + t * ldy;
    // f32 with margins for its roundings: a and b inflated by kRelSlack (so every u_i a + v_i b is at
    // least the exact bound), and the threshold lowered by kRelSlack (|L| + 1) (each sum or
    // difference near L rounds by at most 2^-24 |L|).
    const ActivationSplit sp = split_activation_bound(xt, H, linf_typ_, l2_typ_, s.split);
    const float a = (float)(sp.a * (1.0 + kRelSlack)), b = (float)(sp.b * (1.0 + kRelSlack));
    const float lower = max_lower(yt, u, v, a, b, V);
    s.cand.clear();
    bool fallback = !std::isfinite(lower);
    if (!fallback) {
      const float t = lower - kRelSlack * (std::fabs(lower) + 1.0f);
      fallback = !collect_upper(yt, u, v, a, b, t, V, (size_t)((double)V * kMaxCandidateShare), s.cand);
    }
    ++s.rows_run;
    if (fallback) {
      ++s.fallbacks;
      s.skip = kSkipAfterFallback;
      be_->matmul(mm, head_, xt, 1, yt, V);
      continue;
    }
    const size_t m = s.cand.size();
    s.candidates += (int64_t)m;
    s.rows.resize(m * rb);
    // Scattered rows: prefetch kGatherAhead rows ahead so their cache misses overlap.
    const auto* src = static_cast<const uint8_t*>(head_.data);
    for (size_t j = 0; j < m; ++j) {
      if (j + kGatherAhead < m) {
        const uint8_t* p = src + (size_t)s.cand[j + kGatherAhead] * head_.row_stride;
        for (size_t o = 0; o < rb; o += 64) __builtin_prefetch(p + o);
        __builtin_prefetch(p + rb - 1);
      }
      std::memcpy(s.rows.data() + j * rb, src + (size_t)s.cand[j] * head_.row_stride, rb);
    }
    s.exact.resize(m);
    const kernels::QMatrix g{DType::Q8_0, (int64_t)m, H, s.rows.data(), rb};
    be_->matmul(mm, g, xt, 1, s.exact.data(), (int64_t)m);
    std::fill(yt, yt + V, neg_inf);
    for (size_t j = 0; j < m; ++j) yt[s.cand[j]] = s.exact[j];
  }
}

}  // namespace dspark::model
