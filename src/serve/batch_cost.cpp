#include "serve/batch_cost.h"

#include <algorithm>

namespace dspark::serve {

namespace {
constexpr double kAlpha = 0.2;         // moving-average weight of a new forward (1/n while n < 1/kAlpha)
constexpr int64_t kMinSamples = 3;     // a row count measured fewer times leans on the prior
void add(double x, double* v, int64_t* n) {
  const double a = std::max(kAlpha, 1.0 / (double)(*n + 1));
  *v += a * (x - *v);
  ++*n;
}
}  // namespace

BatchCost::BatchCost(std::vector<double> prior_ms, int64_t max_rows)
    : prior_(std::move(prior_ms)), t_((size_t)std::max<int64_t>(max_rows, 1) + 1) {
  if (prior_.size() < 2) prior_.clear();
}

double BatchCost::prior(int64_t rows) const {
  if (prior_.empty() || rows < 1) return 0;
  const int64_t last = (int64_t)prior_.size() - 1;
  if (rows <= last) return prior_[(size_t)rows];
  const double slope = last >= 2 ? std::max(0.0, prior_[(size_t)last] - prior_[(size_t)last - 1]) : 0.0;
  return prior_[(size_t)last] + slope * (double)(rows - last);
}

void BatchCost::observe(int64_t rows, double ms) {
  if (rows < 1 || rows >= (int64_t)t_.size() || !(ms > 0)) return;
  add(ms, &t_[(size_t)rows].v, &t_[(size_t)rows].n);
  if (const double p = prior(rows); p > 0) add(ms / p, &scale_.v, &scale_.n);
}

double BatchCost::cost(int64_t rows) const {
  if (rows <= 0) return 0;
  const bool in = rows < (int64_t)t_.size();
  if (in && t_[(size_t)rows].n >= kMinSamples) return t_[(size_t)rows].v;
  if (const double p = prior(rows); p > 0) return p * (scale_.n > 0 ? scale_.v : 1.0);
  if (in && t_[(size_t)rows].n > 0) return t_[(size_t)rows].v;
  // No prior: linear between the nearest measured row counts below and above; past the last one
  // measured, proportional to rows (no fixed part: the pessimistic guess for extra rows).
  int64_t lo = 0, hi = 0;
  for (int64_t r = std::min(rows, (int64_t)t_.size()) - 1; r >= 1 && !lo; --r)
    if (t_[(size_t)r].n > 0) lo = r;
  for (int64_t r = rows + 1; r < (int64_t)t_.size() && !hi; ++r)
    if (t_[(size_t)r].n > 0) hi = r;
  const double vlo = lo ? t_[(size_t)lo].v : 0, vhi = hi ? t_[(size_t)hi].v : 0;
  if (lo && hi) return vlo + (vhi - vlo) * (double)(rows - lo) / (double)(hi - lo);
  if (lo) return vlo * (double)rows / (double)lo;
  if (hi) return vhi * (double)rows / (double)hi;
  return 0;
}

std::vector<double> BatchCost::charges(std::span<const int64_t> windows, double ms) const {
  const int64_t n = (int64_t)windows.size();
  int64_t rows = 0;
  for (const int64_t w : windows) rows += std::max<int64_t>(w, 1);
  std::vector<double> c((size_t)n, 0.0);
  if (n == 0) return c;
  const double total = cost(rows), plain = cost(n);
  if (!(total > 0) || !(plain > 0)) {  // nothing known yet: by rows
    for (int64_t i = 0; i < n; ++i) c[(size_t)i] = ms * (double)std::max<int64_t>(windows[(size_t)i], 1) / (double)rows;
    return c;
  }
  const double scale = ms / total;  // the estimates, scaled to this forward's measured time
  for (int64_t i = 0; i < n; ++i) {
    const int64_t extra = std::max<int64_t>(windows[(size_t)i], 1) - 1;
    const double margin = extra > 0 ? std::max(0.0, total - cost(rows - extra)) : 0.0;
    c[(size_t)i] = (plain / (double)n + margin) * scale;
  }
  return c;
}

}  // namespace dspark::serve
