#include "speculative/drafter_ngram.h"

#include <algorithm>

#include "speculative/answer_cache.h"

namespace dspark::speculative {

NgramMatch ngram_match(std::span<const int32_t> seq, const NgramConfig& cfg, int extent_cap) {
  const int64_t len = (int64_t)seq.size();
  for (int n = (int)std::min<int64_t>(cfg.max_ngram, len - 1); n >= cfg.min_ngram; --n) {
    const int32_t* suffix = seq.data() + len - n;
    // Latest start s < len - n whose n tokens equal the suffix.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(suffix, suffix + n, seq.data() + s)) continue;
      int extent = n;  // seq[s - 1 - k] against seq[len - n - 1 - k]
      while (extent < extent_cap && s - 1 - (extent - n) >= 0 && seq[s - 1 - (extent - n)] == seq[len - 1 - extent])
        ++extent;
      return {s + n, n, extent};
    }
  }
  return {};
}

std::vector<int32_t> ngram_continuation(std::span<const int32_t> seq, const NgramMatch& m, int max_n) {
  if (m.from < 0) return {};
  const int64_t to = std::min<int64_t>((int64_t)seq.size(), m.from + max_n);
  return std::vector<int32_t>(seq.begin() + m.from, seq.begin() + to);
}

std::vector<int32_t> ngram_lookup(std::span<const int32_t> seq, const NgramConfig& cfg, int max_n) {
  return ngram_continuation(seq, ngram_match(seq, cfg), max_n);
}

Status LookupDrafterBase::begin(std::span<const int32_t> prompt, const TapRows&) {
  history_.assign(prompt.begin(), prompt.end());
  return Status::ok();
}

Status LookupDrafterBase::draft(const DraftRequest& req, DraftResult* out) {
  out->clear();
  if (req.max_n <= 0) return Status::ok();
  history_.push_back(req.pending);  // temporarily: the lookup runs over history + pending
  greedy_ = req.sampler.temperature <= 0;
  if (req.sure_only) {
    if (greedy_) propose_sure(history_, req.sure_min, req.max_n, &out->tokens);
  } else {
    propose(history_, req.max_n, &out->tokens);
  }
  if (!out->tokens.empty()) out->draft_class = last_class();
  if (req.tree_ok && !req.sure_only && greedy_ && !out->tokens.empty()) branch(history_, req.max_n, out);
  history_.pop_back();
  if (req.sampler.temperature > 0)
    for (int32_t t : out->tokens) out->q.push_back({{t, 1.0f}});
  return Status::ok();
}

Status LookupDrafterBase::commit(std::span<const int32_t> committed, int64_t pos, const TapRows&) {
  if (pos != (int64_t)history_.size()) return Status::error(kind() + " drafter: commit at an unexpected position");
  history_.insert(history_.end(), committed.begin(), committed.end());
  if (!committed.empty()) on_commit((int64_t)committed.size() - 1);  // the pending token + accepted drafts
  return Status::ok();
}

void NgramDrafter::propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) {
  last_from_cache_ = false;
  if (!answers_ || !greedy_) {
    *out = ngram_lookup(seq, cfg_, max_n);
    return;
  }
  // The same lookup as without a cache, with the cache between its matches of >= 2 tokens and 1.
  const int split = std::max(cfg_.min_ngram, 2);
  *out = ngram_lookup(seq, {.max_ngram = cfg_.max_ngram, .min_ngram = split}, max_n);
  if (!out->empty()) return;
  if (answers_->propose(seq, max_n, out) > 0) {
    last_from_cache_ = true;
    ++cache_rounds_;
    cache_tokens_ += (int64_t)out->size();
    return;
  }
  if (cfg_.min_ngram < split)
    *out = ngram_lookup(seq, {.max_ngram = std::min(cfg_.max_ngram, split - 1), .min_ngram = cfg_.min_ngram}, max_n);
}

void NgramDrafter::on_commit(int64_t accepted) {
  if (last_from_cache_) cache_accepted_ += accepted;
  last_from_cache_ = false;
}

nlohmann::json NgramDrafter::stats() const {
  if (!answers_) return nlohmann::json::object();
  return {{"answer_cache", {{"rounds", cache_rounds_}, {"tokens", cache_tokens_}, {"accepted", cache_accepted_}}}};
}

}  // namespace dspark::speculative
