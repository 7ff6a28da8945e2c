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
