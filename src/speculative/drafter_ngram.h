// Prompt-lookup drafter: proposes the continuation of the most recent earlier occurrence of the
// last n tokens (n = max_ngram down to min_ngram) of the committed history + pending token.
// No weights; greedy (q is one-hot).
#pragma once

#include "speculative/drafter.h"

namespace dspark::speculative {

struct NgramConfig {
  int max_ngram = 3;
  int min_ngram = 1;
};

// Pure matcher, exposed for tests: the continuation (up to max_n tokens) of the latest earlier
// match of the suffix of `seq` of length n, trying n = max_ngram..min_ngram; empty if none.
std::vector<int32_t> ngram_lookup(std::span<const int32_t> seq, const NgramConfig& cfg, int max_n);

// The match ngram_lookup continues: its continuation starts at seq[from] (from = -1: no match) and
// its n tokens equal seq's last n. `extent`: how many tokens agree going back from there, n
// included, counted up to extent_cap (n when extent_cap <= n): a longer agreement, a likelier copy.
struct NgramMatch {
  int64_t from = -1;
  int n = 0;
  int extent = 0;
};
NgramMatch ngram_match(std::span<const int32_t> seq, const NgramConfig& cfg, int extent_cap = 0);
// A match's continuation in seq, at most max_n tokens (none for no match).
std::vector<int32_t> ngram_continuation(std::span<const int32_t> seq, const NgramMatch& m, int max_n);

// The round protocol of a weightless drafter (ngram, suffix) around a pure proposer: keeps the
// committed history, proposes from history + pending, one-hot q at T > 0.
class LookupDrafterBase : public Drafter {
 public:
  Status begin(std::span<const int32_t> prompt, const TapRows& taps) override;
  Status draft(const DraftRequest& req, DraftResult* out) override;
  Status commit(std::span<const int32_t> committed, int64_t pos, const TapRows& taps) override;
  void use_answer_cache(const AnswerCache* cache) override { answers_ = cache; }

 protected:
  // At most max_n proposals for the positions after seq (= history + pending).
  virtual void propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) = 0;
  // The last draft's round committed `accepted` of its tokens (after the pending one).
  virtual void on_commit(int64_t accepted) {}
  // The class of the draft propose() just made (Drafter::class_priors), -1: none.
  virtual int last_class() const { return -1; }
  // A sure draft (DraftRequest::sure_only, greedy): more than min_n and at most max_n tokens the
  // drafter is sure of, or none; a drafter whose sure_drafts() is true overrides it. Default: none.
  virtual void propose_sure(std::span<const int32_t> seq, int min_n, int max_n, std::vector<int32_t>* out) {
    (void)seq, (void)min_n, (void)max_n;
    out->clear();
  }
  // A round that can verify a token tree (DraftRequest::tree_ok, greedy): `out` holds propose()'s
  // chain; a drafter configured for trees adds branches (DraftResult::parent). Default: none.
  virtual void branch(std::span<const int32_t> seq, int max_n, DraftResult* out) { (void)seq, (void)max_n, (void)out; }

  const AnswerCache* answers_ = nullptr;  // answers already served (use_answer_cache), or none
  bool greedy_ = true;                    // the draft in progress is greedy (the cache serves greedy ones only)

 private:
  std::vector<int32_t> history_;  // committed tokens [0, P)
};

// With an answer cache, lookups of 2 or more tokens come first, then the cache, then shorter lookups.
class NgramDrafter : public LookupDrafterBase {
 public:
  explicit NgramDrafter(NgramConfig cfg = {}) : cfg_(cfg) {}
  std::string kind() const override { return "ngram"; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<NgramDrafter>(cfg_); }
  // With an answer cache: {"answer_cache": {"rounds", "tokens", "accepted"}} of its drafts; else {}.
  nlohmann::json stats() const override;

 protected:
  void propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) override;
  void on_commit(int64_t accepted) override;

 private:
  NgramConfig cfg_;
  bool last_from_cache_ = false;
  int64_t cache_rounds_ = 0, cache_tokens_ = 0, cache_accepted_ = 0;
};

}  // namespace dspark::speculative
