#include "runtime/drafter_mount.h"

#include "runtime/draft_quant.h"
#include "speculative/drafter_suffix.h"

namespace dspark::runtime {

Result<std::unique_ptr<MountedDrafter>> mount_drafter(speculative::SpecConfig c, const MountOptions& opt,
                                                      const LoadedModel& target, ThreadPool* pool) {
  auto q = resolve_draft_quant_for(c.kind, c.model, c.quant, *target.model, opt.cache_dir, pool, opt.note);
  if (!q) return q.status();
  if (opt.verbose && !q->note.empty()) notify(opt.note, q->note);
  c.model = q->dir;
  c.quant = q->mode();  // what was chosen
  DrafterRuntime rt{.n_ctx = opt.n_ctx, .verify_ms = {}, .note = opt.note};
  if (c.cost_schedule() || c.governor) {  // both start from the verify-cost table, which must reach the largest window
    auto gamma = planned_gamma(c);
    if (!gamma) return gamma.status();
    // A token tree's window: the chain's, plus its branches (speculative/token_tree.h prunes by this table).
    const int window = *gamma + 1 + (c.tree > 0 ? std::max(0, std::min(speculative::Drafter::kMaxTreeTokens - *gamma,
                                                                         c.tree * speculative::SuffixDrafterConfig{}.branch_len))
                                               : 0);
    rt.verify_ms = (int)opt.verify_ms.size() >= window + 1 ? opt.verify_ms : measure_verify_ms(*target.model, window, pool);
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
