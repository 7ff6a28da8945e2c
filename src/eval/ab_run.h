// `dspark ab`: the acceptance A/B harness. The target is loaded once; every arm (serial, or a
// drafter config) runs every prompt, the arm order rotating per prompt and repeat (AB, BA, AB,
// ... for two arms) so drift in machine load hits all arms alike; then ab_report compares each
// arm with arm 0 (paired bootstrap over prompts) and applies the verdict rule.
#pragma once

#include <string>
#include <vector>

#include "eval/ab_report.h"
#include "runtime/loaded_model.h"
#include "eval/prompts.h"
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

// Exit code: 0 every comparison passes, 1 one fails (or generation failed), 2 bad input.
int run_ab(const AbOptions& opt, const runtime::LoadedModel& lm);

}  // namespace dspark::eval
