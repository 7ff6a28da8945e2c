// One generation of one benchmark arm on one prompt: serial decoding (no drafter) or speculative
// decoding with a drafter built once per arm (drafters reset their state in begin(), so one
// bundle serves every prompt). Shared by `bench --spec` and `ab`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "generate/generate.h"
#include "speculative/telemetry.h"
#include "runtime/drafter_factory.h"
#include "runtime/loaded_model.h"

namespace dspark::eval {

struct ArmRun {
  std::vector<int32_t> tokens;  // generated ids
  double ms = 0;                // wall time of the generate call (prefill + decode), milliseconds
  double prefill_ms = 0;        // of which the prompt's prefill (speculative: with the drafter's context pass)
  bool speculative = false;
  speculative::SpecStats stats;        // speculative arms only (all zero for serial)
};

// drafter == nullptr: serial decoding. Loading (model, drafter) is never inside `ms`.
Result<ArmRun> run_arm(const runtime::LoadedModel& lm, model::Session& session, std::span<const int32_t> prompt,
                       const generate::GenerateParams& gp, runtime::DrafterBundle* drafter);

}  // namespace dspark::eval
