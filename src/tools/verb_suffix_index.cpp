// dspark suffix-index build: the suffix index of draft-kind suffix (speculative/suffix_index.h) from
// regen token-id files (tools/suffix_index_build.h).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/loaded_model.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/suffix_index_build.h"
#include "tools/verbs.h"

namespace dspark::tools {

namespace {

namespace fs = std::filesystem;

// --ids values: comma-separated lists, the flag repeated.
std::vector<std::string> split_ids_flags(const std::vector<std::string>& flags) {
  std::vector<std::string> paths;
  for (const std::string& v : flags)
    for (size_t from = 0; from <= v.size();) {
      size_t to = v.find(',', from);
      if (to == std::string::npos) to = v.size();
      if (to > from) paths.push_back(v.substr(from, to - from));
      from = to + 1;
    }
  return paths;
}

}  // namespace

int verb_suffix_index(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::string model_spec = "gemma3-270m", cache, out;
  std::vector<std::string> ids_flags;
  bool json = false, with_prompts = false;
  Args args("dspark suffix-index build --ids FILE[,FILE...] -m MODEL -o OUT.sfx [--with-prompts] [--json]",
            "Build the suffix index of draft-kind suffix (docs/SPECULATION.md, \"Retrieval drafting\") from\n"
            "regen token-id files (dspark-regen-ids-v1, .xz ones decompressed with xz): every answer's tokens\n"
            "(with --with-prompts the chat-templated prompt before it), in the order given, as one stream\n"
            "with a suffix array. The file records the model's tokenizer fingerprint; the same inputs give\n"
            "the same bytes.");
  add_model_flags(args, &model_spec, &cache);
  args.add_list("--ids", &ids_flags, "token-id files, comma-separated or the flag repeated, in order");
  args.add("--out,-o", &out, "the index file to write");
  args.add_flag("--with-prompts", &with_prompts, "index the prompt tokens too, not only the answers");
  add_json_flag(args, &json, "print one JSON object (file, bytes, sha256, counts, seconds)");
  const VerbError fail{"suffix-index"}, fail_build{"suffix-index build"};
  const bool help = argc >= 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h");
  if (help) { std::printf("%s", args.help().c_str()); return 0; }
  if (argc < 3 || std::string(argv[2]) != "build") return fail("expected 'build' (dspark suffix-index --help)");
  if (auto rc = parse_verb_args(args, argc, argv, fail, 3)) return *rc;
  const std::vector<std::string> ids_paths = split_ids_flags(ids_flags);
  if (ids_paths.empty() || out.empty()) return fail_build("needs --ids FILE[,FILE...] and --out FILE");
  const auto t0 = Clock::now();
  auto lm = runtime::load_model(model_spec, cache);
  if (!lm) return fail_build(lm.message());
  bool bad_ids = false;
  auto b = build_suffix_index(ids_paths, *lm, with_prompts, out, &bad_ids);
  if (!b) return fail_build(b.message(), bad_ids ? kExitBadInput : 1);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (json)
    std::printf("%s\n", nlohmann::json{{"file", out}, {"bytes", b->bytes}, {"sha256", b->sha256}, {"sequences", b->sequences},
                                       {"tokens", b->tokens}, {"with_prompts", with_prompts}, {"seconds", secs}}
                            .dump()
                            .c_str());
  else
    std::printf("%s: %llu sequences, %llu tokens, %.1f MB, %.1f s\nsha256 %s\n", out.c_str(),
                (unsigned long long)b->sequences, (unsigned long long)b->tokens, (double)b->bytes / 1e6, secs,
                b->sha256.c_str());
  return 0;
}

}  // namespace dspark::tools
