// The result of `dspark ab` as plain data, the comparisons of every arm with the baseline (arm 0),
// and its renderings: one JSON object (--json, input of scripts/plot_ab.py) and markdown tables.
// No model here: tests build reports by hand.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "eval/ab_arm.h"
#include "eval/ab_stats.h"
#include "speculative/governor.h"

namespace dspark::eval {

struct AbSettings {
  std::string model, prompts_file;
  int64_t max_tokens = 64, repeats = 1, threads = 1, n_ctx = 4096;
  sample::SamplerConfig sampler;  // seed: prompt i of a repeat uses seed + i (common to every arm)
  bool chat = true, stop_at_eos = true;
  BootstrapOptions bootstrap;
  VerdictRule rule;
};

struct AbArm {
  ArmSpec spec;
  std::string kind = "serial";  // resolved drafter kind
  int gamma = 0;                // effective draft length (0 for serial)
  nlohmann::json drafter_stats = nlohmann::json::object();  // the drafter's own counters over the whole run (Drafter::stats)
  speculative::GovernorStats governor = {};  // its rounds by the draft-length governor's reason, over the whole run
  int64_t tree_rounds = 0, tree_rows = 0, tree_branch_taken = 0;  // token trees (speculative::SpecStats), whole run
};

struct AbPrompt {
  std::string category;
  int64_t prompt_tokens = 0;
};

struct AbComparison {
  size_t arm = 0;                    // index into AbReport::arms, compared with arm 0
  bool compare_acceptance = false;   // both arms speculative
  PairedStats stats;
  Verdict verdict;
  std::optional<int64_t> identical;  // temperature 0: prompts whose outputs equal arm 0's
  // The same paired bootstrap within each prompt category, in by_category order.
  std::vector<std::pair<std::string, PairedStats>> per_category;
};

struct AbReport {
  AbSettings settings;
  std::vector<AbArm> arms;                          // [n_arms], arm 0 = baseline A
  std::vector<AbPrompt> prompts;                    // [n_prompts] that ran
  int64_t skipped = 0;                              // prompts too long for the context
  std::vector<std::vector<PromptRecord>> records;   // [n_arms][n_prompts]
  std::vector<std::vector<uint8_t>> identical;      // [n_arms][n_prompts] output == arm 0's (first repeat)
  std::vector<AbComparison> comparisons;            // [n_arms - 1]
  std::vector<double> verify_ms;                    // the cost-aware arms' verify table, ms for 1..n tokens (empty: none)
  bool verify_ms_given = false;                     // from --verify-table, else measured at start-up
  bool pass() const;                                // every comparison passes
};

// Fills report.comparisons from records (and identical, at temperature 0).
Status compare_arms(AbReport& report);

nlohmann::json to_json(const AbReport& report);
std::string to_markdown(const AbReport& report);

}  // namespace dspark::eval
