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
};

// Which source a draft came from (stats(), and the pure function below for tests).
enum class SuffixSource { kNone, kLookup, kIndex, kLookupOne, kCache };

// One round's proposal for `seq` (the committed history + pending token): the source it used and
// at most max_n tokens. `answers` may be null.
SuffixSource suffix_draft(std::span<const int32_t> seq, const SuffixIndex& index, const SuffixDrafterConfig& cfg,
                          int max_n, std::vector<int32_t>* out, const AnswerCache* answers = nullptr);

class SuffixDrafter : public LookupDrafterBase {
 public:
  SuffixDrafter(std::shared_ptr<const SuffixIndex> index, SuffixDrafterConfig cfg = {})
      : index_(std::move(index)), cfg_(cfg) {}
  std::string kind() const override { return "suffix"; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<SuffixDrafter>(index_, cfg_); }
  // Per source: rounds, tokens proposed and accepted: {"lookup": {"rounds", "tokens", "accepted"}, "index": ...,
  // "lookup1": ..., "none": ..., "cache": ...}.
  nlohmann::json stats() const override;

 protected:
  void propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) override;
  void on_commit(int64_t accepted) override;
  void branch(std::span<const int32_t> seq, int max_n, DraftResult* out) override;

 private:
  std::shared_ptr<const SuffixIndex> index_;
  SuffixDrafterConfig cfg_;
  static constexpr int kSources = 5;
  int64_t rounds_[kSources] = {}, tokens_[kSources] = {}, accepted_[kSources] = {};  // per SuffixSource
  SuffixSource last_ = SuffixSource::kNone;  // the source of the draft the next commit settles
};

}  // namespace dspark::speculative
