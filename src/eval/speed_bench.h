// The speed of a target, llama-bench style (the workflow behind `dspark bench` without --spec):
// prefill (pp) over synthetic tokens and decode (tg) after a short prompt, medians of repeats; with
// curve, the verify-cost curve (one forward over 1..K new tokens after a fixed context, all-position
// logits as speculative verify needs), which decides whether speculative decoding can pay; with a
// sampler at T > 0, sampled decode beside greedy and the time of one sampled row; with profile, the
// per-op time of decode and of the curve's windows of 1 and K tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "generate/lm_head.h"
#include "kernels/profiling_backend.h"
#include "runtime/loaded_model.h"
#include "sample/sampler.h"

namespace dspark::eval {

// The session's forward chunk, and the kernel plan's last bucket.
inline constexpr int64_t kSpeedBenchMaxBatch = 512;

struct SpeedBenchOptions {
  int64_t n_prompt = 512;  // prefill tokens (0 = skip)
  int64_t n_gen = 128;     // decode tokens (0 = skip)
  int64_t repeats = 5;
  bool curve = false;      // the verify-cost curve
  int64_t curve_ctx = 512, curve_max = 16;
  LmHead lm_head = LmHead::kArgmax;
  sample::SamplerConfig sampler;  // T > 0: sampled decode too
  int threads = 2;
};

// What a run reports while it works: phase ("bench" repeats, "verify curve" windows), done of total.
using SpeedBenchProgress = std::function<void(const std::string& phase, uint64_t done, uint64_t total)>;

// Runs the measurements on lm's model. prof: the ProfilingBackend the model runs on (per-op times),
// or nullptr. Returns one JSON object (`dspark bench --json` prints it).
Result<nlohmann::json> run_speed_bench(const SpeedBenchOptions& opt, const runtime::LoadedModel& lm,
                                       const kernels::ProfilingBackend* prof, const SpeedBenchProgress& progress);

// The run as markdown tables (what `dspark bench` prints without --json).
std::string format_speed_bench(const nlohmann::json& j);

}  // namespace dspark::eval
