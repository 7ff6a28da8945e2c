#include "runtime/drafter_mount.h"

#include "runtime/draft_quant.h"

namespace dspark::runtime {

Result<std::unique_ptr<MountedDrafter>> mount_drafter(speculative::SpecConfig c, const MountOptions& opt,
                                                      const LoadedModel& target, ThreadPool* pool) {
  auto q = resolve_draft_quant_for(c.kind, c.model, c.quant, *target.model, opt.cache_dir, pool, opt.note);
  if (!q) return q.status();
  if (opt.verbose && !q->note.empty()) notify(opt.note, q->note);
  c.model = q->dir;
  c.quant = q->mode();  // what was chosen
  DrafterRuntime rt{.n_ctx = opt.n_ctx, .verify_ms = {}, .note = opt.note};
  if (c.cost_schedule() || c.governor) {  // both start from the verify-cost table, which must reach gamma + 1 tokens
    auto gamma = planned_gamma(c);
    if (!gamma) return gamma.status();
    rt.verify_ms = (int)opt.verify_ms.size() >= *gamma + 2 ? opt.verify_ms : measure_verify_ms(*target.model, *gamma + 1, pool);
  }
  auto b = make_drafter(c, rt, target, pool);  // the weights load once
  if (!b) return b.status();
  auto m = std::make_unique<MountedDrafter>();
  m->config = std::move(c);
  m->verify_ms = std::move(rt.verify_ms);
  m->bundle = std::move(b).value();
  m->quant_note = q->note;
  return m;
}

}  // namespace dspark::runtime
