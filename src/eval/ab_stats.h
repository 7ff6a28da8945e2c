// Statistics of the acceptance A/B harness (`dspark ab`), kept apart from the model so they can
// be tested on hand-built data: per-arm pooled summaries, a paired bootstrap over prompts, and
// the verdict rule.
//
// The prompt is the pairing unit: every arm runs every prompt, and the bootstrap resamples prompt
// indices with replacement (the same indices for both arms), recomputing the pooled statistics
// each time; the confidence interval is the percentile interval of those resamples.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::eval {

// One prompt under one arm, summed over repeats.
struct PromptRecord {
  int64_t tokens = 0;     // new tokens generated
  double ms = 0;          // wall time of the generate calls (prefill + decode), milliseconds
  double prefill_ms = 0;  // of which prefill (the prompt; a speculative arm's includes its drafter's context pass)
  int64_t drafted = 0;    // draft tokens proposed (serial: 0)
  int64_t accepted = 0;   // draft tokens accepted
  int64_t rounds = 0;     // target forwards after the prefill (serial: one per token)
  std::vector<int64_t> drafted_by_pos;   // [gamma] rounds that drafted position i
  std::vector<int64_t> accepted_by_pos;  // [gamma] rounds that accepted positions 0..i
};

// An arm pooled over prompts: ratios of sums, never means of per-prompt ratios.
struct ArmSummary {
  int64_t n_prompts = 0, tokens = 0, drafted = 0, accepted = 0, rounds = 0;
  double ms = 0, prefill_ms = 0;
  std::vector<int64_t> drafted_by_pos, accepted_by_pos;  // [gamma]

  double tok_s() const { return ms > 0 ? (double)tokens * 1e3 / ms : 0; }
  // New tokens per second of the time after the prefill: what the drafter and verify loop change.
  double decode_tok_s() const { return ms > prefill_ms ? (double)tokens * 1e3 / (ms - prefill_ms) : 0; }
  double tau() const { return rounds ? (double)tokens / (double)rounds : 0; }  // tokens per target round
  // accepted / drafted; nullopt when nothing was drafted (serial, or a drafter that never proposed).
  std::optional<double> acceptance() const {
    return drafted ? std::optional<double>((double)accepted / (double)drafted) : std::nullopt;
  }
  // [gamma] accepted_by_pos[i] / drafted_by_pos[i]: the chance that positions 0..i were all
  // accepted given position i was drafted; nullopt where position i was never drafted.
  std::vector<std::optional<double>> acceptance_by_pos() const;
};

ArmSummary summarize(std::span<const PromptRecord> prompts);

// A point estimate (full data) and a percentile confidence interval from the resamples in which
// the statistic is defined (n_valid of them).
struct Interval {
  double point = 0, lo = 0, hi = 0;
  int64_t n_valid = 0;
};

struct PairedStats {
  int64_t n_prompts = 0;
  // B - A pooled acceptance in percentage points; absent unless both arms are speculative and
  // both drafted something.
  std::optional<Interval> accept_delta_pts;
  Interval speed_ratio;  // (tokens_B / ms_B) / (tokens_A / ms_A), aggregate speeds
  // The same over the time after each prompt's prefill (prefill is the same work in every arm and
  // dilutes speed_ratio toward 1 on long prompts); absent when a record has no prefill time.
  std::optional<Interval> decode_speed_ratio;
};

struct BootstrapOptions {
  int64_t n_boot = 2000;   // resamples
  double level = 0.95;     // two-sided confidence level, in (0, 1)
  uint64_t seed = 0;       // the resampling RNG (results are reproducible for a seed)
};

// a[i] and b[i] are prompt i under arms A and B. compare_acceptance: both arms are speculative.
// Errors: different lengths, no prompts, a bad option, an arm with no measured time.
Result<PairedStats> paired_bootstrap(std::span<const PromptRecord> a, std::span<const PromptRecord> b,
                                     bool compare_acceptance, const BootstrapOptions& opt);

struct VerdictRule {
  double min_accept_delta_pts = -3.0;  // pass needs the acceptance-change CI lower bound >= this
  double min_speed_ratio = 1.0;        // pass needs the speed-ratio CI lower bound > this
};

struct Verdict {
  bool pass = false;
  bool acceptance_checked = false;  // false: speed rule only (an arm is serial)
  std::string reason;               // one line, names the bounds compared
};

// compare_acceptance as for paired_bootstrap; when it is true but the delta is absent (an arm
// drafted nothing) the verdict fails: the acceptance rule cannot be shown to hold.
Verdict decide(const PairedStats& s, bool compare_acceptance, const VerdictRule& rule);

// Linear-interpolation percentile of sorted data, q in [0, 1]; 0 for empty data.
double percentile_sorted(std::span<const double> sorted, double q);

}  // namespace dspark::eval
