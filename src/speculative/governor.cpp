#include "speculative/governor.h"

#include <algorithm>

namespace dspark::speculative {

const char* governor_reason_name(GovernorReason r) {
  switch (r) {
    case GovernorReason::kOff: return "off";
    case GovernorReason::kLimit: return "limit";
    case GovernorReason::kWarmup: return "warmup";
    case GovernorReason::kDraft: return "draft";
    case GovernorReason::kPlain: return "plain";
    case GovernorReason::kProbeDraft: return "probe_draft";
    case GovernorReason::kProbePlain: return "probe_plain";
    case GovernorReason::kBatchPlain: return "batch_plain";
    case GovernorReason::kSure: return "sure";
    case GovernorReason::kClassDraft: return "class_draft";
    case GovernorReason::kClassPlain: return "class_plain";
    case GovernorReason::kCount: break;
  }
  return "unknown";
}

nlohmann::json GovernorStats::to_json() const {
  nlohmann::json by = nlohmann::json::object();
  for (size_t i = 0; i < rounds.size(); ++i) by[governor_reason_name((GovernorReason)i)] = rounds[i];
  return {{"plain_rounds", plain_rounds}, {"drafting_rounds", drafting_rounds}, {"rounds_by_reason", by}};
}

void Governor::Ema::add(double x, double alpha) {
  const double a = std::max(alpha, 1.0 / (double)(n + 1));  // a running mean until 1/alpha samples
  v += a * (x - v);
  ++n;
}

Governor::Governor(const GovernorConfig& cfg, int gamma) : cfg_(cfg), gamma_(std::max(gamma, 0)) {
  if (cfg_.verify_ms.size() < 2) cfg_.deterministic = false;  // constants need a table
  v_.resize((size_t)gamma_ + 2);
  acc_.resize((size_t)gamma_ + 1);
  len_.resize((size_t)gamma_ + 1);
}

void Governor::begin_request(const GovernorConfig& cfg, int gamma) {
  GovernorConfig c = cfg;
  if (c.verify_ms.size() < 2) c.deterministic = false;
  const bool same = gamma == gamma_ && c.enabled == cfg_.enabled && c.deterministic == cfg_.deterministic &&
                    c.verify_ms == cfg_.verify_ms && c.draft_ms == cfg_.draft_ms;
  if (!same || cfg_.deterministic) {  // deciding from constants: every request from the same start
    *this = Governor(cfg, gamma);
    return;
  }
  stats_ = GovernorStats{};
  plain_run_ = 0;
  since_full_ = 0;
  probe_from_plain_ = false;
}

double Governor::table_cost(int n) const {
  const std::vector<double>& t = cfg_.verify_ms;
  if (t.size() < 2 || n < 1) return 0;
  const int last = (int)t.size() - 1;
  if (n <= last) return t[(size_t)n];
  const double slope = last >= 2 ? std::max(0.0, t[(size_t)last] - t[(size_t)last - 1]) : 0.0;
  return t[(size_t)last] + slope * (n - last);
}

double Governor::verify_cost(int n) const {
  if (cfg_.deterministic) return table_cost(n);
  if (n >= 1 && n < (int)v_.size() && v_[(size_t)n].n > 0) return v_[(size_t)n].v;
  if (const double t = table_cost(n); t > 0) return t * (scale_.n > 0 ? scale_.v : 1.0);
  // No table: linear between the nearest window sizes measured below and above, else the nearest.
  int lo = 0, hi = 0;
  for (int k = std::min(n, (int)v_.size()) - 1; k >= 1 && !lo; --k)
    if (v_[(size_t)k].n > 0) lo = k;
  for (int k = n + 1; k < (int)v_.size() && !hi; ++k)
    if (v_[(size_t)k].n > 0) hi = k;
  if (lo && hi) return v_[(size_t)lo].v + (v_[(size_t)hi].v - v_[(size_t)lo].v) * (n - lo) / (double)(hi - lo);
  if (hi) return v_[(size_t)hi].v;
  if (lo) return v_[(size_t)lo].v;
  return 0;
}

double Governor::plain_cost() const {
  if (cfg_.deterministic) return table_cost(1);
  if (plain_.n > 0) return plain_.v;
  const double v1 = verify_cost(1);
  return v1 > 0 ? v1 + rest_.v : 0;
}

double Governor::plain_rate() const {
  const double c = plain_cost();
  return c > 0 ? 1.0 / c : 0;
}

double Governor::draft_rate(int L) const {
  if (L < 1 || L > gamma_ || drafting_obs_ == 0) return 0;
  // Slot i's estimate: its own average, drawn towards slot i-1's while it has few samples (a slot
  // rarely reached is neither written off nor trusted on one round).
  auto shrunk = [](const Ema& e, double prior) {
    constexpr int kPriorWeight = 2;
    return e.n >= kPriorWeight ? e.v : (e.v * (double)e.n + prior * (kPriorWeight - e.n)) / kPriorWeight;
  };
  double a_prev = 1.0, b_prev = 1.0;   // priors of slot 1: none (its own data decides)
  double p_acc = 1.0, p_len = 1.0;     // P(slots 1..i drafted and accepted), P(d >= i)
  double tokens = 1.0, window = 0.0;   // E[tokens], E[V(1 + min(d, L))]
  for (int i = 1; i <= L; ++i) {
    const double a = i == 1 && acc_[1].n > 0 ? acc_[1].v : shrunk(acc_[(size_t)i], a_prev);
    const double b = i == 1 && len_[1].n > 0 ? len_[1].v : shrunk(len_[(size_t)i], b_prev);
    p_acc *= a;
    tokens += p_acc;
    window += p_len * (1.0 - b) * verify_cost(i);  // d == i - 1
    p_len *= b;
    a_prev = a;
    b_prev = b;
  }
  window += p_len * verify_cost(L + 1);  // d >= L: the window holds L drafts
  const double cost = (cfg_.deterministic ? cfg_.draft_ms : draft_.v) + window + (cfg_.deterministic ? 0.0 : rest_.v);
  return cost > 0 ? tokens / cost : 0;
}

void Governor::use_classes(const std::vector<double>& priors) {
  if (priors == priors_) return;
  priors_ = priors;
  cls_acc_.assign(priors_.size(), std::vector<Counts>((size_t)gamma_ + 1));
}

double Governor::class_rate(int cls, int L) const {
  if (cls < 0 || cls >= (int)priors_.size() || L < 1 || L > gamma_) return 0;
  const std::vector<Counts>& c = cls_acc_[(size_t)cls];
  const double p = priors_[(size_t)cls];
  double p_acc = 1.0, tokens = 1.0;
  for (int i = 1; i <= L; ++i) {
    p_acc *= (c[(size_t)i].s + kClassPriorWeight * p) / (c[(size_t)i].n + kClassPriorWeight);
    tokens += p_acc;
  }
  const double cost = verify_cost(L + 1) + (cfg_.deterministic ? 0.0 : rest_.v);
  return cost > 0 ? tokens / cost : 0;
}

Governor::Decision Governor::cut(const Decision& decided, int cls, int drafted) {
  if (!by_class() || cls < 0 || cls >= (int)priors_.size() ||
      (decided.reason != GovernorReason::kDraft && decided.reason != GovernorReason::kPlain))
    return decided;
  int b = 0;
  double r = plain_rate();
  for (int L = 1; L <= std::min(drafted, gamma_); ++L)
    if (const double x = class_rate(cls, L); x > r) {
      r = x;
      b = L;
    }
  return recount(decided, {b, b > 0 ? GovernorReason::kClassDraft : GovernorReason::kClassPlain});
}

Governor::Decision Governor::recount(const Decision& from, const Decision& to) {
  --stats_.rounds[(size_t)from.reason];
  --(from.gamma > 0 ? stats_.drafting_rounds : stats_.plain_rounds);
  ++stats_.rounds[(size_t)to.reason];
  ++(to.gamma > 0 ? stats_.drafting_rounds : stats_.plain_rounds);
  return to;
}

int Governor::best(int max_n) const {
  int b = 0;
  // Hysteresis against noisy estimates (a server slot's share of a batched forward moves with
  // the other slots' windows): leaving drafting takes plain to lead by switch_margin, returning to
  // it takes drafting to lead by enter_margin.
  double r = plain_rate() * (drafting_mode_ ? 1.0 - cfg_.switch_margin : 1.0 + cfg_.enter_margin);
  for (int L = 1; L <= std::min(max_n, gamma_); ++L)
    if (const double x = draft_rate(L); x > r) {
      r = x;
      b = L;
    }
  // Among gammas nearly as good as the best, the longest: the drafter decides its own length within
  // the gamma, and the estimates of the longer slots are the noisier ones.
  if (b > 0)
    for (int L = std::min(max_n, gamma_); L > b; --L)
      if (draft_rate(L) >= r * (1.0 - cfg_.gamma_margin)) return L;
  return b;
}

Governor::Decision Governor::decide(int max_n) {
  ++round_;
  probe_from_plain_ = false;
  max_n = std::min(max_n, gamma_);
  Decision d;
  if (max_n <= 0) {
    d = {0, GovernorReason::kLimit};
  } else if (!cfg_.enabled) {
    d = {max_n, GovernorReason::kOff};
  } else if (drafting_obs_ < cfg_.warmup_rounds) {
    d = {max_n, GovernorReason::kWarmup};
  } else {
    const int b = best(max_n);
    // c0 is refreshed by a plain round when it has no estimate at all, or when it is old and close
    // enough to the best draft rate to matter (a plain round costs a drafter that wins big a lot).
    const bool plain_stale =
        !cfg_.deterministic &&
        (plain_cost() <= 0 || (plain_.n == 0 && cfg_.verify_ms.size() < 2) ||
         (round_ - last_plain_obs_ > cfg_.plain_refresh_rounds &&
          draft_rate(b) < plain_rate() * (1.0 + cfg_.plain_refresh_band)));
    if (b > 0 && plain_stale) {
      d = {0, GovernorReason::kProbePlain};
    } else if (b == 0) {
      if (++plain_run_ > backoff_) {
        plain_run_ = 0;
        const bool far = draft_rate(max_n) < plain_rate() * (1.0 - cfg_.far_margin);
        backoff_ = std::min(2 * backoff_, far ? cfg_.max_backoff_far : cfg_.max_backoff);
        since_full_ = 0;
        d = {std::min(max_n, probe_len_), GovernorReason::kProbeDraft};
        probe_from_plain_ = true;
      } else {
        d = {0, GovernorReason::kPlain};
      }
      drafting_mode_ = false;
    } else {
      drafting_mode_ = true;
      plain_run_ = 0;
      backoff_ = 1;
      if (b < max_n && ++since_full_ >= cfg_.refresh_rounds) {
        since_full_ = 0;
        d = {max_n, GovernorReason::kProbeDraft};
      } else {
        d = {b, GovernorReason::kDraft};
      }
    }
  }
  ++stats_.rounds[(size_t)d.reason];
  ++(d.gamma > 0 ? stats_.drafting_rounds : stats_.plain_rounds);
  return d;
}

Governor::Decision Governor::hold(GovernorReason why) {
  ++round_;
  probe_from_plain_ = false;
  const Decision d{0, why};
  ++stats_.rounds[(size_t)d.reason];
  ++stats_.plain_rounds;
  return d;
}

Governor::Decision Governor::sure(const Decision& decided, int gamma) {
  if (gamma <= decided.gamma) return decided;
  return recount(decided, {gamma, GovernorReason::kSure});
}

void Governor::observe(const RoundObservation& o) {
  if (!cfg_.enabled) return;
  const int d = std::clamp(o.drafted, 0, gamma_), acc = std::clamp(o.accepted, 0, d);
  const double a = cfg_.alpha;
  // The forward's cost goes to its own window size: a token tree's rows beyond the chain are not the
  // chain's (a tree wider than the table updates nothing but the scale).
  const int w = std::max(o.window, d + 1);
  if (w < (int)v_.size()) v_[(size_t)w].add(o.verify_ms, a);
  if (const double t = table_cost(w); t > 0) scale_.add(o.verify_ms / t, a);
  if (o.gamma == 0 || d == 0) {  // the cost of verifying the pending token alone
    plain_.add(o.verify_ms + o.rest_ms, a);
    last_plain_obs_ = round_;
  }
  if (o.gamma == 0) return;
  // A probe from plain decoding that beat plain decoding: probe again soon (the text may have
  // turned), instead of after the backed-off interval.
  // Probes from plain decoding start at one token and double while every drafted token is taken.
  const double plain_rate_before = plain_rate();
  const double round_cost = cfg_.deterministic ? cfg_.draft_ms + table_cost(d + 1) : o.draft_ms + o.verify_ms + o.rest_ms;
  if (probe_from_plain_) {
    if (round_cost > 0 && (acc + 1) / round_cost > plain_rate_before) backoff_ = 1;
    probe_len_ = d > 0 && acc == d ? std::min(2 * probe_len_, gamma_) : 1;
  }
  ++drafting_obs_;
  rest_.add(o.rest_ms, a);
  draft_.add(o.draft_ms, a);
  const double aa = cfg_.alpha_accept;
  // Per slot i <= gamma: was it drafted, given slot i-1 was; was it drafted and accepted, given
  // slots 1..i-1 were (what a round cut to any gamma L would have given: exact at T 0).
  for (int i = 1; i <= std::min(o.gamma, gamma_); ++i) {
    if (d >= i - 1) len_[(size_t)i].add(d >= i ? 1.0 : 0.0, aa);
    if (acc >= i - 1) acc_[(size_t)i].add(acc >= i ? 1.0 : 0.0, aa);
  }
  // By class: slot i of this class's drafts, where it was drafted and slots < i were accepted.
  if (o.cls >= 0 && o.cls < (int)cls_acc_.size())
    for (int i = 1; i <= std::min(d, acc + 1); ++i) {
      Counts& c = cls_acc_[(size_t)o.cls][(size_t)i];
      c.n = c.n * kClassDecay + 1.0;
      c.s = c.s * kClassDecay + (acc >= i ? 1.0 : 0.0);
    }
}

nlohmann::json Governor::estimates() const {
  nlohmann::json v = nlohmann::json::array(), r = nlohmann::json::array();
  for (int n = 1; n <= gamma_ + 1; ++n) v.push_back(verify_cost(n));
  for (int L = 1; L <= gamma_; ++L) r.push_back(draft_rate(L));
  return {{"plain_ms", plain_cost()}, {"verify_ms", v}, {"plain_tokens_per_ms", plain_rate()},
          {"draft_tokens_per_ms_by_cap", r}, {"deterministic", cfg_.deterministic}};
}

}  // namespace dspark::speculative
