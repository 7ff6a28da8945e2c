#include "speculative/spec_config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace dspark::speculative {

namespace {

Status one_of(const std::string& v, std::initializer_list<const char*> allowed, std::string* out) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) {
      *out = v;
      return Status::ok();
    }
    if (!list.empty()) list += ", ";
    list += a;
  }
  return Status::error("'" + v + "' is not one of " + list);
}

// An enum's names, in the enum's order.
template <typename E, size_t N>
Status parse_named(const std::string& v, const char* const (&names)[N], E* out) {
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (v == names[i]) {
      *out = (E)i;
      return Status::ok();
    }
    list += (i ? ", " : "") + std::string(names[i]);
  }
  return Status::error("'" + v + "' is not one of " + list);
}
constexpr const char* kScheduleNames[] = {"fixed", "cost", "cost-static", "cost-gated"};
constexpr const char* kCopyModeNames[] = {"auto", "on", "off", "only", "first"};
constexpr const char* kDraftQuantNames[] = {"auto", "none", "int8", "int4"};

// A number in [0, 1].
Status parse_unit(const std::string& v, double* out) {
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(t) || t < 0 || t > 1)
    return Status::error("'" + v + "' is not a number in [0, 1]");
  *out = t;
  return Status::ok();
}

// An integer in [0, hi].
Status parse_count(const std::string& v, int hi, int* out) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < 0 || n > hi)
    return Status::error("'" + v + "' is not an integer in [0, " + std::to_string(hi) + "]");
  *out = (int)n;
  return Status::ok();
}

std::string fmt_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

const SpecKey kKeys[] = {
    {"draft-kind", "drafter: auto (from --draft-model, or suffix with --suffix-index alone), ngram (prompt lookup,\n"
                   "no weights), suffix (prompt lookup, then a suffix index of the target's answers), draft-model, dspark",
     [](const SpecConfig& c) { return c.kind; },
     [](SpecConfig* c, const std::string& v) {
       if (v.empty() || v.size() > 32) return Status::error("'" + v + "' is not a drafter kind");
       for (char ch : v)
         if (!(std::isalnum((unsigned char)ch) || ch == '-' || ch == '_'))
           return Status::error("'" + v + "' is not a drafter kind");
       c->kind = v;
       return Status::ok();
     }},
    {"draft-model", "drafter: a GGUF with the target's vocabulary or a DSpark checkpoint directory",
     [](const SpecConfig& c) { return c.model; },
     [](SpecConfig* c, const std::string& v) {
       if (v.empty()) return Status::error("needs a path");
       c->model = v;
       return Status::ok();
     }},
    {"num-draft-tokens", "draft tokens per round at most (gamma); 0 = the drafter's default (a DSpark block, else 5)",
     [](const SpecConfig& c) { return std::to_string(c.gamma); },
     [](SpecConfig* c, const std::string& v) { return parse_count(v, kMaxGamma, &c->gamma); }},
    {"draft-threshold", "dspark: stop drafting at the first slot whose confidence is below this, in [0, 1]",
     [](const SpecConfig& c) { return fmt_double(c.threshold); },
     [](SpecConfig* c, const std::string& v) { return parse_unit(v, &c->threshold); }},
    {"draft-schedule", "dspark draft length: fixed (gamma / threshold), cost (expected tokens per ms of verify),\n"
                       "cost-static (cost, greedy requests too deciding from the start-up verify table and backbone\n"
                       "time instead of online timings, as sampled ones always do: drafts do not follow timing noise)\n"
                       "or cost-gated (cost, and a round skips the network when recent network rounds were slower\n"
                       "than plain decoding; measured slower than cost on SmolLM2, docs/DSPARK-ENGINE.md)",
     [](const SpecConfig& c) { return std::string(schedule_name(c.schedule)); },
     [](SpecConfig* c, const std::string& v) { return parse_schedule(v, &c->schedule); }},
    {"draft-copy", "dspark copy head (prompt lookup in the sequential stage): auto (as the drafter's config\n"
                   "says), on, off, only (the copy head alone: the network never runs, a slot without a lookup\n"
                   "match ends the draft: the ablation arm for the network's part), or first (a match always takes\n"
                   "its slot; on/auto let a copy whose estimated acceptance is below the network's yield the slot)",
     [](const SpecConfig& c) { return std::string(copy_mode_name(c.copy)); },
     [](SpecConfig* c, const std::string& v) { return parse_copy_mode(v, &c->copy); }},
    {"draft-quant", "dspark: auto (with AMX: convert an unquantized drafter once to the recommended rung,\n"
                    "cached beside it, docs/QUANT-FORMAT.md; without AMX: as int4 for an affine 4-bit drafter, else\n"
                    "int8), none (load it as given), int8\n"
                    "(as given, matmul weights held as 8-bit copies in memory for the integer kernels) or int4 (the\n"
                    "same as 4-bit Q4_1 copies: half the bytes; for drafters already quantized to 4 bits)",
     [](const SpecConfig& c) { return std::string(draft_quant_name(c.quant)); },
     [](SpecConfig* c, const std::string& v) { return parse_draft_quant(v, &c->quant); }},
    {"draft-governor", "on (default): each round drafts the length, 0 = a plain step, that the tokens per ms\n"
                       "measured in this request say pays best, with bounded exploration; where the drafter sorts its\n"
                       "drafts into classes (draft-kind suffix: a lookup's match length, an index draft's share), a\n"
                       "round keeps the part of its draft that pays at its class's own acceptance\n"
                       "(docs/SPECULATION.md); pooled: one acceptance estimate for every draft; off: every round\n"
                       "drafts up to num-draft-tokens as the drafter decides",
     [](const SpecConfig& c) { return std::string(!c.governor ? "off" : c.governor_by_class ? "on" : "pooled"); },
     [](SpecConfig* c, const std::string& v) {
       std::string s;
       DSPARK_RETURN_IF_ERROR(one_of(v, {"on", "pooled", "off"}, &s));
       c->governor = s != "off";
       if (c->governor) c->governor_by_class = s == "on";
       return Status::ok();
     }},
    {"draft-sure", "on (default): a round the governor (or the server's batch gate) makes plain still takes a\n"
                   "draft the drafter is sure of: copies of a long match in the request's own text (draft-kind\n"
                   "suffix) or in the answers already served (docs/SPECULATION.md, \"Sure drafts\"); off: never",
     [](const SpecConfig& c) { return std::string(c.sure_drafts ? "on" : "off"); },
     [](SpecConfig* c, const std::string& v) {
       std::string s;
       DSPARK_RETURN_IF_ERROR(one_of(v, {"on", "off"}, &s));
       c->sure_drafts = s == "on";
       return Status::ok();
     }},
    {"suffix-index", "the suffix index over the target's own answers (a .sfx file made by dspark suffix-index build):\n"
                     "the drafts of draft-kind suffix, or a third source of a DSpark drafter's copy head where prompt\n"
                     "lookup has no match (docs/SPECULATION.md, \"Retrieval drafting\")",
     [](const SpecConfig& c) { return c.suffix_index; },
     [](SpecConfig* c, const std::string& v) {
       if (v.empty()) return Status::error("needs a path");
       c->suffix_index = v;
       return Status::ok();
     }},
    {"suffix-min-prob", "with suffix-index: an index draft grows while the share of the matched context's\n"
                        "occurrences that continue with the whole draft so far is at least this, in [0, 1]",
     [](const SpecConfig& c) { return fmt_double(c.suffix_min_prob); },
     [](SpecConfig* c, const std::string& v) { return parse_unit(v, &c->suffix_min_prob); }},
    {"draft-tree", "draft-kind suffix, greedy: besides its chain, verify up to this many alternative branches\n"
                   "from the index in the same forward (a token tree), each kept only where the verify-cost\n"
                   "table says it pays; 0 = a chain",
     [](const SpecConfig& c) { return std::to_string(c.tree); },
     [](SpecConfig* c, const std::string& v) { return parse_count(v, kMaxTreeWidth, &c->tree); }},
};

}  // namespace

std::span<const SpecKey> spec_keys() { return kKeys; }

const char* schedule_name(DraftSchedule s) { return kScheduleNames[(size_t)s]; }
const char* copy_mode_name(CopyMode m) { return kCopyModeNames[(size_t)m]; }
const char* draft_quant_name(DraftQuant q) { return kDraftQuantNames[(size_t)q]; }
Status parse_schedule(const std::string& v, DraftSchedule* out) { return parse_named(v, kScheduleNames, out); }
Status parse_copy_mode(const std::string& v, CopyMode* out) { return parse_named(v, kCopyModeNames, out); }
Status parse_draft_quant(const std::string& v, DraftQuant* out) { return parse_named(v, kDraftQuantNames, out); }

int copy_bits_of_quant(DraftQuant quant) { return quant == DraftQuant::kInt8 ? 8 : quant == DraftQuant::kInt4 ? 4 : 0; }

Status set_spec_key(SpecConfig* c, const std::string& key, const std::string& value) {
  for (const SpecKey& k : kKeys) {
    if (key != k.name) continue;
    if (Status st = k.set(c, value); !st) return Status::error(key + ": " + st.message());
    return Status::ok();
  }
  std::string names;
  for (const SpecKey& k : kKeys) {
    if (!names.empty()) names += ", ";
    names += k.name;
  }
  return Status::error("unknown key '" + key + "' (" + names + ")");
}

Result<SpecConfig> parse_spec(const std::string& text, SpecConfig base) {
  if (text.empty()) return Status::error("empty spec (key=value,...)");
  std::vector<std::string> seen;
  for (size_t from = 0; from <= text.size();) {  // every comma-separated item, empty ones included
    size_t to = text.find(',', from);
    if (to == std::string::npos) to = text.size();
    const std::string item = text.substr(from, to - from);
    from = to + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return Status::error("'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    for (const std::string& s : seen)
      if (s == key) return Status::error(key + " given twice");
    seen.push_back(key);
    DSPARK_RETURN_IF_ERROR(set_spec_key(&base, key, item.substr(eq + 1)));
  }
  return base;
}

Status check_spec(const SpecConfig& c) {
  const bool suffix = c.kind == "suffix" || (c.kind == "auto" && c.model.empty() && !c.suffix_index.empty());
  if (c.kind == "auto" && c.model.empty() && !suffix)
    return Status::error("draft-kind auto needs draft-model=PATH (or draft-kind ngram, or suffix-index=PATH)");
  if ((c.kind == "ngram" || suffix) && !c.model.empty())
    return Status::error("draft-kind " + std::string(suffix ? "suffix" : "ngram") + " takes no draft-model");
  if (suffix && c.suffix_index.empty()) return Status::error("draft-kind suffix needs suffix-index=PATH");
  // A DSpark drafter takes an index as its copy head's third source; auto with a model may resolve to
  // dspark (the drafter factory rejects an index for any other kind it resolves to).
  const bool index_ok = suffix || c.kind == "dspark" || (c.kind == "auto" && !c.model.empty());
  if (!index_ok && !c.suffix_index.empty())
    return Status::error("suffix-index is for draft-kind suffix or dspark only");
  if (c.suffix_index.empty() && c.suffix_min_prob != kDefaultSuffixMinProb)
    return Status::error("suffix-min-prob goes with suffix-index");
  if ((c.kind == "draft-model" || c.kind == "dspark") && c.model.empty())
    return Status::error("draft-kind " + c.kind + " needs draft-model=PATH");
  if (c.tree > 0 && !suffix) return Status::error("draft-tree goes with draft-kind suffix (its index proposes the branches)");
  return Status::ok();
}

}  // namespace dspark::speculative
