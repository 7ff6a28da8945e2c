// The regen workflow behind `dspark regen`: a folder of training shards made resumably. The target
// answers the training prompts (regenerate) or known sequences are replayed (replay_sequences);
// finished shards are verified on restart, shards another ids file covers are left out, and a
// manifest records the settings, counts and command. docs/TRAINING.md describes the folder.
//
// Two steps, so that a caller can tell bad input from a failed run: plan_regen checks every input
// (prompts, overlap with the evaluation prompts, taps, ids files, the folder's manifest) and decides
// what is left to do; run_regen does it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/prompts.h"
#include "train/regen.h"

namespace dspark::train {

struct RegenRunOptions {
  std::string prompts_path;  // training prompts JSONL
  std::string eval_path;     // evaluation prompts that must not overlap ("" = not checked)
  std::string out_dir;
  std::vector<int> taps;     // target layers to record (model::kTapEmbedding allowed)
  int64_t top_k = 32, max_new = 256, batch = 32, seed = 1;
  int64_t max_prompt = 768;  // prompts longer than this (tokens) are skipped
  int64_t n_prompts = 0;     // only the first N prompts (0 = all)
  int64_t shard_size = 64;   // prompts per shard
  int64_t max_shards = 0;    // work only on the first N shards (0 = all)
  double sampled_share = 0.25, temp = 0.7;
  std::string from_ids;      // rebuild shards from this ids file instead of decoding ("" = decode)
  std::string skip_ids;      // leave out the shards this ids file covers ("" = none)
  bool prompt_text = false;  // distillation on the prompts themselves (no responses)
  std::string command;       // recorded in the manifest
  int threads = 1;
};

// What a run reports while it works (each optional).
struct RegenEvents {
  std::function<void(const std::string& line)> note;  // a shard redone, shards left out, ...
  // phase "verify" (shards) or "regen" (sequences); rate: e.g. "812 new tok/s" ("" while unknown)
  std::function<void(const std::string& phase, uint64_t done, uint64_t total, const std::string& rate)> progress;
};

struct RegenSummary {
  int64_t sequences = 0, new_tokens = 0, prompt_tokens = 0;  // of this run
  double seconds = 0, new_tokens_per_s = 0;
  int64_t shards_done = 0, shards_total = 0, shards_redone = 0;  // of the folder
  int64_t response_tokens_total = 0;
  RegenCounters counters;  // the decode's time split (zero for a replay)
};

struct RegenPlan;  // regen_run.cpp
struct RegenPlanDeleter {
  void operator()(RegenPlan* p) const;
};
using RegenPlanPtr = std::unique_ptr<RegenPlan, RegenPlanDeleter>;

// The training prompts, checked against the evaluation prompts, cut to n_prompts (before a target
// is loaded, so bad prompts fail fast).
Result<std::vector<PromptRecord>> read_training_prompts(const RegenRunOptions& opt, const RegenEvents& events);

// Checks every other input and plans the run; an error here is bad input (flags, files, prompts).
// model_file: the target's file name, a setting of the data (it is tied to its target).
Result<RegenPlanPtr> plan_regen(const RegenRunOptions& opt, const std::vector<PromptRecord>& prompts,
                                const model::Model& model, const tokenizer::Tokenizer& tok,
                                const tokenizer::ChatTemplate& chat, const std::string& model_file,
                                const RegenEvents& events);
// Runs the plan: shards are written as they complete, the manifest after each.
Result<RegenSummary> run_regen(RegenPlan& plan, const model::Model& model, const tokenizer::Tokenizer& tok,
                               const RegenEvents& events);

struct IdsExport {
  int64_t sequences = 0, tokens = 0, shards = 0;
};
// The token ids of every finished shard of a regen folder, written to `path` (regen_ids.h).
Result<IdsExport> export_regen_ids(const std::string& out_dir, const std::string& path);

}  // namespace dspark::train
