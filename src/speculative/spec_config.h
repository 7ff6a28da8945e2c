// How generation speculates, as one type: which drafter, how far it drafts, how the draft length
// is decided, and how a DSpark checkpoint is mounted. Every entry point fills this one struct:
// the verbs' flags (`--draft-model PATH`, registered once by tools/spec_flags.h), `dspark ab`'s arm
// specs (`draft-model=PATH,num-draft-tokens=7`, the same keys) and the server's per-request
// override (SpecOverride in serve/openai_api.h, which narrows gamma within what the drafter can do).
// The keys and their validation live in one table (spec_keys()); a value is checked where it enters.
//
// Draft length, one name and one sentinel: `gamma` = the most draft tokens per round; 0 = the
// drafter's own default (a DSpark drafter's block size, 5 for the others). A DSpark drafter clamps a
// larger gamma to its block (with a warning); nothing else clamps it. The same name holds inside
// (SpecParams::gamma, DSparkOptions::gamma, the governor's per-round decision, Drafter::max_gamma(),
// Drafter::kMaxSureGamma); only the public spellings differ: the flag and ab key `num-draft-tokens`,
// the request field `speculative.num_draft_tokens`. Not draft lengths: a DSpark network's
// `block_size` (its architecture: the block it drafts in one pass, so the most it can draft) and a
// drafter call's `max_n` (DraftRequest: the bound of that one call).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace dspark::speculative {

inline constexpr int kMaxGamma = 64;      // largest accepted gamma (any drafter)
inline constexpr int kDefaultGamma = 5;   // gamma 0 for drafters without a block size
inline constexpr double kDefaultSuffixMinProb = 0.1;  // the suffix index's adaptive draft length (SuffixQueryConfig)
inline constexpr int kMaxTreeWidth = 4;   // draft-tree: alternative branches at most

// The settings with a fixed set of values are enums, named once (the *_name() functions and the
// key table's parsers use the same names; a name is what flags, ab specs and JSON say).
enum class DraftSchedule : uint8_t {
  kFixed,       // gamma / threshold
  kCost,        // Algorithm 1: expected tokens per ms of verify, from online timings
  kCostStatic,  // the same from start-up costs only (DSparkOptions::static_costs)
  kCostGated,   // the same with the backbone gate (DSparkOptions::backbone_gate)
};
enum class CopyMode : uint8_t { kAuto, kOn, kOff, kOnly, kFirst };  // DSpark copy head (as the config says / ...)
enum class DraftQuant : uint8_t { kAuto, kNone, kInt8, kInt4 };     // runtime/draft_quant.h
const char* schedule_name(DraftSchedule s);    // fixed | cost | cost-static | cost-gated
const char* copy_mode_name(CopyMode m);        // auto | on | off | only | first
const char* draft_quant_name(DraftQuant q);    // auto | none | int8 | int4
// Parsers of those names; the error lists the allowed ones.
Status parse_schedule(const std::string& v, DraftSchedule* out);
Status parse_copy_mode(const std::string& v, CopyMode* out);
Status parse_draft_quant(const std::string& v, DraftQuant* out);

struct SpecConfig {
  std::string kind = "auto";        // a drafter kind (runtime/drafter_factory.h registry) or auto: from `model`
  std::string model;                // drafter GGUF or DSpark checkpoint directory ("" for ngram)
  int gamma = 0;                    // 0..kMaxGamma; 0 = the drafter's default
  double threshold = 0.0;           // DSpark: stop at the first slot whose confidence is below it; [0, 1]
  DraftSchedule schedule = DraftSchedule::kFixed;  // DSpark draft length
  CopyMode copy = CopyMode::kAuto;                  // DSpark copy head
  DraftQuant quant = DraftQuant::kAuto;             // DSpark checkpoint's form
  bool governor = true;             // per-round draft length from measured tokens per ms, 0 = plain (speculative/governor.h)
  bool governor_by_class = true;    // ... learned per draft class where the drafter has classes (GovernorConfig::by_class)
  bool sure_drafts = true;          // ... and a plain decision still takes a draft the drafter is sure of (GovernorConfig::sure_drafts)
  std::string suffix_index;         // draft-kind suffix: the suffix index file (speculative/suffix_index.h); "" otherwise
  double suffix_min_prob = kDefaultSuffixMinProb;  // draft-kind suffix: SuffixQueryConfig::min_prob, [0, 1]
  int tree = 0;                     // draft-kind suffix: token-tree branches besides the chain (speculative/token_tree.h)

  bool cost_schedule() const { return schedule != DraftSchedule::kFixed; }
  // draft-copy on / only / first: the copy head asked for explicitly (needs a DSpark drafter).
  bool copy_forced() const { return copy == CopyMode::kOn || copy == CopyMode::kOnly || copy == CopyMode::kFirst; }
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
int copy_bits_of_quant(DraftQuant quant);

// Sets one key by name; errors name the key ("num-draft-tokens: ...").
Status set_spec_key(SpecConfig* c, const std::string& key, const std::string& value);

// "key=value,key=value" (each key at most once; values contain no commas) on top of `base`.
Result<SpecConfig> parse_spec(const std::string& text, SpecConfig base = {});

// Rules between keys: auto needs a model (or a suffix index: then it is suffix), ngram and suffix
// take none, draft-model / dspark need one, suffix needs suffix-index and only suffix takes it. A
// drafter kind's existence is checked by the registry that opens it.
Status check_spec(const SpecConfig& c);

}  // namespace dspark::speculative
