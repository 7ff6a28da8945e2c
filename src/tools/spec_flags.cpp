#include "tools/spec_flags.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "runtime/registry.h"
#include "tools/suffix_index_build.h"

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

namespace {

// A shipped default's suffix index, built from the shipped ids on first use (a second or two) into
// the cache; the build is byte for byte reproducible, so it must hash to what the drafter folder says.
Status ensure_shipped_index(const runtime::ShippedSpec& s, const runtime::LoadedModel& lm) {
  namespace fs = std::filesystem;
  const std::string& out = s.config.suffix_index;
  std::error_code ec;
  if (s.index_ids.empty() || fs::exists(out, ec)) return Status::ok();
  fs::create_directories(fs::path(out).parent_path(), ec);
  if (ec) return Status::error(fs::path(out).parent_path().string() + ": " + ec.message());
  std::fprintf(stderr, "dspark: building the shipped suffix index %s (first use)\n", out.c_str());
  // A file of this process's own: servers started together (scripts/cluster.sh) may build at once.
  const std::string tmp = out + "." + std::to_string(::getpid()) + ".partial";
  auto b = build_suffix_index(s.index_ids, lm, /*with_prompts=*/false, tmp);
  if (!b) return b.status();
  if (b->sha256 != s.index_sha256) {
    fs::remove(tmp, ec);
    return Status::error("the suffix index built from the shipped ids has sha256 " + b->sha256 + ", the drafter folder expects " +
                         s.index_sha256 + " (shipped data and default_spec.json disagree)");
  }
  fs::rename(tmp, out, ec);
  if (ec) return Status::error(out + ": " + ec.message());
  return Status::ok();
}

}  // namespace

Result<SpecChoice> choose_spec(const SpecFlags& f, const std::string& model_path, const std::string& cache_dir,
                               bool fallback_ngram) {
  SpecChoice ch;
  if (f.no_spec) return ch;
  if (f.names_drafter()) {
    ch.spec = f.config;
    return ch;
  }
  auto shipped = shipped_spec(model_path, cache_dir);
  if (!shipped) return shipped.status();
  if (*shipped) {
    // The shipped setup, with every key the command line gave on top.
    speculative::SpecConfig c = (*shipped)->config;
    for (const speculative::SpecKey& k : speculative::spec_keys())
      if (f.given.count(k.name)) DSPARK_RETURN_IF_ERROR(speculative::set_spec_key(&c, k.name, k.get(f.config)));
    ch.spec = c;
    ch.shipped = **shipped;
    return ch;
  }
  if (fallback_ngram) {
    ch.spec = f.config;
    ch.spec->kind = "ngram";
  }
  return ch;
}

Result<std::optional<speculative::SpecConfig>> effective_spec(const SpecFlags& f, const runtime::LoadedModel& lm,
                                                             const std::string& cache_dir, bool fallback_ngram) {
  auto ch = choose_spec(f, lm.path, cache_dir, fallback_ngram);
  if (!ch) return ch.status();
  if (ch->shipped) DSPARK_RETURN_IF_ERROR(ensure_shipped_index(*ch->shipped, lm));
  return ch->spec;
}

}  // namespace dspark::tools
