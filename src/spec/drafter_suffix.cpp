#include "spec/drafter_suffix.h"

namespace dspark::spec {

SuffixSource suffix_draft(std::span<const int32_t> seq, const SuffixIndex& index, const SuffixDrafterConfig& cfg,
                          int max_n, std::vector<int32_t>* out) {
  out->clear();
  if (max_n <= 0) return SuffixSource::kNone;
  *out = ngram_lookup(seq, {.max_ngram = cfg.lookup_max_ngram, .min_ngram = SuffixDrafterConfig::kLookupMinMatch},
                      max_n);
  if (!out->empty()) return SuffixSource::kLookup;
  *out = index.propose(seq, cfg.query, max_n).tokens;
  if (!out->empty()) return SuffixSource::kIndex;
  *out = ngram_lookup(seq, {.max_ngram = 1, .min_ngram = 1}, max_n);
  return out->empty() ? SuffixSource::kNone : SuffixSource::kLookupOne;
}

Status SuffixDrafter::begin(std::span<const int32_t> prompt, const TapRows&) {
  history_.assign(prompt.begin(), prompt.end());
  return Status::ok();
}

Status SuffixDrafter::draft(const DraftRequest& req, DraftResult* out) {
  out->clear();
  history_.push_back(req.pending);  // temporarily: the lookup runs over history + pending
  const SuffixSource src = suffix_draft(history_, *index_, cfg_, req.max_n, &out->tokens);
  history_.pop_back();
  last_ = src;
  ++rounds_[(int)src];
  tokens_[(int)src] += (int64_t)out->tokens.size();
  if (req.sampler.temperature > 0)
    for (int32_t t : out->tokens) out->q.push_back({{t, 1.0f}});
  return Status::ok();
}

Status SuffixDrafter::commit(std::span<const int32_t> committed, int64_t pos, const TapRows&) {
  if (pos != (int64_t)history_.size()) return Status::error("suffix drafter: commit at an unexpected position");
  history_.insert(history_.end(), committed.begin(), committed.end());
  if (!committed.empty()) accepted_[(int)last_] += (int64_t)committed.size() - 1;  // pending + accepted drafts
  last_ = SuffixSource::kNone;
  return Status::ok();
}

nlohmann::json SuffixDrafter::stats() const {
  nlohmann::json j = nlohmann::json::object();
  const char* names[kSources] = {"none", "lookup", "index", "lookup1"};
  for (int s = 0; s < kSources; ++s)
    j[names[s]] = {{"rounds", rounds_[s]}, {"tokens", tokens_[s]}, {"accepted", accepted_[s]}};
  return j;
}

}  // namespace dspark::spec
