#include "serve/batch_gate.h"

#include <algorithm>

namespace dspark::serve {

BatchGate::BatchGate(const BatchGateConfig& cfg, int max_slots)
    : cfg_(cfg), sizes_((size_t)std::max(max_slots, 1) + 1) {
  cfg_.trial_rounds = std::max(cfg_.trial_rounds, 1);
  cfg_.min_interval = std::max(cfg_.min_interval, 1);
  cfg_.max_interval = std::max(cfg_.max_interval, cfg_.min_interval);
  cfg_.max_interval_far = std::max(cfg_.max_interval_far, cfg_.max_interval);
}

void BatchGate::next_run(Size& s) {
  // Both modes measured first (drafting, then plain), then exploit / trial in turn.
  if (s.arm[1].n == 0 || s.arm[0].n == 0) {
    s.current = s.arm[1].n == 0;
    s.trial = true;
    s.left = cfg_.trial_rounds;
    return;
  }
  if (!s.trial) {  // an exploit run ended: try the other mode
    s.current = !s.chosen;
    s.trial = true;
    s.left = cfg_.trial_rounds;
    return;
  }
  const double plain = s.arm[0].rate(), draft = s.arm[1].rate();
  const bool want = s.decided && s.chosen ? !(plain > draft * (1.0 + cfg_.leave_margin))
                                          : draft > plain * (1.0 + cfg_.enter_margin);
  if (!s.decided || want != s.chosen) {
    s.switches += s.decided ? 1 : 0;
    s.interval = cfg_.min_interval;
  } else {
    const double best = std::max(plain, draft), other = std::min(plain, draft);
    const bool far = other < best * (1.0 - cfg_.far_margin);
    s.interval = std::min(2 * s.interval, far ? cfg_.max_interval_far : cfg_.max_interval);
  }
  s.decided = true;
  s.chosen = want;
  s.current = want;
  s.trial = false;
  s.left = s.interval;
}

bool BatchGate::drafting(int n) {
  if (!cfg_.enabled) return true;
  if (n < 1 || n >= (int)sizes_.size()) return true;
  Size& s = sizes_[(size_t)n];
  if (s.left <= 0) next_run(s);
  --s.left;
  return s.current;
}

void BatchGate::observe(int n, int64_t tokens, double ms) {
  if (!cfg_.enabled || n < 1 || n >= (int)sizes_.size() || !(ms > 0)) return;
  Size& s = sizes_[(size_t)n];
  Arm& a = s.arm[s.current ? 1 : 0];
  const double w = std::max(cfg_.alpha, 1.0 / (double)(a.n + 1));
  a.tokens += w * ((double)tokens - a.tokens);
  a.ms += w * (ms - a.ms);
  ++a.n;
}

nlohmann::json BatchGate::stats() const {
  nlohmann::json by = nlohmann::json::array();
  for (size_t n = 1; n < sizes_.size(); ++n) {
    const Size& s = sizes_[n];
    if (s.arm[0].n + s.arm[1].n == 0) continue;
    by.push_back({{"slots", n},
                  {"mode", s.current ? "drafting" : "plain"},
                  {"drafting_tokens_per_ms", s.arm[1].rate()},
                  {"plain_tokens_per_ms", s.arm[0].rate()},
                  {"drafting_rounds", s.arm[1].n},
                  {"plain_rounds", s.arm[0].n},
                  {"switches", s.switches}});
  }
  return {{"enabled", cfg_.enabled}, {"by_slots", by}};
}

}  // namespace dspark::serve
