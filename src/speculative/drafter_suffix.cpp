#include "speculative/drafter_suffix.h"

#include "speculative/answer_cache.h"

namespace dspark::speculative {

SuffixSource suffix_draft(std::span<const int32_t> seq, const SuffixIndex& index, const SuffixDrafterConfig& cfg,
                          int max_n, std::vector<int32_t>* out, const AnswerCache* answers, SuffixDraftInfo* info,
                          bool copies_only) {
  out->clear();
  SuffixDraftInfo scratch;
  if (!info) info = &scratch;
  *info = {};
  if (max_n <= 0) return SuffixSource::kNone;
  const NgramConfig lookup{.max_ngram = cfg.lookup_max_ngram, .min_ngram = SuffixDrafterConfig::kLookupMinMatch};
  if (const NgramMatch m = ngram_match(seq, lookup, kLookupExtentCap); m.from >= 0) {
    *out = ngram_continuation(seq, m, max_n);
    info->match = m.extent;
    return SuffixSource::kLookup;
  }
  if (answers && answers->propose(seq, max_n, out) > 0) return SuffixSource::kCache;
  if (copies_only) return SuffixSource::kNone;
  const SuffixProposal p = index.propose(seq, cfg.query, max_n);
  if (!p.tokens.empty()) {
    *out = p.tokens;
    info->context_len = p.context_len;
    info->share = p.context_count > 0 ? (double)p.support[0] / (double)p.context_count : 0.0;
    return SuffixSource::kIndex;
  }
  if (const NgramMatch m = ngram_match(seq, {.max_ngram = 1, .min_ngram = 1}); m.from >= 0) {
    *out = ngram_continuation(seq, m, max_n);
    info->match = 1;
    return SuffixSource::kLookupOne;
  }
  return SuffixSource::kNone;
}

int suffix_class(SuffixSource source, const SuffixDraftInfo& info) {
  using C = SuffixClass;
  C c;
  switch (source) {
    case SuffixSource::kNone: return -1;
    case SuffixSource::kLookupOne: c = C::kLookupOne; break;
    case SuffixSource::kCache: c = C::kCache; break;
    case SuffixSource::kLookup:
      c = info.match >= kLookupExtentCap ? C::kLookup10 : info.match >= 6 ? C::kLookup6 : info.match >= 4 ? C::kLookup4
          : info.match >= 3 ? C::kLookup3 : C::kLookup2;
      break;
    case SuffixSource::kIndex:
      c = info.share < 0.3 ? C::kIndexLow : info.share < 0.6 ? C::kIndexMid : info.context_len >= 5 ? C::kIndexHigh5
          : info.context_len >= 4 ? C::kIndexHigh4 : C::kIndexHigh2;
      break;
    default: return -1;
  }
  return (int)c;
}

int suffix_sure_tokens(int cls, int d) {
  if (cls < 0 || cls >= (int)SuffixClass::kCount) return 0;
  const double p = kSuffixClassPriors[cls];
  if (p < Drafter::kSureAcceptance) return 0;
  int k = 0;
  for (double chain = p; k < d && chain >= SuffixDrafterConfig::kSureChainFloor; chain *= p) ++k;
  return k;
}

// A batch gate's plain round (or a plain decision) still takes a copy this likely to be accepted: the
// gate weighs all drafts of the batch together and would otherwise hold these too.
void SuffixDrafter::propose_sure(std::span<const int32_t> seq, int min_n, int max_n, std::vector<int32_t>* out) {
  SuffixDraftInfo info;
  const SuffixSource source = suffix_draft(seq, *index_, cfg_, max_n, out, answers_, &info, /*copies_only=*/true);
  const int cls = suffix_class(source, info);
  int keep = suffix_sure_tokens(cls, (int)out->size());
  if (keep <= min_n) keep = 0;  // not taken: the round drafts as decided (propose() runs next), no trace here
  out->resize((size_t)keep);
  if (keep == 0) return;
  last_ = source;
  last_class_ = cls;
  ++rounds_[(int)last_];
  tokens_[(int)last_] += keep;
}

void SuffixDrafter::propose(std::span<const int32_t> seq, int max_n, std::vector<int32_t>* out) {
  SuffixDraftInfo info;
  last_ = suffix_draft(seq, *index_, cfg_, max_n, out, greedy_ ? answers_ : nullptr, &info);
  last_class_ = suffix_class(last_, info);
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

std::vector<double> SuffixDrafter::class_priors() const {
  if (cfg_.tree_width > 0) return {};
  return std::vector<double>(std::begin(kSuffixClassPriors), std::end(kSuffixClassPriors));
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
