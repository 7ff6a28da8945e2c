// dspark random-model: a GGUF with a model's metadata and tensor shapes and types but random weights,
// or its skeleton (no tensor data; formats/gguf_random.h), for speed and agreement tests where the real
// weights cannot be taken.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/gguf_random.h"
#include "runtime/registry.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/verbs.h"

namespace dspark::tools {

int verb_random_model(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, out;
  int64_t seed = 1;
  bool skeleton = false, json = false;
  Args args("dspark random-model --model M --out PATH [--seed S] [--skeleton] [--json]",
            "Write a GGUF with M's metadata (tokenizer included) and M's tensors (names, shapes, types) holding\n"
            "random values: quantized blocks random codes with scales set for weights of std ~0.02, norm\n"
            "weights ~1. The same bytes per token as M, so speeds compare; its outputs are noise. M may be a\n"
            "skeleton (--skeleton: M's metadata and tensor table without tensor data, a few MB), so a machine\n"
            "without the model can make the random one: dspark random-model -m SKELETON --out R.gguf.");
  add_model_flags(args, &model_spec, &cache);
  args.add("--out,-o", &out, "output GGUF path (required)");
  args.add("--seed", &seed, "random seed (the same seed, the same bytes, from a model or its skeleton)", 0, INT64_MAX);
  args.add_flag("--skeleton", &skeleton, "write M's skeleton instead (metadata and tensor table, no tensor data)");
  add_json_flag(args, &json, "print one JSON object (what was written)");
  const VerbError fail{"random-model"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (out.empty()) return fail("--out is required");
  auto path = runtime::resolve_model_path(model_spec, runtime::resolve_cache_dir(cache));
  if (!path) return fail(path.message());
  std::error_code ec;
  if (std::filesystem::equivalent(out, *path, ec)) return fail("--out " + out + " is the model file itself");
  auto f = formats::GgufFile::open(*path);
  if (!f) return fail(f.message());
  auto w = skeleton ? formats::skeleton_of(*f) : formats::random_like(*f, (uint64_t)seed);
  if (!w) return fail(w.message());
  if (Status st = w->write_file(out); !st) return fail(st.message());
  auto back = formats::GgufFile::open(out);  // what a reader makes of it
  if (!back) return fail("wrote " + out + " but cannot read it back: " + back.message(), 1);
  const size_t n_tensors = formats::is_skeleton(*back) ? 0 : back->tensors().size();
  if (json) {
    const nlohmann::json j = {{"source", *path}, {"out", out}, {"kind", skeleton ? "skeleton" : "random"},
                              {"seed", skeleton ? nlohmann::json() : nlohmann::json(seed)},
                              {"metadata_keys", back->kvs().size()}, {"tensors", n_tensors}, {"bytes", back->file_size()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s: %s of %s, %zu metadata keys, %zu tensors, %.1f MB\n", out.c_str(),
                skeleton ? "skeleton" : "random weights", path->c_str(), back->kvs().size(), n_tensors,
                back->file_size() / 1e6);
  }
  return 0;
}

}  // namespace dspark::tools
