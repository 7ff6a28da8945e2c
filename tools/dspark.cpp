// dspark: one binary, one subcommand per verb.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tools/args.h"
#include "tools/verbs.h"

namespace {

struct Verb {
  const char* name;
  int (*fn)(int, char**);
  const char* summary;
};

constexpr Verb kVerbs[] = {
    {"get", dspark::tools::verb_get, "download a known model into the cache and verify it"},
    {"generate", dspark::tools::verb_generate, "generate text from a prompt (streams, then prints speeds)"},
    {"bench", dspark::tools::verb_bench, "prefill/decode speed (median of repeats) and the verify-cost curve"},
    {"ab", dspark::tools::verb_ab, "acceptance A/B of drafter configs: paired bootstrap CIs and a pass/fail verdict"},
    {"serve", dspark::tools::verb_serve, "OpenAI-compatible HTTP server with speculative decoding and a chat page"},
    {"inspect", dspark::tools::verb_inspect, "print a GGUF file's metadata and tensor table"},
    {"tokenize", dspark::tools::verb_tokenize, "the model's tokenizer: text -> ids and pieces, or ids -> text"},
    {"regen", dspark::tools::verb_regen, "target answers training prompts -> shards for drafter training"},
    {"train-drafter", dspark::tools::verb_train_drafter, "train a DSpark drafter on regen shards"},
    {"quantize-drafter", dspark::tools::verb_quantize_drafter, "quantize a DSpark drafter checkpoint (affine MLX or TurboQuant)"},
    {"drafter-diag", dspark::tools::verb_drafter_diag, "drafter diagnostics: context-tap ablation, entropy, train vs held-out, tap RMS"},
    {"suffix-index", dspark::tools::verb_suffix_index, "build the suffix index of draft-kind suffix from regen token ids"},
    {"random-model", dspark::tools::verb_random_model, "a model's metadata and tensor shapes with random weights (or its skeleton)"},
    {"sensitivity", dspark::tools::verb_sensitivity, "per-tensor quantization sensitivity of a drafter; knapsack bit recipes"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: dspark <command> [options]   (dspark <command> --help for details)\n\ncommands:\n");
  for (const Verb& v : kVerbs) std::fprintf(out, "  %-16s %s\n", v.name, v.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return dspark::kExitBadInput;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  for (const Verb& v : kVerbs)
    if (cmd == v.name) {
      // Errors come back as Status; an exception is a fault from below that has none to return (a
      // device running out of memory or failing mid-op): one line and the usage-error exit code.
      try {
        return v.fn(argc, argv);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dspark %s: %s\n", v.name, e.what());
        return dspark::kExitBadInput;
      }
    }
  std::fprintf(stderr, "dspark: unknown command '%s' (run dspark --help)\n", cmd.c_str());
  return dspark::kExitBadInput;
}
