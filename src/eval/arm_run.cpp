#include "eval/arm_run.h"

#include <chrono>

#include "speculative/spec_decode.h"

namespace dspark::eval {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

Result<ArmRun> run_arm(const LoadedModel& lm, model::Session& session, std::span<const int32_t> prompt,
                       const generate::GenerateParams& gp, DrafterBundle* drafter) {
  using Clock = std::chrono::steady_clock;
  ArmRun run;
  const auto t0 = Clock::now();
  if (drafter) {
    speculative::SpecParams sp{gp, drafter->gamma, drafter->governor};
    auto r = speculative::generate_spec(*lm.model, session, *lm.tok, prompt, sp, *drafter->drafter, {});
    if (!r) return r.status();
    run.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    run.speculative = true;
    run.prefill_ms = r->out.prefill_ms;
    run.tokens = std::move(r->out.tokens);
    run.stats = std::move(r->stats);
  } else {
    auto r = generate::generate(*lm.model, session, *lm.tok, prompt, gp, {});
    if (!r) return r.status();
    run.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    run.prefill_ms = r->prefill_ms;
    run.tokens = std::move(r->tokens);
  }
  return run;
}

}  // namespace dspark::eval
