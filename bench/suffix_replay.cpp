// dspark_suffix_replay: how often the suffix drafter's drafts would be taken, by draft class, on
// answers it has not indexed. Where speculative::kSuffixClassPriors come from.
//
// From regen token-id files (the target's own answers to the training prompts, the shipped
// default's data/regen-ids): the sequences whose prompt index i has i % every == offset are held
// out; a suffix index is built over the answers of all the others (answers only, as the shipped
// index); then at every position of every held-out greedy answer the suffix drafter drafts exactly
// as in generation (speculative::suffix_draft: prompt lookup in the prompt and the answer so far,
// else the index, else a 1-token lookup) up to --max-n tokens, and the draft is compared with the
// answer, which is the target's own greedy continuation (T 0). Printed per class (SuffixClass):
// drafts, and per slot k the share of drafts whose slot k was accepted given slots < k were.
// No model is loaded: nothing here runs the target.
//
//   build/release/bench/dspark_suffix_replay data/regen-ids/smollm2-135m-v1.ids.safetensors.xz
//       data/regen-ids/smollm2-135m-v2.ids.safetensors.xz [--every 50] [--offset 25] [--max-n 8] [--json]
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "speculative/drafter_suffix.h"
#include "speculative/suffix_index.h"
#include "tools/suffix_index_build.h"

namespace sp = dspark::speculative;

namespace {

constexpr const char* kClassNames[(int)sp::SuffixClass::kCount] = {
    "lookup1", "lookup2", "lookup3", "lookup4-5", "lookup6-9", "lookup10+",
    "cache",   "index_low", "index_mid", "index_high_ctx2-3", "index_high_ctx4", "index_high_ctx5+"};

int usage(const char* why) {
  std::fprintf(stderr,
               "dspark_suffix_replay: %s\n"
               "usage: dspark_suffix_replay IDS_FILE... [--every N] [--offset K] [--max-n N] [--json]\n",
               why);
  return 2;
}

bool parse_int(const char* s, int lo, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!end || *end || v < lo || v > 1 << 20) return false;
  *out = (int)v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  int every = 50, offset = 25, max_n = 8;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--every" || a == "--offset" || a == "--max-n") {
      if (i + 1 >= argc) return usage((a + " needs a value").c_str());
      int* dst = a == "--every" ? &every : a == "--offset" ? &offset : &max_n;
      if (!parse_int(argv[++i], a == "--offset" ? 0 : 1, dst)) return usage((a + ": not a valid number").c_str());
    } else if (a == "--help" || a == "-h") {
      std::printf("dspark_suffix_replay IDS_FILE... [--every N] [--offset K] [--max-n N] [--json]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown flag " + a).c_str());
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) return usage("needs at least one ids file");
  if (offset >= every) return usage("--offset must be below --every");

  // Held-out greedy sequences; every other sequence's answer goes into the index.
  std::vector<dspark::train::IdsSeq> held;
  std::vector<int32_t> stream;
  size_t n_indexed = 0;
  for (const std::string& p : paths) {
    auto f = dspark::tools::read_ids_any(p, INT32_MAX);
    if (!f) {
      std::fprintf(stderr, "dspark_suffix_replay: %s\n", f.message().c_str());
      return 2;
    }
    for (dspark::train::IdsSeq& s : f->seqs) {
      if (s.prompt_index % every == offset) {
        if (s.temperature == 0.0f) held.push_back(std::move(s));
        continue;
      }
      stream.insert(stream.end(), s.tokens.begin() + s.prompt_len, s.tokens.end());
      stream.push_back(sp::kSuffixSeparator);
      ++n_indexed;
    }
  }
  if (held.empty() || stream.empty()) return usage("no held-out greedy sequence, or nothing left to index");
  std::vector<uint32_t> sa = sp::build_suffix_array(stream);
  const std::shared_ptr<const sp::SuffixIndex> index = sp::SuffixIndex::from_arrays(std::move(stream), std::move(sa));

  // [class][slot]: drafts whose slot k (1-based) was drafted with slots < k accepted, and of them accepted.
  constexpr int kClasses = (int)sp::SuffixClass::kCount;
  std::vector<std::vector<int64_t>> reached(kClasses, std::vector<int64_t>(max_n + 1)), taken = reached;
  int64_t positions = 0, none = 0;
  const sp::SuffixDrafterConfig cfg;
  std::vector<int32_t> draft;
  for (const dspark::train::IdsSeq& s : held) {
    const std::span<const int32_t> seq(s.tokens);
    // Position p is the pending token; the draft proposes seq[p + 1 ..].
    for (size_t p = (size_t)s.prompt_len - 1; p + 1 < seq.size(); ++p) {
      sp::SuffixDraftInfo info;
      const sp::SuffixSource src = sp::suffix_draft(seq.first(p + 1), *index, cfg, max_n, &draft, nullptr, &info);
      ++positions;
      const int c = sp::suffix_class(src, info);
      if (c < 0) {
        ++none;
        continue;
      }
      for (size_t k = 0; k < draft.size(); ++k) {
        ++reached[(size_t)c][k + 1];
        if (p + 1 + k >= seq.size() || draft[k] != seq[p + 1 + k]) break;
        ++taken[(size_t)c][k + 1];
      }
    }
  }

  nlohmann::json out = {{"held_out_sequences", held.size()}, {"indexed_sequences", n_indexed},
                        {"positions", positions}, {"no_draft", none}, {"every", every}, {"offset", offset},
                        {"max_n", max_n}, {"classes", nlohmann::json::object()}};
  for (int c = 0; c < kClasses; ++c) {
    nlohmann::json slots = nlohmann::json::array();
    for (int k = 1; k <= max_n && reached[(size_t)c][(size_t)k] > 0; ++k)
      slots.push_back((double)taken[(size_t)c][(size_t)k] / (double)reached[(size_t)c][(size_t)k]);
    out["classes"][kClassNames[c]] = {{"drafts", reached[(size_t)c][1]}, {"accepted_by_slot", slots}};
  }
  if (json) {
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("%zu held-out greedy answers (prompt index %% %d == %d), %zu answers indexed, %lld positions "
              "(%lld without a draft)\n",
              held.size(), every, offset, n_indexed, (long long)positions, (long long)none);
  std::printf("%-20s %8s  acceptance by slot, given the slots before it were accepted\n", "class", "drafts");
  for (int c = 0; c < kClasses; ++c) {
    std::printf("%-20s %8lld ", kClassNames[c], (long long)reached[(size_t)c][1]);
    for (const auto& v : out["classes"][kClassNames[c]]["accepted_by_slot"]) std::printf(" %.2f", v.get<double>());
    std::printf("\n");
  }
  return 0;
}
