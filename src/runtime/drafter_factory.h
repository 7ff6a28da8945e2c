// Builds the drafter a speculative::SpecConfig asks for, through the registry of drafter kinds
// (drafter_kinds(): ngram | suffix | draft-model | dspark; auto detects one from the path, or is
// suffix when only a suffix index is given).
// `auto` detects the kind from the path (docs/DSPARK-CHECKPOINT.md §1): a directory whose config.json names
// architectures[0] == "Gemma4DSparkModel" is a DeepSpec DSpark drafter; a GGUF file is a
// two-model drafter (its vocabulary must equal the target's).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/note.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/drafter.h"
#include "speculative/drafter_dspark.h"
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
  NoteFn note;                     // remarks (a num-draft-tokens past a DSpark block is clamped)
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

// The model's shipped default: what generate and serve decode with when no drafter flag is given.
// drafters/<name>/default_spec.json, if present, holds {"spec": "key=value,..."} (the keys of
// speculative::spec_keys(); draft-model and suffix-index paths relative to that folder), the setup
// measured best for this model (its PROVENANCE says how), and optionally {"index": {"ids": [...],
// "sha256": "..."}}: the spec's suffix index is not shipped but built on first use from the shipped
// regen token-id files (data/<ids>), into <cache_dir>/indexes/, and must hash to sha256. Without
// default_spec.json: the folder's DSpark checkpoint with the cost-aware schedule from start-up costs.
// nullopt: the model has no shipped drafter. Errors name the file.
struct ShippedSpec {
  speculative::SpecConfig config;
  std::vector<std::string> index_ids;  // ids files to build config.suffix_index from (empty: nothing to build)
  std::string index_sha256;            // what that build must give
};
Result<std::optional<ShippedSpec>> shipped_spec(const std::string& model_path, const std::string& cache_dir);

// The draft length (gamma) the drafter of this config will have, without loading it: num-draft-tokens
// when set (a DSpark drafter clamps it to its block size), else a DSpark drafter's block size (its
// config.json), else speculative::kDefaultGamma. Errors name the file.
Result<int> planned_gamma(const speculative::SpecConfig& c);

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

// A DSpark checkpoint opened to measure the checkpoint itself (quantize-drafter's reload check, the
// trainer's held-out replay, drafter-diag), through the same load as the registry's dspark row, with
// the copy head off (the network alone) and returned as its concrete type for the network's
// diagnostics (base and confidence logits). gamma 0 = the block size; copy_bits as
// DSparkOptions::copy_bits. Errors name the directory.
struct DSparkProbe {
  int gamma = 0;
  float threshold = 0.0f;
  bool report_confidence = false;  // keep the confidence logits (DSparkDrafter::last_conf_logits)
  int copy_bits = 0;
  int64_t n_ctx = 4096;
};
Result<std::unique_ptr<speculative::DSparkDrafter>> open_dspark_probe(const std::string& dir, const model::Model& target,
                                                                      const DSparkProbe& p, ThreadPool* pool);

// Fresh drafter state for one request (cheap to call per request; weights are shared via bundle).
// `c.kind` auto is detected from `c.model`. Sampling settings come with each draft request
// (speculative::DraftRequest::sampler), not from here.
Result<DrafterBundle> make_drafter(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                   ThreadPool* pool);

}  // namespace dspark::runtime
