#include "quant/knapsack.h"

#include <cmath>
#include <limits>

namespace dspark::quant {

namespace {

double kl_of(const Candidate& c) {
  return std::isfinite(c.kl) ? c.kl : std::numeric_limits<double>::max() / 4;
}

}  // namespace

Result<Allocation> allocate_bits(const std::vector<TensorSensitivity>& table, double target_bpw) {
  if (table.empty()) return Status::error("bit allocation: the sensitivity table is empty");
  Allocation a;
  double params = 0;
  for (const TensorSensitivity& t : table) {
    if (t.candidates.empty()) return Status::error("bit allocation: tensor " + t.name + " has no candidates");
    if (t.params <= 0) return Status::error("bit allocation: tensor " + t.name + " has no weights");
    size_t cheapest = 0;
    for (size_t i = 1; i < t.candidates.size(); ++i) {
      const Candidate &c = t.candidates[i], &b = t.candidates[cheapest];
      if (c.bpw < b.bpw || (c.bpw == b.bpw && kl_of(c) < kl_of(b))) cheapest = i;
    }
    a.choice.push_back(cheapest);
    a.total_bits += t.candidates[cheapest].bpw * (double)t.params;
    params += (double)t.params;
  }
  const double budget = target_bpw * params;
  if (a.total_bits > budget * (1 + 1e-12))
    return Status::error("bit allocation: target " + std::to_string(target_bpw) + " bpw is below the cheapest mix (" +
                         std::to_string(a.total_bits / params) + " bpw)");
  for (;;) {
    // The best-efficiency upgrade that still fits the budget.
    double best_eff = 0;
    size_t best_t = 0, best_c = 0;
    bool found = false;
    for (size_t ti = 0; ti < table.size(); ++ti) {
      const TensorSensitivity& t = table[ti];
      const Candidate& cur = t.candidates[a.choice[ti]];
      for (size_t ci = 0; ci < t.candidates.size(); ++ci) {
        const Candidate& c = t.candidates[ci];
        const double dbits = (c.bpw - cur.bpw) * (double)t.params;
        const double dkl = kl_of(cur) - kl_of(c);
        if (!(dbits > 0) || !(dkl > 0)) continue;
        if (a.total_bits + dbits > budget * (1 + 1e-12)) continue;
        const double eff = dkl / dbits;
        if (!found || eff > best_eff) {
          found = true;
          best_eff = eff;
          best_t = ti;
          best_c = ci;
        }
      }
    }
    if (!found) break;
    const TensorSensitivity& t = table[best_t];
    a.total_bits += (t.candidates[best_c].bpw - t.candidates[a.choice[best_t]].bpw) * (double)t.params;
    a.choice[best_t] = best_c;
    ++a.upgrades;
  }
  a.bpw = a.total_bits / params;
  for (size_t ti = 0; ti < table.size(); ++ti) a.total_kl += kl_of(table[ti].candidates[a.choice[ti]]);
  return a;
}

}  // namespace dspark::quant
