// `dspark ab`: the acceptance A/B harness. The target is loaded once; every arm (serial, or a
// drafter config) runs every prompt, the arm order rotating per prompt and repeat (AB, BA, AB,
// ... for two arms) so drift in machine load hits all arms alike; then ab_report compares each
// arm with arm 0 (paired bootstrap over prompts) and applies the verdict rule.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/threadpool.h"

#include "eval/ab_report.h"
#include "runtime/loaded_model.h"
#include "eval/prompts.h"
#include "runtime/drafter_mount.h"
#include "runtime/registry.h"

namespace dspark::eval {

struct AbOptions {
  std::vector<ArmSpec> arms;            // arm 0 = baseline A
  std::string prompts = runtime::default_prompt_file();  // data/spec_bench_dev.jsonl (Spec-Bench dev)
  int64_t n_prompts = 0;                // 0 = every prompt in the file
  bool json = false;                    // stdout: one JSON object instead of markdown
  std::string markdown_path;            // also write the markdown here
  std::string plot_path;                // PNG of acceptance by position (scripts/plot_ab.py)
  std::string python = "python3";       // looked up in PATH
  std::string plot_script;              // path of plot_ab.py
  AbSettings settings;
  // The cost-aware arms' verify-cost table, ms of one target forward over 1, 2, ... tokens (entry
  // n - 1 = n tokens). Empty: measured once at start-up (runtime::measure_verify_ms). A given table
  // makes the schedule draft alike in every run that gives it, so two binaries or two sessions
  // compare on the engine and the drafter instead of on the start-up table's noise.
  std::vector<double> verify_table_ms;
};

// What a run reports while it works (each optional).
struct AbEvents {
  std::function<void(const std::string& line)> note;      // the shared verify table, quantization notes, mismatches
  std::function<void(uint64_t done, uint64_t total)> progress;  // runs (prompt x repeat x arm)
};

// Everything checked and loaded before the first timed run: prompts, drafters, the verify table.
struct AbPlan {
  AbOptions opt;
  const runtime::LoadedModel* lm = nullptr;
  AbReport report;                               // settings, prompts and arms filled in; records empty
  std::vector<std::vector<int32_t>> ids;         // [n_prompts][prompt_tokens] that fit the context
  std::unique_ptr<ThreadPool> pool;              // before the mounts: they run on it
  std::vector<std::unique_ptr<runtime::MountedDrafter>> mounts;  // [n_arms], null for serial arms
  std::vector<std::shared_ptr<const speculative::SuffixIndex>> indexes;  // held open until the arms are built
};

// Checks the prompts and every arm, measures (or takes) the shared verify table and mounts one
// drafter per arm. An error here is bad input.
Result<std::unique_ptr<AbPlan>> plan_ab(const AbOptions& opt, const runtime::LoadedModel& lm, const AbEvents& events);

// Runs every prompt under every arm and compares the arms (report.pass(): the verdict). An error
// here is a failed generation.
Result<AbReport> run_ab(AbPlan& plan, const AbEvents& events);

// --plot: writes the report's JSON to a temporary file and runs the plotting script on it. Returns
// what happened, as one line ("plot written to ...", or why there is no plot: a warning).
std::string plot_ab(const AbOptions& opt, const nlohmann::json& report_json);

}  // namespace dspark::eval
