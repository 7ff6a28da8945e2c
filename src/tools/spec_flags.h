// The speculative-decoding flags, registered once for every verb that decodes (generate, serve,
// bench --spec): one flag per key of speculative::spec_keys() (--draft-kind, --draft-model,
// --num-draft-tokens, --draft-threshold, --draft-schedule, --draft-copy, --draft-quant), plus
// --no-spec where plain decoding is an option. `dspark ab` arm specs use the same keys
// (speculative::parse_spec), so a flag and a spec key never disagree.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "speculative/spec_config.h"
#include "tools/args.h"
#include "runtime/drafter_factory.h"

namespace dspark::tools {

struct SpecFlags {
  speculative::SpecConfig config;
  bool no_spec = false;
  std::set<std::string> given;  // keys set on the command line

  // A drafter was named (--draft-kind or --draft-model): no shipped default applies.
  bool names_drafter() const {
    return given.count("draft-kind") || given.count("draft-model") || given.count("suffix-index");
  }
};

// Registers the keys' flags (their defaults are `f->config`'s values) and, with `no_spec_flag`,
// --no-spec.
void add_spec_flags(Args& args, SpecFlags* f, bool no_spec_flag = true);

// After parsing: --no-spec against the drafter flags, and speculative::check_spec when a drafter is named.
Status check_spec_flags(const SpecFlags& f);

// What to decode with: the flags when they name a drafter; otherwise the model's shipped default
// (runtime::shipped_spec: drafters/<name>/default_spec.json, else its DSpark checkpoint with the
// cost-aware schedule; a suffix index it builds from shipped ids is built into cache_dir on first
// use), with every key the command line gave on top; else `fallback_ngram` ? n-gram : none.
// nullopt = plain decoding. Errors: a broken default_spec.json or index build (named).
Result<std::optional<speculative::SpecConfig>> effective_spec(const SpecFlags& f, const runtime::LoadedModel& lm,
                                                             const std::string& cache_dir, bool fallback_ngram);

// effective_spec's decision alone, from the model's file name (no model loaded, nothing built): the
// spec, and the shipped default it came from (whose suffix index effective_spec builds first).
struct SpecChoice {
  std::optional<speculative::SpecConfig> spec;
  std::optional<runtime::ShippedSpec> shipped;
};
Result<SpecChoice> choose_spec(const SpecFlags& f, const std::string& model_path, const std::string& cache_dir,
                               bool fallback_ngram);

}  // namespace dspark::tools
