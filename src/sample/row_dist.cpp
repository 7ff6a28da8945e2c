#include "sample/row_dist.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "sample/sampler.h"

namespace dspark::sample {

namespace {

// Candidates are the tokens within a margin below the max logit (nats at temperature 1). The first
// margin holds the survivors of a typical row; each miss doubles it, and past kLastMargin the
// whole vocabulary is taken (below max - 64 a token's share is < e^-64, far under any top-p gap).
constexpr float kFirstMargin = 8.0f;
constexpr float kLastMargin = 128.0f;
// min-p's bound log(1 / min_p) is widened by this much so rounding never drops a survivor; the
// exact min-p test then runs on the candidates.
constexpr float kMinPSlack = 1e-3f;
// Candidate sets up to this size are sorted outright; larger ones go through a histogram of
// kBins bins over [max - span, max] and only the boundary bin is sorted.
constexpr size_t kSortMax = 1024;
constexpr int kBins = 2048;

}  // namespace

// The order the cut-offs are defined in: logit descending, then id ascending.
static bool by_logit(const RowDist::Cand& a, const RowDist::Cand& b) { return a.x > b.x || (a.x == b.x && a.id < b.id); }

namespace {

// Runs fn(part, c0, c1) over [0, n_chunks) split into one contiguous range per pool thread.
template <class F>
void split_chunks(ThreadPool* pool, int64_t n_chunks, F&& fn) {
  constexpr int64_t kMinChunksToSplit = 16;
  if (!pool || pool->size() == 1 || n_chunks < kMinChunksToSplit) {
    fn(0, (int64_t)0, n_chunks);
    return;
  }
  pool->run([&](int i, int nt) { fn(i, n_chunks * i / nt, n_chunks * (i + 1) / nt); });
}

int64_t n_chunks_of(int64_t n) { return (n + kernels::kExpChunk - 1) / kernels::kExpChunk; }

// The widest candidate margin needed: min-p keeps x_i >= m + log(min_p) whatever else is on, so
// that bounds the candidates, except with top-k and top-p together (top-p then normalises over
// all k top-k tokens).
float cap_of(const SamplerConfig& cfg, bool top_k, bool top_p, bool min_p) {
  if (min_p && !(top_k && top_p)) return std::min(kLastMargin, -std::log(cfg.min_p) + kMinPSlack);
  return kLastMargin;
}

}  // namespace

float RowDist::par_max(const float* x, ThreadPool* pool) {
  part_max_.assign(pool ? (size_t)pool->size() : 1, -INFINITY);
  split_chunks(pool, n_chunks_of(n_), [&](int part, int64_t c0, int64_t c1) {
    const int64_t lo = c0 * kernels::kExpChunk, hi = std::min(n_, c1 * kernels::kExpChunk);
    if (hi > lo) part_max_[(size_t)part] = kernels::max_value(x + lo, hi - lo);
  });
  return *std::max_element(part_max_.begin(), part_max_.end());
}

double RowDist::par_exp(const float* x, float shift, float scale, ThreadPool* pool, float collect_t) {
  e_.resize((size_t)n_);
  chunk_.resize((size_t)n_chunks_of(n_));
  const bool collect = collect_t > -INFINITY;
  if (collect) {
    part_ids_.resize(pool ? (size_t)pool->size() : 1);
    for (auto& v : part_ids_) v.clear();
  }
  split_chunks(pool, n_chunks_of(n_), [&](int part, int64_t c0, int64_t c1) {
    if (!collect) {
      const int64_t lo = c0 * kernels::kExpChunk, hi = std::min(n_, c1 * kernels::kExpChunk);
      if (hi > lo) kernels::exp_shift_sum(x + lo, hi - lo, shift, scale, e_.data() + lo, chunk_.data() + c0);
      return;
    }
    // Chunk by chunk, so the collect pass reads x while it is still in L1.
    std::vector<int32_t>& out = part_ids_[(size_t)part];
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t lo = c * kernels::kExpChunk, hi = std::min(n_, lo + kernels::kExpChunk);
      kernels::exp_shift_sum(x + lo, hi - lo, shift, scale, e_.data() + lo, chunk_.data() + c);
      const size_t before = out.size();
      kernels::collect_ge(x + lo, hi - lo, collect_t, out);
      for (size_t j = before; j < out.size(); ++j) out[j] += (int32_t)lo;
    }
  });
  if (collect) {
    ids_.clear();
    for (const auto& v : part_ids_) ids_.insert(ids_.end(), v.begin(), v.end());
  }
  double z = 0;  // the chunk sums in order, as exp_shift_sum adds them: the same for any split
  for (float c : chunk_) z += c;
  return z;
}

void RowDist::par_collect(const float* x, float t, ThreadPool* pool) {
  part_ids_.resize(pool ? (size_t)pool->size() : 1);
  for (auto& v : part_ids_) v.clear();
  split_chunks(pool, n_chunks_of(n_), [&](int part, int64_t c0, int64_t c1) {
    const int64_t lo = c0 * kernels::kExpChunk, hi = std::min(n_, c1 * kernels::kExpChunk);
    std::vector<int32_t>& out = part_ids_[(size_t)part];
    if (hi > lo) kernels::collect_ge(x + lo, hi - lo, t, out);
    for (int32_t& id : out) id += (int32_t)lo;
  });
  ids_.clear();
  for (const auto& v : part_ids_) ids_.insert(ids_.end(), v.begin(), v.end());
}

void RowDist::build(const SamplerConfig& cfg, const float* x, int64_t n, ThreadPool* pool) {
  n_ = n;
  dense_ = false;
  kept_.clear();
  if (cfg.temperature <= 0.0f) {
    kept_.push_back({(int32_t)kernels::argmax(x, n), 1.0f});
    return;
  }
  const float m = par_max(x, pool);
  const bool truncating = (cfg.top_k > 0 && cfg.top_k < n) || cfg.top_p < 1.0f || cfg.min_p > 0.0f;
  if (truncating) {
    build_sparse(cfg, x, m, pool);
    return;
  }
  dense_ = true;
  z_ = par_exp(x, m, 1.0f / cfg.temperature, pool);
}

// Histogram bins by logit over [m - span, m]: bin 0 holds the max, and bins are monotone in the
// logit (a larger logit never lands in a later bin), so whole bins lie on one side of any cut.
namespace {
struct Histogram {
  float m, inv_w;
  int bin_of(float x) const {
    const float b = (m - x) * inv_w;
    return b >= (float)(kBins - 1) ? kBins - 1 : (int)b;
  }
};
}  // namespace

void RowDist::build_sparse(const SamplerConfig& cfg, const float* x, float m, ThreadPool* pool) {
  const int64_t n = n_;
  const bool top_k = cfg.top_k > 0 && cfg.top_k < n;
  const bool top_p = cfg.top_p < 1.0f;
  const bool min_p = cfg.min_p > 0.0f;
  const float cap = cap_of(cfg, top_k, top_p, min_p);
  const float first_margin = std::min(kFirstMargin, cap);
  // Top-p without top-k normalises over the whole vocabulary: Z1 = sum exp(x - m). That pass also
  // collects the first candidates.
  const bool fused = top_p && !top_k;
  double z1 = 0;
  if (fused) z1 = par_exp(x, m, 1.0f, pool, m - first_margin);
  for (float margin = first_margin;; margin = std::min(2 * margin, cap)) {
    if (margin >= kLastMargin) {
      ids_.resize((size_t)n);
      for (int64_t i = 0; i < n; ++i) ids_[(size_t)i] = (int32_t)i;
      break;
    }
    if (!(fused && margin == first_margin)) par_collect(x, m - margin, pool);
    if (margin >= cap) break;  // the bound holds every survivor
    if (top_k) {
      if ((int64_t)ids_.size() >= cfg.top_k) break;  // holds the top k (ties at the k-th value included)
    } else if (top_p) {
      double mass = 0;
      for (int32_t id : ids_) mass += e_[(size_t)id];
      if (mass >= (double)cfg.top_p * z1) break;  // the nucleus ends inside the candidates
    }
  }
  cand_.clear();
  for (int32_t id : ids_) cand_.push_back({x[id], id, top_p && !top_k ? e_[(size_t)id] : 0.0f});

  // The cut: the last survivor of top-k then top-p in logit order; everything after it goes.
  bool has_cut = false;
  Cand cut{};
  if (top_k && (int64_t)cand_.size() > cfg.top_k) {
    cut = kth(cand_, (size_t)cfg.top_k, m);
    has_cut = true;
    // Keep the top-k set only (exactly k members: ties at the cut resolved by id).
    size_t w = 0;
    for (const Cand& c : cand_)
      if (!by_logit(cut, c)) cand_[w++] = c;
    cand_.resize(w);
  }
  if (top_p) {
    double z = z1;
    if (top_k) {
      z = 0;
      for (Cand& c : cand_) z += (c.e = std::exp(c.x - m));
    }
    cut = top_p_cut(cand_, (double)cfg.top_p * z, m);
    has_cut = true;
  }
  // Survivors in vocabulary order (ids_ is ascending): not after the cut, and min-p.
  const float min_logit = min_p ? m + std::log(cfg.min_p) : -INFINITY;
  xs_.clear();
  for (int32_t id : ids_) {
    const float xi = x[id];
    if (has_cut && by_logit(cut, Cand{xi, id, 0.0f})) continue;
    if (xi < min_logit && xi != m) continue;
    kept_.push_back({id, 0.0f});
    xs_.push_back(xi);
  }
  // The temperature softmax over the survivors.
  std::vector<float>& ps = e_;  // scratch (the dense form's exp values are unused here)
  ps.resize(xs_.size());
  const double sum = kernels::exp_shift_sum(xs_.data(), (int64_t)xs_.size(), m, 1.0f / cfg.temperature, ps.data());
  for (size_t i = 0; i < kept_.size(); ++i) kept_[i].p = (float)(ps[i] / sum);
}

RowDist::Cand RowDist::kth(std::vector<Cand>& s, size_t k, float m) {
  if (s.size() <= kSortMax) {
    std::nth_element(s.begin(), s.begin() + (ptrdiff_t)(k - 1), s.end(), by_logit);
    return s[k - 1];
  }
  float lo = m;
  for (const Cand& c : s) lo = std::min(lo, c.x);
  const Histogram h{m, m > lo ? (float)(kBins - 1) / (m - lo) : 0.0f};
  bin_count_.assign(kBins, 0);
  for (const Cand& c : s) ++bin_count_[(size_t)h.bin_of(c.x)];
  int b = 0;
  size_t before = 0;
  while (before + (size_t)bin_count_[(size_t)b] < k) before += (size_t)bin_count_[(size_t)b++];
  bin_members_.clear();
  for (const Cand& c : s)
    if (h.bin_of(c.x) == b) bin_members_.push_back(c);
  const size_t r = k - before - 1;
  std::nth_element(bin_members_.begin(), bin_members_.begin() + (ptrdiff_t)r, bin_members_.end(), by_logit);
  return bin_members_[r];
}

RowDist::Cand RowDist::top_p_cut(std::vector<Cand>& s, double target, float m) {
  if (s.size() <= kSortMax) {
    std::sort(s.begin(), s.end(), by_logit);
    double acc = 0;
    for (const Cand& c : s)
      if ((acc += c.e) >= target) return c;
    return s.back();
  }
  float lo = m;
  for (const Cand& c : s) lo = std::min(lo, c.x);
  const Histogram h{m, m > lo ? (float)(kBins - 1) / (m - lo) : 0.0f};
  bin_mass_.assign(kBins, 0.0);
  for (const Cand& c : s) bin_mass_[(size_t)h.bin_of(c.x)] += c.e;
  int b = 0;
  double acc = 0;
  int last_nonempty = 0;
  for (; b < kBins; ++b) {
    if (bin_mass_[(size_t)b] > 0) last_nonempty = b;
    if (acc + bin_mass_[(size_t)b] >= target) break;
    acc += bin_mass_[(size_t)b];
  }
  if (b == kBins) {  // rounding: the total fell short of target; everything survives
    b = last_nonempty;
    acc -= bin_mass_[(size_t)b];
  }
  bin_members_.clear();
  for (const Cand& c : s)
    if (h.bin_of(c.x) == b) bin_members_.push_back(c);
  std::sort(bin_members_.begin(), bin_members_.end(), by_logit);
  for (const Cand& c : bin_members_)
    if ((acc += c.e) >= target) return c;
  return bin_members_.back();
}

float RowDist::prob(int32_t id) const {
  if (dense_) return id >= 0 && id < n_ ? (float)(e_[(size_t)id] / z_) : 0.0f;
  auto it = std::lower_bound(kept_.begin(), kept_.end(), id, [](const TokenProb& a, int32_t v) { return a.id < v; });
  return it != kept_.end() && it->id == id ? it->p : 0.0f;
}

int32_t RowDist::draw(Rng& rng) const {
  const double u = rng.uniform();
  if (!dense_) return draw_at(kept_, u);
  return walk_dense(u * z_, {}, nullptr);
}

// First token (vocabulary order) where the running sum of max(e_i / z - adj_i, 0) * z exceeds
// target. chunk_adj [n_chunks] (z-scaled, optional) and q_by_id (ids ascending) give the adj_i.
int32_t RowDist::walk_dense(double target, std::span<const IdProb> q_by_id, const double* chunk_adj) const {
  const int64_t k_chunk = kernels::kExpChunk;
  double cum = 0;
  int32_t last = (int32_t)n_ - 1;
  size_t qi = 0;
  for (size_t c = 0; c < chunk_.size(); ++c) {
    const int64_t lo = (int64_t)c * k_chunk, hi = std::min(n_, lo + k_chunk);
    while (qi < q_by_id.size() && q_by_id[qi].first < lo) ++qi;
    const double block = (double)chunk_[c] - (chunk_adj ? chunk_adj[c] : 0.0);
    if (cum + block <= target) {
      cum += block;
      continue;
    }
    for (int64_t i = lo; i < hi; ++i) {
      double r = e_[(size_t)i];
      if (qi < q_by_id.size() && q_by_id[qi].first == i) r = std::max(0.0, r - (double)q_by_id[qi++].second * z_);
      if (r <= 0) continue;
      last = (int32_t)i;
      cum += r;
      if (target < cum) return (int32_t)i;
    }
    // Rounding between the chunk sum and the per-token walk: carry on with the exact running sum.
  }
  return last;
}

int32_t RowDist::draw_residual(std::span<const IdProb> q, Rng& rng) const {
  const double u = rng.uniform();
  if (!dense_) {
    // r_j = max(p_j - q(id_j), 0) over the kept tokens (ids ascending: binary search per q entry).
    std::vector<double>& r = adj_scratch_;
    r.resize(kept_.size());
    for (size_t j = 0; j < kept_.size(); ++j) r[j] = kept_[j].p;
    for (const IdProb& e : q) {
      auto it = std::lower_bound(kept_.begin(), kept_.end(), e.first,
                                 [](const TokenProb& a, int32_t v) { return a.id < v; });
      if (it != kept_.end() && it->id == e.first) r[(size_t)(it - kept_.begin())] = it->p - e.second;
    }
    double mass = 0;
    for (double v : r) mass += v > 0 ? v : 0;
    if (mass <= kResidualMassFloor) return draw_at(kept_, u);
    double cum = 0;
    int32_t last = kept_.back().id;
    for (size_t j = 0; j < kept_.size(); ++j) {
      if (r[j] <= 0) continue;
      last = kept_[j].id;
      cum += (float)(r[j] / mass);
      if (u < cum) return kept_[j].id;
    }
    return last;
  }
  // Dense: the residual removes min(p_i, q_i) from each token of q.
  std::vector<IdProb>& qs = q_scratch_;
  qs.assign(q.begin(), q.end());
  std::sort(qs.begin(), qs.end());
  std::vector<double>& chunk_adj = adj_scratch_;
  chunk_adj.assign(chunk_.size(), 0.0);
  double removed = 0;  // z-scaled sum of min(p_i, q_i)
  for (const IdProb& e : qs) {
    if (e.first < 0 || e.first >= n_) continue;
    const double a = std::min((double)e_[(size_t)e.first], (double)e.second * z_);
    chunk_adj[(size_t)(e.first / kernels::kExpChunk)] += a;
    removed += a;
  }
  const double mass = (z_ - removed) / z_;
  if (mass <= kResidualMassFloor) return walk_dense(u * z_, {}, nullptr);
  return walk_dense(u * (z_ - removed), qs, chunk_adj.data());
}

void RowDist::to_list(std::vector<TokenProb>* out) const {
  out->clear();
  if (!dense_) {
    out->assign(kept_.begin(), kept_.end());
    return;
  }
  for (int64_t i = 0; i < n_; ++i)
    if (e_[(size_t)i] > 0) out->push_back({(int32_t)i, (float)(e_[(size_t)i] / z_)});
}

}  // namespace dspark::sample
