// The batch gate: whether the slots of a batched round may draft at all, decided from what the
// batch as a whole commits per millisecond.
//
// Each slot's governor weighs its own drafts against its own plain steps (with the charges of
// serve/batch_cost.h). What no slot sees is everything a round of the batch costs beyond the
// forward: every slot's drafter runs before the shared forward (the others wait), and drafting
// slots record, commit and snapshot more. So the scheduler also measures the batch end to end:
// per number of slots n in the round, the committed tokens per ms of whole batched rounds
// (drafting + forward + accept + commit) with the governors free to draft, against rounds in which
// every slot steps plainly. It runs the better mode and tries the other for `trial_rounds` rounds
// after 1, 2, 4, .. (up to max_interval / min_interval, or max_interval_far / min_interval while
// the other mode trails by far_margin) intervals of min_interval rounds, resetting the interval
// when a trial turns the choice. (A drafting trial is dear: a slot's first drafting round projects
// every row its drafter has not seen yet.) Drafting must lead by `enter_margin` to be chosen
// (from plain decoding) and plain must lead by `leave_margin` to stop it, so a tie stays where it is
// and the first choice is plain unless drafting wins clearly.
//
// One request alone is not batched (Scheduler::step): its governor decides by itself.
// Thread safety: none (the scheduler thread owns it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace dspark::serve {

struct BatchGateConfig {
  bool enabled = true;
  int trial_rounds = 8;      // rounds of the other mode per trial
  int min_interval = 16;     // rounds of the chosen mode between two trials, doubled ...
  int max_interval = 256;    // ... up to this while the trials confirm the choice, ...
  int max_interval_far = 1024;  // ... or this while the mode not chosen trails by far_margin
  double far_margin = 0.2;
  // Moving-average weight of a round (1/n while n < 1/alpha): ~30 rounds remembered, so one 8-round
  // trial in a fast stretch of the batch cannot turn the choice (0.15 drafted 24-86 % of SmolLM2's
  // 4-slot rounds on Zen 4 where plain ones were faster; docs/SPECULATION.md).
  double alpha = 0.03;
  double enter_margin = 0.03;  // plain -> drafting when drafting commits this much more per ms
  double leave_margin = 0.0;   // drafting -> plain when plain commits this much more per ms
};

class BatchGate {
 public:
  BatchGate(const BatchGateConfig& cfg, int max_slots);

  // Before a batched round of `n` slots: may its slots draft (their governors decide), or does
  // every slot step plainly?
  bool drafting(int n);
  // That round committed `tokens` in `ms` (drafting, forward, accept and commit).
  void observe(int n, int64_t tokens, double ms);

  // {"enabled", "by_slots": [{"slots", "mode", "drafting_tokens_per_ms", "plain_tokens_per_ms",
  //  "drafting_rounds", "plain_rounds", "switches"}]} for the sizes seen.
  nlohmann::json stats() const;

 private:
  struct Arm {
    double tokens = 0, ms = 0;  // moving averages per round
    int64_t n = 0;              // rounds observed
    double rate() const { return ms > 0 ? tokens / ms : 0; }
  };
  struct Size {
    Arm arm[2];                // [0] plain, [1] drafting
    bool chosen = false;       // the exploited mode (true: drafting)
    bool current = false;      // the mode of the rounds now running
    bool decided = false;      // a choice was made from both arms
    bool trial = true;         // the current run tries the mode not chosen
    int left = 0;              // rounds left in the current run
    int interval = 0;          // rounds of the next exploit run
    int64_t switches = 0;
  };
  void next_run(Size& s);

  BatchGateConfig cfg_;
  std::vector<Size> sizes_;  // [max_slots + 1]
};

}  // namespace dspark::serve
