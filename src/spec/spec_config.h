// How generation speculates, as one type: which drafter, how far it drafts, how the draft length
// is decided, and how a DSpark checkpoint is mounted. Every entry point fills this one struct:
// the verbs' flags (`--draft-model PATH`, registered once by tools/spec_flags.h), `dspark ab`'s arm
// specs (`draft-model=PATH,num-draft-tokens=7`, the same keys) and the server's per-request
// override (SpecOverride in serve/openai_api.h, which narrows gamma within what the drafter can do).
// The keys and their validation live in one table (spec_keys()); a value is checked where it enters.
//
// Draft length, one name and one sentinel: `gamma` = the most draft tokens per round; 0 = the
// drafter's own default (a DSpark drafter's block size, 5 for the others). A DSpark drafter clamps a
// larger gamma to its block (with a warning); nothing else clamps it.
#pragma once

#include <span>
#include <string>

#include "core/status.h"

namespace dspark::spec {

inline constexpr int kMaxGamma = 64;      // largest accepted gamma (any drafter)
inline constexpr int kDefaultGamma = 5;   // gamma 0 for drafters without a block size
inline constexpr double kDefaultSuffixMinProb = 0.1;  // the suffix index's adaptive draft length (SuffixQueryConfig)

struct SpecConfig {
  std::string kind = "auto";        // a drafter kind (runtime/drafter_factory.h registry) or auto: from `model`
  std::string model;                // drafter GGUF or DSpark checkpoint directory ("" for ngram)
  int gamma = 0;                    // 0..kMaxGamma; 0 = the drafter's default
  double threshold = 0.0;           // DSpark: stop at the first slot whose confidence is below it; [0, 1]
  // DSpark draft length: fixed (gamma / threshold) | cost (Algorithm 1) | cost-static (Algorithm 1
  // from start-up costs only, DSparkOptions::static_costs) | cost-gated (Algorithm 1 with the
  // backbone gate, DSparkOptions::backbone_gate)
  std::string schedule = "fixed";
  std::string copy = "auto";        // DSpark copy head: auto (as the config says) | on | off | only | first
  std::string quant = "auto";       // DSpark checkpoint: auto | none (as given) | int8 | int4 (runtime/draft_quant.h)
  bool governor = true;             // per-round draft length from measured tokens per ms, 0 = plain (spec/governor.h)
  std::string suffix_index;         // draft-kind suffix: the suffix index file (spec/suffix_index.h); "" otherwise
  double suffix_min_prob = kDefaultSuffixMinProb;  // draft-kind suffix: SuffixQueryConfig::min_prob, [0, 1]

  bool cost_schedule() const { return schedule == "cost" || schedule == "cost-static" || schedule == "cost-gated"; }
  bool operator==(const SpecConfig&) const = default;
};

// One key of the table: `--NAME VALUE` on the command line, `NAME=VALUE` in an ab spec.
struct SpecKey {
  const char* name;
  const char* help;
  std::string (*get)(const SpecConfig&);                      // the current value as text
  Status (*set)(SpecConfig* c, const std::string& value);     // validates; the error says what is allowed
};
std::span<const SpecKey> spec_keys();

// The integer-copy width a resolved draft-quant mode loads with (DSparkOptions::copy_bits):
// int8 -> 8, int4 -> 4, anything else (none) -> 0.
int copy_bits_of_quant(const std::string& quant);

// Sets one key by name; errors name the key ("num-draft-tokens: ...").
Status set_spec_key(SpecConfig* c, const std::string& key, const std::string& value);

// "key=value,key=value" (each key at most once; values contain no commas) on top of `base`.
Result<SpecConfig> parse_spec(const std::string& text, SpecConfig base = {});

// Rules between keys: auto needs a model (or a suffix index: then it is suffix), ngram and suffix
// take none, draft-model / dspark need one, suffix needs suffix-index and only suffix takes it. A
// drafter kind's existence is checked by the registry that opens it.
Status check_spec(const SpecConfig& c);

}  // namespace dspark::spec
