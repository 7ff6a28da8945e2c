#include "speculative/drafter_suffix.h"

#include "speculative/answer_cache.h"

namespace dspark::speculative {

SuffixSource suffix_draft(std::span<const int32_t> seq, const SuffixIndex& index, const SuffixDrafterConfig& cfg,
                          int max_n, std::vector<int32_t>* out, const AnswerCache* answers) {
  out->clear();
  if (max_n <= 0) return SuffixSource::kNone;
  *out = ngram_lookup(seq, {.max_ngram = cfg.lookup_max_ngram, .min_ngram = SuffixDrafterConfig::kLookupMinMatch},
                      max_n);
  if (!out->empty()) return SuffixSource::kLookup;
  if (answers && answers->propose(seq, max_n, out) > 0) return SuffixSource::kCache;
  *out = index.propose(seq, cfg.query, max_n).tokens;
  if (!out->empty()) return SuffixSource::kIndex;
  *out = ngram_lookup(seq, {.max_ngram = 1, .min_ngram = 1}, max_n);
  return out->empty() ? SuffixSource::kNone : SuffixSource::kLookupOne;
}

void SuffixDrafter::propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) {
  last_ = suffix_draft(seq, *index_, cfg_, max_n, out, greedy_ ? answers_ : nullptr);
  ++rounds_[(int)last_];
  tokens_[(int)last_] += (int64_t)out->size();
}

void SuffixDrafter::branch(std::span<const int32_t> seq, int max_n, DraftResult* out) {
  if (cfg_.tree_width <= 0) return;
  const SuffixBranches b = index_->propose_branches(seq, cfg_.query, max_n, cfg_.tree_width + 1);
  const int d = (int)out->tokens.size();
  // The chain's estimates: the index's shares where the chain is its proposal, else the priors.
  const bool from_index = last_ == SuffixSource::kIndex && !b.empty() && b[0].tokens.size() >= (size_t)d;
  const float share = last_ == SuffixSource::kLookupOne ? SuffixDrafterConfig::kLookupOneShare
                      : last_ == SuffixSource::kCache   ? SuffixDrafterConfig::kCacheShare
                                                        : SuffixDrafterConfig::kLookupShare;
  out->chain = d;
  float p = 1.0f;
  for (int k = 0; k < d; ++k) {
    out->parent.push_back(k - 1);
    p *= share;
    out->confidence.push_back(from_index ? (float)b[0].support[(size_t)k] / (float)b[0].context_count : p);
  }
  int added = 0;
  for (const SuffixProposal& alt : b) {
    if (added == cfg_.tree_width) break;
    if (alt.tokens.empty() || alt.tokens[0] == out->tokens[0]) continue;
    const int len = std::min<int>((int)alt.tokens.size(), cfg_.branch_len);
    for (int k = 0; k < len; ++k) {
      out->parent.push_back(k == 0 ? -1 : (int32_t)out->tokens.size() - 1);
      out->tokens.push_back(alt.tokens[(size_t)k]);
      out->confidence.push_back((float)alt.support[(size_t)k] / (float)alt.context_count);
    }
    ++added;
  }
  if (added == 0) {  // a chain after all
    out->parent.clear();
    out->confidence.clear();
    out->chain = 0;
  }
}

void SuffixDrafter::on_commit(int64_t accepted) {
  accepted_[(int)last_] += accepted;
  last_ = SuffixSource::kNone;  // a plain round (no draft) commits nothing of any source
}

nlohmann::json SuffixDrafter::stats() const {
  nlohmann::json j = nlohmann::json::object();
  const char* names[kSources] = {"none", "lookup", "index", "lookup1", "cache"};
  for (int s = 0; s < kSources; ++s) {
    if (s == (int)SuffixSource::kCache && !answers_) continue;
    j[names[s]] = {{"rounds", rounds_[s]}, {"tokens", tokens_[s]}, {"accepted", accepted_[s]}};
  }
  return j;
}

}  // namespace dspark::speculative
