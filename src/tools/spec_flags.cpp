#include "tools/spec_flags.h"

#include <cstdio>

#include "runtime/registry.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

void add_spec_flags(Args& args, SpecFlags* f, bool no_spec_flag) {
  for (const speculative::SpecKey& k : speculative::spec_keys()) {
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
    if (Status st = speculative::check_spec(f.config); !st) return Status::error("--" + st.message());
  }
  return Status::ok();
}

std::optional<speculative::SpecConfig> effective_spec(const SpecFlags& f, const std::string& model_path, bool fallback_ngram) {
  if (f.no_spec) return std::nullopt;
  if (f.names_drafter()) return f.config;
  speculative::SpecConfig c = f.config;
  const std::string shipped = default_drafter_dir(model_path);
  if (!shipped.empty()) {
    c.kind = "dspark";
    c.model = shipped;
    // The cost-aware schedule from start-up costs: 1.07-1.10x the online-refined one for the copy
    // head and 1.02-1.07x for the shipped drafter at T 0 (docs/results/2026-12-04.md, session 15).
    if (!f.given.count("draft-schedule")) c.schedule = speculative::DraftSchedule::kCostStatic;
    return c;
  }
  if (!fallback_ngram) return std::nullopt;
  c.kind = "ngram";
  return c;
}

}  // namespace dspark::tools
