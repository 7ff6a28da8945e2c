// Builds the drafter a command asked for: --draft-kind ngram | draft-model | dspark | auto.
// `auto` detects the kind from the path (DSPARK.md §5): a directory whose config.json names
// architectures[0] == "Gemma4DSparkModel" is a DeepSpec DSpark drafter; a GGUF file is a
// two-model drafter (its vocabulary must equal the target's).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/gemma3.h"
#include "sample/sampler.h"
#include "spec/drafter.h"
#include "tools/loaded_model.h"

namespace dspark::tools {

struct DrafterOptions {
  std::string kind = "auto";   // auto | ngram | draft-model | dspark
  std::string path;            // drafter GGUF or checkpoint directory (not for ngram)
  int gamma = 5;               // --num-draft-tokens
  double threshold = 0.0;      // --draft-threshold (dspark confidence), in [0, 1]
  int64_t n_ctx = 4096;
  bool schedule = false;           // dspark: cost-aware draft length (needs verify_ms)
  std::vector<double> verify_ms;   // [γ + 2] target forward time over n tokens (measure_verify_ms)
  std::string copy = "auto";       // dspark copy head: auto (as the drafter's config says) | on | off
};

// Times one target forward over n = 1 .. n_max new tokens (all-position logits, as verify runs)
// after a 128-token context: the median of 3 (after one warm-up) at every n, then the
// non-decreasing least-squares fit. Index 0 is unused. About 0.1 s per n for the 270M target.
std::vector<double> measure_verify_ms(const model::Gemma3Model& model, int n_max, ThreadPool* pool);

// Owns the drafter and whatever it needs to live (a draft model, its tokenizer).
struct DrafterBundle {
  std::string kind;
  int gamma = 0;                  // effective gamma (clamped to the drafter's block size)
  std::unique_ptr<LoadedModel> draft_model;
  std::unique_ptr<spec::Drafter> drafter;
};

// --draft-copy: auto, on, off or only (copy head alone).
Status check_draft_copy_mode(const std::string& mode);

// Detects "dspark" / "draft-model" from a path; error if neither.
Result<std::string> detect_draft_kind(const std::string& path);

// Fresh drafter state for one request (cheap to call per request; weights are shared via bundle).
// Sampling settings come with each draft request (spec::DraftRequest::sampler), not from here.
Result<DrafterBundle> make_drafter(const DrafterOptions& opt, const LoadedModel& target, ThreadPool* pool);

}  // namespace dspark::tools
