#include "tools/spec_flags.h"

#include <cstdio>

#include "runtime/draft_quant.h"
#include "runtime/registry.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

void add_spec_flags(Args& args, SpecFlags* f, bool no_spec_flag) {
  for (const spec::SpecKey& k : spec::spec_keys()) {
    const std::string name = k.name;
    auto set = k.set;  // the key's own validation; Args prefixes errors with the flag
    args.add_custom("--" + name, k.help, k.get(f->config), [f, name, set](const std::string& v) {
      f->given.insert(name);
      return set(&f->config, v);
    });
  }
  if (no_spec_flag) args.add_flag("--no-spec", &f->no_spec, "plain decoding: no drafter (not even the model's shipped one)");
}

Status check_spec_flags(const SpecFlags& f) {
  if (f.no_spec && f.names_drafter()) return Status::error("--no-spec contradicts --draft-model / --draft-kind / --suffix-index");
  if (Status st = check_drafter_kind(f.config.kind); !st) return Status::error("--" + st.message());
  if (f.names_drafter()) {
    if (Status st = spec::check_spec(f.config); !st) return Status::error("--" + st.message());
  }
  return Status::ok();
}

std::optional<spec::SpecConfig> effective_spec(const SpecFlags& f, const std::string& model_path, bool fallback_ngram) {
  if (f.no_spec) return std::nullopt;
  if (f.names_drafter()) return f.config;
  spec::SpecConfig c = f.config;
  const std::string shipped = default_drafter_dir(model_path);
  if (!shipped.empty()) {
    c.kind = "dspark";
    c.model = shipped;
    // The cost-aware schedule from start-up costs: 1.07-1.10x the online-refined one for the copy
    // head and 1.02-1.07x for the shipped drafter at T 0 (docs/results/2026-12-04.md, session 15).
    if (!f.given.count("draft-schedule")) c.schedule = "cost-static";
    return c;
  }
  if (!fallback_ngram) return std::nullopt;
  c.kind = "ngram";
  return c;
}

Result<DrafterBundle> mount_drafter(spec::SpecConfig c, int64_t n_ctx, const LoadedModel& target,
                                    const std::string& cache_dir, ThreadPool* pool, spec::SpecConfig* mounted,
                                    std::vector<double>* verify_ms, bool verbose) {
  auto q = resolve_draft_quant_for(c.kind, c.model, c.quant, *target.model, cache_dir, pool);
  if (!q) return q.status();
  if (verbose && !q->note.empty()) std::fprintf(stderr, "%s\n", q->note.c_str());
  c.model = q->dir;
  c.quant = q->mode();  // what was chosen, for the slots a server mounts from `mounted`
  DrafterRuntime rt{.n_ctx = n_ctx, .verify_ms = {}};
  auto b = make_drafter(c, rt, target, pool);
  if (!b) return b.status();
  if (c.cost_schedule() || c.governor) {  // both start from the target's verify-cost table
    rt.verify_ms = measure_verify_ms(*target.model, b->gamma + 1, pool);
    b = make_drafter(c, rt, target, pool);
    if (!b) return b.status();
  }
  if (mounted) *mounted = c;
  if (verify_ms) *verify_ms = rt.verify_ms;
  return b;
}

}  // namespace dspark::tools
