#include "eval/ab_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/rng.h"

namespace dspark::eval {

namespace {

void add_into(std::vector<int64_t>& dst, const std::vector<int64_t>& src) {
  if (dst.size() < src.size()) dst.resize(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) dst[i] += src[i];
}

// Pooled sums of one resample.
struct Sums {
  double tokens = 0, ms = 0, prefill_ms = 0, drafted = 0, accepted = 0;
  void add(const PromptRecord& r) {
    tokens += (double)r.tokens;
    ms += r.ms;
    prefill_ms += r.prefill_ms;
    drafted += (double)r.drafted;
    accepted += (double)r.accepted;
  }
  std::optional<double> speed() const { return ms > 0 ? std::optional<double>(tokens / ms) : std::nullopt; }
  std::optional<double> decode_speed() const {
    return ms > prefill_ms && prefill_ms > 0 ? std::optional<double>(tokens / (ms - prefill_ms)) : std::nullopt;
  }
  std::optional<double> acceptance() const { return drafted > 0 ? std::optional<double>(accepted / drafted) : std::nullopt; }
};

std::optional<double> speed_ratio(const Sums& a, const Sums& b) {
  const auto sa = a.speed(), sb = b.speed();
  if (!sa || !sb || *sa <= 0) return std::nullopt;
  return *sb / *sa;
}

std::optional<double> decode_speed_ratio(const Sums& a, const Sums& b) {
  const auto sa = a.decode_speed(), sb = b.decode_speed();
  if (!sa || !sb || *sa <= 0) return std::nullopt;
  return *sb / *sa;
}

std::optional<double> accept_delta_pts(const Sums& a, const Sums& b) {
  const auto pa = a.acceptance(), pb = b.acceptance();
  if (!pa || !pb) return std::nullopt;
  return 100.0 * (*pb - *pa);
}

Interval make_interval(double point, std::vector<double>& samples, double level) {
  std::sort(samples.begin(), samples.end());
  const double tail = (1.0 - level) / 2;
  return {point, percentile_sorted(samples, tail), percentile_sorted(samples, 1.0 - tail), (int64_t)samples.size()};
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

std::vector<std::optional<double>> ArmSummary::acceptance_by_pos() const {
  std::vector<std::optional<double>> out(drafted_by_pos.size());
  for (size_t i = 0; i < drafted_by_pos.size(); ++i) {
    const int64_t acc = i < accepted_by_pos.size() ? accepted_by_pos[i] : 0;
    if (drafted_by_pos[i] > 0) out[i] = (double)acc / (double)drafted_by_pos[i];
  }
  return out;
}

ArmSummary summarize(std::span<const PromptRecord> prompts) {
  ArmSummary s;
  for (const PromptRecord& r : prompts) {
    ++s.n_prompts;
    s.tokens += r.tokens;
    s.ms += r.ms;
    s.prefill_ms += r.prefill_ms;
    s.drafted += r.drafted;
    s.accepted += r.accepted;
    s.rounds += r.rounds;
    add_into(s.drafted_by_pos, r.drafted_by_pos);
    add_into(s.accepted_by_pos, r.accepted_by_pos);
  }
  if (s.accepted_by_pos.size() < s.drafted_by_pos.size()) s.accepted_by_pos.resize(s.drafted_by_pos.size(), 0);
  return s;
}

double percentile_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  const double x = std::clamp(q, 0.0, 1.0) * (double)(sorted.size() - 1);
  const size_t i = (size_t)std::floor(x);
  if (i + 1 >= sorted.size()) return sorted.back();
  const double f = x - (double)i;
  return sorted[i] + f * (sorted[i + 1] - sorted[i]);
}

Result<PairedStats> paired_bootstrap(std::span<const PromptRecord> a, std::span<const PromptRecord> b,
                                     bool compare_acceptance, const BootstrapOptions& opt) {
  if (a.size() != b.size())
    return Status::error("paired bootstrap: arm A has " + std::to_string(a.size()) + " prompts, arm B " +
                         std::to_string(b.size()));
  if (a.empty()) return Status::error("paired bootstrap: no prompts");
  if (opt.n_boot < 1) return Status::error("paired bootstrap: the number of resamples must be >= 1");
  if (!(opt.level > 0 && opt.level < 1)) return Status::error("paired bootstrap: the level must be in (0, 1)");
  const size_t n = a.size();
  Sums full_a, full_b;
  for (size_t i = 0; i < n; ++i) { full_a.add(a[i]); full_b.add(b[i]); }
  const auto ratio = speed_ratio(full_a, full_b);
  if (!ratio) return Status::error("paired bootstrap: an arm has no measured time or no tokens");

  PairedStats out;
  out.n_prompts = (int64_t)n;
  const auto delta = compare_acceptance ? accept_delta_pts(full_a, full_b) : std::nullopt;
  const auto dratio = decode_speed_ratio(full_a, full_b);
  std::vector<double> ratios, deltas, dratios;
  ratios.reserve((size_t)opt.n_boot);
  if (delta) deltas.reserve((size_t)opt.n_boot);
  Rng rng(opt.seed);
  for (int64_t k = 0; k < opt.n_boot; ++k) {
    Sums sa, sb;
    for (size_t j = 0; j < n; ++j) {
      const size_t i = std::min(n - 1, (size_t)(rng.uniform() * (double)n));
      sa.add(a[i]);
      sb.add(b[i]);
    }
    if (auto r = speed_ratio(sa, sb)) ratios.push_back(*r);
    if (dratio)
      if (auto r = decode_speed_ratio(sa, sb)) dratios.push_back(*r);
    if (delta)
      if (auto d = accept_delta_pts(sa, sb)) deltas.push_back(*d);
  }
  out.speed_ratio = make_interval(*ratio, ratios, opt.level);
  if (dratio) out.decode_speed_ratio = make_interval(*dratio, dratios, opt.level);
  if (delta) out.accept_delta_pts = make_interval(*delta, deltas, opt.level);
  return out;
}

Verdict decide(const PairedStats& s, bool compare_acceptance, const VerdictRule& rule) {
  Verdict v;
  const bool speed_ok = s.speed_ratio.n_valid > 0 && s.speed_ratio.lo > rule.min_speed_ratio;
  const std::string speed_text = "speed ratio CI lower bound " + fmt("%.3f", s.speed_ratio.lo) +
                                 (speed_ok ? " > " : " <= ") + fmt("%g", rule.min_speed_ratio);
  if (!compare_acceptance) {
    v.pass = speed_ok;
    v.reason = speed_text + "; acceptance not compared (a serial arm: speed rule only)";
    return v;
  }
  v.acceptance_checked = true;
  if (!s.accept_delta_pts || s.accept_delta_pts->n_valid == 0) {
    v.pass = false;
    v.reason = "acceptance change undefined (an arm drafted no tokens); " + speed_text;
    return v;
  }
  const bool accept_ok = s.accept_delta_pts->lo >= rule.min_accept_delta_pts;
  v.pass = accept_ok && speed_ok;
  v.reason = "acceptance change CI lower bound " + fmt("%+.2f", s.accept_delta_pts->lo) +
             (accept_ok ? " >= " : " < ") + fmt("%+g", rule.min_accept_delta_pts) + " points; " + speed_text;
  return v;
}

}  // namespace dspark::eval
