#include "speculative/verify.h"

#include <algorithm>
#include <unordered_map>

#include "core/status.h"

namespace dspark::speculative {

namespace {

float prob_of(const std::vector<sample::TokenProb>& dist, int32_t id) {
  for (const auto& tp : dist)
    if (tp.id == id) return tp.p;
  return 0.0f;
}

float prob_of(const SparseDist& dist, int32_t id) {
  for (const auto& [t, p] : dist)
    if (t == id) return p;
  return 0.0f;
}


}  // namespace

Acceptance accept_greedy(std::span<const int32_t> target_argmax, std::span<const int32_t> drafts) {
  DSPARK_CHECK(target_argmax.size() == drafts.size() + 1);
  Acceptance a;
  while (a.n_accept < (int)drafts.size() && target_argmax[a.n_accept] == drafts[a.n_accept]) ++a.n_accept;
  a.next = target_argmax[a.n_accept];
  return a;
}

Acceptance accept_rejection(const RowSource& p_row, std::span<const int32_t> drafts, std::span<const SparseDist> q,
                            Rng& rng) {
  DSPARK_CHECK(q.size() == drafts.size());
  Acceptance a;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const sample::RowDist& p = p_row((int)i);
    const float pi = p.prob(drafts[i]);
    const float qi = std::max(prob_of(q[i], drafts[i]), 1e-8f);
    if (rng.uniform() < std::min(1.0, (double)pi / qi)) {
      ++a.n_accept;
      continue;
    }
    a.next = p.draw_residual(q[i], rng);
    return a;
  }
  a.next = p_row((int)drafts.size()).draw(rng);
  return a;
}

Acceptance accept_rejection_ref(std::span<const std::vector<sample::TokenProb>> p, std::span<const int32_t> drafts,
                                std::span<const SparseDist> q, Rng& rng) {
  DSPARK_CHECK(p.size() == drafts.size() + 1 && q.size() == drafts.size());
  Acceptance a;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const float pi = prob_of(p[i], drafts[i]);
    const float qi = std::max(prob_of(q[i], drafts[i]), 1e-8f);
    if (rng.uniform() < std::min(1.0, (double)pi / qi)) {
      ++a.n_accept;
      continue;
    }
    // Residual norm(max(p - q, 0)); q may be a full distribution, so index it once.
    std::unordered_map<int32_t, float> q_index;
    const bool indexed = q[i].size() > 16;
    if (indexed)
      for (const auto& [t, pr] : q[i]) q_index[t] = pr;
    auto q_prob = [&](int32_t id) {
      if (!indexed) return prob_of(q[i], id);
      auto it = q_index.find(id);
      return it == q_index.end() ? 0.0f : it->second;
    };
    std::vector<sample::TokenProb> residual;
    residual.reserve(p[i].size());
    double mass = 0;
    for (const auto& tp : p[i]) {
      const float r = tp.p - q_prob(tp.id);
      if (r > 0) {
        residual.push_back({tp.id, r});
        mass += r;
      }
    }
    if (mass <= sample::kResidualMassFloor) {
      a.next = sample::draw(p[i], rng);
    } else {
      for (auto& tp : residual) tp.p = (float)(tp.p / mass);
      a.next = sample::draw(residual, rng);
    }
    return a;
  }
  a.next = sample::draw(p[drafts.size()], rng);
  return a;
}

}  // namespace dspark::speculative
