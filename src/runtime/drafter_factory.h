// Builds the drafter a speculative::SpecConfig asks for, through the registry of drafter kinds
// (drafter_kinds(): ngram | suffix | draft-model | dspark; auto detects one from the path, or is
// suffix when only a suffix index is given).
// `auto` detects the kind from the path (docs/DSPARK-CHECKPOINT.md §1): a directory whose config.json names
// architectures[0] == "Gemma4DSparkModel" is a DeepSpec DSpark drafter; a GGUF file is a
// two-model drafter (its vocabulary must equal the target's).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/drafter.h"
#include "speculative/governor.h"
#include "speculative/spec_config.h"
#include "speculative/suffix_index.h"
#include "runtime/loaded_model.h"

namespace dspark::runtime {

// What a drafter needs besides its SpecConfig: the context it must hold and, for the cost-aware
// schedule, the target's verify-cost table.
struct DrafterRuntime {
  int64_t n_ctx = 4096;
  std::vector<double> verify_ms;   // [γ + 2] target forward time over n tokens (measure_verify_ms); index 0 unused
};

// Times one target forward over n = 1 .. n_max new tokens (all-position logits, as verify runs)
// after a 128-token context: the median of 3 (after one warm-up) at every n, then the
// non-decreasing least-squares fit. Index 0 is unused. About 0.1 s per n for the 270M target.
std::vector<double> measure_verify_ms(const model::Model& model, int n_max, ThreadPool* pool);

// Owns the drafter and whatever it needs to live (a draft model, its tokenizer).
struct DrafterBundle {
  std::string kind;
  int gamma = 0;                  // effective gamma (clamped to the drafter's block size)
  std::unique_ptr<LoadedModel> draft_model;
  std::unique_ptr<speculative::Drafter> drafter;
  speculative::GovernorConfig governor = {};  // what SpecParams::governor should be for this drafter
};

// The suffix index of draft-kind suffix for this target, checked against its tokenizer and mapped
// once per process (shared by every request's drafter; the fingerprint, a hash of the vocabulary,
// costs a few ms per call). Errors name the file.
Result<std::shared_ptr<const speculative::SuffixIndex>> open_suffix_index(const std::string& path, const LoadedModel& target);

// Detects "dspark" / "draft-model" from a path; error if neither.
Result<std::string> detect_draft_kind(const std::string& path);

// The drafter registry: a new kind is its open function (one file) plus one row here.
struct DrafterKind {
  const char* name;
  const char* help;
  bool needs_model;  // draft-model=PATH required
  Result<DrafterBundle> (*open)(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                ThreadPool* pool);
};
std::span<const DrafterKind> drafter_kinds();
// auto or a registered kind; the error lists them.
Status check_drafter_kind(const std::string& kind);

// Fresh drafter state for one request (cheap to call per request; weights are shared via bundle).
// `c.kind` auto is detected from `c.model`. Sampling settings come with each draft request
// (speculative::DraftRequest::sampler), not from here.
Result<DrafterBundle> make_drafter(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                   ThreadPool* pool);

}  // namespace dspark::runtime
