// One mount path for every drafter (generate, serve, ab, bench --spec): a speculative::SpecConfig is
// resolved once against the target and this machine, loaded once, and forked per request or server
// slot. No verb or harness builds a drafter itself.
//
//   1. resolve: draft-quant (auto -> the rung this CPU runs, runtime/draft_quant.h; the config then
//      names that rung's directory), kind auto -> a registered kind (drafter_factory.h);
//   2. load: the drafter through the kind registry; for the cost-aware schedule and the governor, the
//      target's verify-cost table for the drafter's effective gamma (measured here, or given by the
//      caller, e.g. ab's one table for all arms), then the drafter again with it;
//   3. fork(): a fresh state over the same weights (speculative::Drafter::fork), as many as needed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "runtime/drafter_factory.h"
#include "runtime/loaded_model.h"
#include "speculative/spec_config.h"

namespace dspark::runtime {

struct MountOptions {
  int64_t n_ctx = 4096;            // context each drafter state must hold
  std::string cache_dir;           // where draft-quant auto keeps converted rungs
  std::vector<double> verify_ms;   // given: the verify-cost table (index 0 unused) instead of measuring one
  bool verbose = false;            // also report the quantization choice's note to `note`
  NoteFn note;                     // remarks: draft-quant auto's conversions, a clamped num-draft-tokens
};

struct MountedDrafter {
  speculative::SpecConfig config;         // as loaded: draft-quant resolved, draft-model = the rung's directory
  std::vector<double> verify_ms;   // the table the schedule and the governor start from (empty: none needed)
  DrafterBundle bundle;            // the first state, and what the weights live in (a draft model)
  std::string quant_note;          // the draft-quant choice explained (may be empty)

  const std::string& kind() const { return bundle.kind; }
  int gamma() const { return bundle.gamma; }
  speculative::Drafter& drafter() const { return *bundle.drafter; }
  // A new state sharing this mount's weights; the mount must outlive it.
  std::unique_ptr<speculative::Drafter> fork() const { return bundle.drafter->fork(); }
};

// Errors name the flag, file or field (the caller prefixes the verb).
Result<std::unique_ptr<MountedDrafter>> mount_drafter(speculative::SpecConfig c, const MountOptions& opt,
                                                      const LoadedModel& target, ThreadPool* pool);

}  // namespace dspark::runtime
