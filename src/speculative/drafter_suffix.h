// Retrieval drafter (draft-kind suffix): prompt lookup in the request's own context first, as the
// ngram drafter does; where that has no match of kLookupMinMatch or more tokens, the answers already
// served (speculative/answer_cache.h, when serve attaches one), then the most frequent continuation in a
// suffix index over the target's own answers (speculative/suffix_index.h); where none matches, lookup's
// one-token match. No weights; greedy (q is one-hot).
#pragma once

#include <memory>

#include "speculative/drafter.h"
#include "speculative/drafter_ngram.h"
#include "speculative/suffix_index.h"

namespace dspark::speculative {

struct SuffixDrafterConfig {
  static constexpr int kLookupMinMatch = 2;  // a shorter own-context match yields to the index
  int lookup_max_ngram = 3;                  // as the ngram drafter
  SuffixQueryConfig query;
  // Token trees (greedy rounds that can verify one): besides the chain, up to tree_width branches
  // from the index whose first token differs from the chain's, each at most branch_len tokens.
  int tree_width = 0;
  int branch_len = 2;
  // A token's estimated probability of being taken, where the index gives none (the chain came from
  // the request's own context): per token, compounded along the chain. A lookup of 2-3 tokens was
  // right 85 % of the time on SmolLM2's own answers, a 1-token one about half as often (issue #37's
  // simulation); the answer cache's copies by its own prior.
  static constexpr float kLookupShare = 0.85f, kLookupOneShare = 0.4f, kCacheShare = 0.75f;
  // Sure drafts (Drafter::sure_drafts): a copy whose class prior is at least Drafter::kSureAcceptance,
  // cut to the longest prefix whose tokens are all taken with probability >= kSureChainFloor when each
  // is taken at the prior (a lookup agreeing for 10+ tokens: 13 tokens; one agreeing for 6-9: 3).
  static constexpr double kSureChainFloor = 0.5;
};

// Which source a draft came from (stats(), and the pure function below for tests).
enum class SuffixSource { kNone, kLookup, kIndex, kLookupOne, kCache };

// What a draft's source saw, beside its tokens: what its class is made of.
struct SuffixDraftInfo {
  int match = 0;        // lookup: tokens that agree before the continuation (NgramMatch::extent, capped)
  int context_len = 0;  // index: tokens of the matched context suffix
  double share = 0;     // index: the share of the context's occurrences that continue with the first token
};

// One round's proposal for `seq` (the committed history + pending token): the source it used and
// at most max_n tokens. `answers` and `info` may be null. `copies_only`: a lookup of kLookupMinMatch
// or more tokens or the answer cache, else none (no index query).
SuffixSource suffix_draft(std::span<const int32_t> seq, const SuffixIndex& index, const SuffixDrafterConfig& cfg,
                          int max_n, std::vector<int32_t>* out, const AnswerCache* answers = nullptr,
                          SuffixDraftInfo* info = nullptr, bool copies_only = false);

// Draft classes (Drafter::class_priors), by source and what it saw. A lookup is likelier right the
// longer its match agrees; an index draft, the larger its first token's share and the longer the
// context it matched.
enum class SuffixClass : uint8_t {
  kLookupOne,     // a 1-token match
  kLookup2,       // 2 tokens
  kLookup3,       // 3 tokens
  kLookup4,       // 4-5
  kLookup6,       // 6-9
  kLookup10,      // 10 or more (kLookupExtentCap)
  kCache,         // answers already served
  kIndexLow,      // share < 0.3
  kIndexMid,      // share < 0.6
  kIndexHigh2,    // share >= 0.6, context of 2-3 tokens
  kIndexHigh4,    // 4
  kIndexHigh5,    // 5 or more
  kCount
};
inline constexpr int kLookupExtentCap = 10;
int suffix_class(SuffixSource source, const SuffixDraftInfo& info);  // -1 for kNone
// Per class, a token's acceptance given the tokens before it were accepted, before the governor has
// seen any: the first slot's, which is the lowest, as `dspark_suffix_replay` (bench/suffix_replay.cpp)
// measured it on SmolLM2-135M-Instruct's greedy answers to 338 training prompts (prompt index % 50 ==
// 25; 46,099 positions) with the index built from the other 19,374 answers. The answer cache's prior
// is kCacheShare. The governor learns each class's own acceptance, slot by slot, from there.
inline constexpr double kSuffixClassPriors[(int)SuffixClass::kCount] = {
    0.35, 0.53, 0.63, 0.70, 0.80, 0.95, SuffixDrafterConfig::kCacheShare, 0.14, 0.31, 0.42, 0.59, 0.74};
// How many of a class-`cls` draft's `d` tokens a sure draft keeps (SuffixDrafterConfig::kSureChainFloor);
// 0 for a class that is never sure.
int suffix_sure_tokens(int cls, int d);

class SuffixDrafter : public LookupDrafterBase {
 public:
  SuffixDrafter(std::shared_ptr<const SuffixIndex> index, SuffixDrafterConfig cfg = {})
      : index_(std::move(index)), cfg_(cfg) {}
  std::string kind() const override { return "suffix"; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<SuffixDrafter>(index_, cfg_); }
  // Per source: rounds, tokens proposed and accepted: {"lookup": {"rounds", "tokens", "accepted"}, "index": ...,
  // "lookup1": ..., "none": ..., "cache": ...}.
  nlohmann::json stats() const override;
  // Its SuffixClass priors; none when configured for token trees (their branches carry their own
  // estimates, DraftResult::confidence).
  std::vector<double> class_priors() const override;
  // Copies it is sure of (suffix_sure_tokens): long lookups of the request's own text and the answers
  // already served. Not when configured for token trees (no classes then).
  bool sure_drafts() const override { return cfg_.tree_width <= 0; }

 protected:
  void propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) override;
  void propose_sure(std::span<const int32_t> seq, int min_n, int max_n, std::vector<int32_t>* out) override;
  void on_commit(int64_t accepted) override;
  void branch(std::span<const int32_t> seq, int max_n, DraftResult* out) override;
  int last_class() const override { return last_class_; }

 private:
  std::shared_ptr<const SuffixIndex> index_;
  SuffixDrafterConfig cfg_;
  static constexpr int kSources = 5;
  int64_t rounds_[kSources] = {}, tokens_[kSources] = {}, accepted_[kSources] = {};  // per SuffixSource
  SuffixSource last_ = SuffixSource::kNone;  // the source of the draft the next commit settles
  int last_class_ = -1;                      // its class
};

}  // namespace dspark::speculative
