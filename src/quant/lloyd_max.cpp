#include "quant/lloyd_max.h"

#include <cmath>

#include "core/status.h"

namespace dspark::quant {

namespace {

constexpr double kInvSqrt2Pi = 0.3989422804014327;
double pdf(double x) { return std::isinf(x) ? 0.0 : kInvSqrt2Pi * std::exp(-0.5 * x * x); }
double cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
// x * pdf(x), 0 at ±inf.
double xpdf(double x) { return std::isinf(x) ? 0.0 : x * pdf(x); }

}  // namespace

LloydMaxCodebook lloyd_max_gaussian(int bits) {
  DSPARK_CHECK(bits >= 1 && bits <= 8);
  const int n = 1 << bits;
  LloydMaxCodebook cb;
  cb.bits = bits;
  cb.levels.resize((size_t)n);
  cb.boundaries.resize((size_t)(n - 1));
  for (int i = 0; i < n; ++i) cb.levels[(size_t)i] = -3.0 + 6.0 * (i + 0.5) / n;  // uniform start on [-3, 3]
  auto lo = [&](int i) { return i == 0 ? -INFINITY : cb.boundaries[(size_t)(i - 1)]; };
  auto hi = [&](int i) { return i == n - 1 ? INFINITY : cb.boundaries[(size_t)i]; };
  for (cb.iterations = 1; cb.iterations <= 100000; ++cb.iterations) {
    for (int i = 0; i + 1 < n; ++i) cb.boundaries[(size_t)i] = 0.5 * (cb.levels[(size_t)i] + cb.levels[(size_t)(i + 1)]);
    double moved = 0;
    for (int i = 0; i < n; ++i) {
      const double a = lo(i), b = hi(i), p = cdf(b) - cdf(a);
      const double c = p > 0 ? (pdf(a) - pdf(b)) / p : 0.5 * (a + b);  // E[X | a < X < b]
      moved = std::max(moved, std::fabs(c - cb.levels[(size_t)i]));
      cb.levels[(size_t)i] = c;
    }
    if (moved < 1e-14) break;
  }
  // Keep the codebook exactly symmetric (the iteration is symmetric up to rounding).
  for (int i = 0; i < n / 2; ++i) {
    const double m = 0.5 * (cb.levels[(size_t)(n - 1 - i)] - cb.levels[(size_t)i]);
    cb.levels[(size_t)i] = -m;
    cb.levels[(size_t)(n - 1 - i)] = m;
  }
  for (int i = 0; i + 1 < n; ++i) cb.boundaries[(size_t)i] = 0.5 * (cb.levels[(size_t)i] + cb.levels[(size_t)(i + 1)]);
  // MSE = Σ_cells ∫_a^b (x - c)^2 φ(x) dx = ∫x^2 φ - 2c ∫x φ + c^2 P, with ∫_a^b x^2 φ = P + aφ(a) - bφ(b)
  // and ∫_a^b x φ = φ(a) - φ(b), P = Φ(b) - Φ(a).
  cb.mse = 0;
  for (int i = 0; i < n; ++i) {
    const double a = lo(i), b = hi(i), c = cb.levels[(size_t)i];
    const double p = cdf(b) - cdf(a);
    const double ex2 = p + xpdf(a) - xpdf(b), ex = pdf(a) - pdf(b);
    cb.mse += ex2 - 2 * c * ex + c * c * p;
  }
  return cb;
}

std::vector<float> turbo_levels(int bits) {
  const LloydMaxCodebook cb = lloyd_max_gaussian(bits);
  std::vector<float> out(cb.levels.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = (float)cb.levels[i];
  return out;
}

}  // namespace dspark::quant
