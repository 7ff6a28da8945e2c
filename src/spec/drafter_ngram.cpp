#include "spec/drafter_ngram.h"

#include <algorithm>

namespace dspark::spec {

std::vector<int32_t> ngram_lookup(std::span<const int32_t> seq, const NgramConfig& cfg, int max_n) {
  const int64_t len = (int64_t)seq.size();
  for (int n = std::min<int64_t>(cfg.max_ngram, len - 1); n >= cfg.min_ngram; --n) {
    const int32_t* suffix = seq.data() + len - n;
    // Latest start s < len - n whose n tokens equal the suffix.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(suffix, suffix + n, seq.data() + s)) continue;
      const int64_t from = s + n, to = std::min<int64_t>(len, from + max_n);
      return std::vector<int32_t>(seq.begin() + from, seq.begin() + to);
    }
  }
  return {};
}

Status LookupDrafterBase::begin(std::span<const int32_t> prompt, const TapRows&) {
  history_.assign(prompt.begin(), prompt.end());
  return Status::ok();
}

Status LookupDrafterBase::draft(const DraftRequest& req, DraftResult* out) {
  out->clear();
  if (req.max_n <= 0) return Status::ok();
  history_.push_back(req.pending);  // temporarily: the lookup runs over history + pending
  propose(history_, req.max_n, &out->tokens);
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

}  // namespace dspark::spec
