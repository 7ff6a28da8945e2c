#include "dspark/copy_head.h"

#include <algorithm>

namespace dspark::net {

CopyHead::CopyHead(CopyHeadConfig cfg) : cfg_(cfg) {
  cfg_.max_ngram = std::max(cfg_.max_ngram, 1);
  cfg_.min_ngram = std::clamp(cfg_.min_ngram, 1, cfg_.max_ngram);
  const size_t lookup_kinds = (size_t)cfg_.max_ngram + 1;
  cfg_.cache_prior.resize(cfg_.cache_match_edges.size(), 0.5);
  const size_t kinds = lookup_kinds + cfg_.index_share_edges.size() + cfg_.cache_match_edges.size();
  tries_.assign(kinds, 0.0);
  accepts_.assign(kinds, 0.0);
  prior_tries_.assign(kinds, 2.0);
  prior_accepts_[0].assign(kinds, 1.0);
  shadow_.assign(2 * kinds, ShadowCell{});
  if (!cfg_.prior_acceptance.empty()) {
    cfg_.explore_evaluations = 0;
    for (size_t n = 0; n < lookup_kinds && n < cfg_.prior_acceptance.size(); ++n) {
      prior_tries_[n] = cfg_.prior_weight;
      prior_accepts_[0][n] = cfg_.prior_weight * std::clamp(cfg_.prior_acceptance[n], 0.0, 1.0);
    }
  }
  for (size_t b = 0; b < cfg_.index_share_edges.size() && b < cfg_.index_prior.size(); ++b) {
    prior_tries_[lookup_kinds + b] = cfg_.prior_weight;
    prior_accepts_[0][lookup_kinds + b] = cfg_.prior_weight * std::clamp(cfg_.index_prior[b], 0.0, 1.0);
  }
  const size_t cache0 = lookup_kinds + cfg_.index_share_edges.size();
  for (size_t i = 0; i < cfg_.cache_prior.size(); ++i) {
    prior_tries_[cache0 + i] = cfg_.prior_weight;
    prior_accepts_[0][cache0 + i] = cfg_.prior_weight * std::clamp(cfg_.cache_prior[i], 0.0, 1.0);
  }
  prior_accepts_[1] = prior_accepts_[0];
  if (!cfg_.prior_acceptance.empty())
    for (size_t n = 0; n < lookup_kinds && n < cfg_.prior_acceptance_sampled.size(); ++n)
      prior_accepts_[1][n] = cfg_.prior_weight * std::clamp(cfg_.prior_acceptance_sampled[n], 0.0, 1.0);
}

int CopyHead::cache_kind(int len) const {
  int b = -1;
  for (size_t i = 0; i < cfg_.cache_match_edges.size(); ++i)
    if (len >= cfg_.cache_match_edges[i]) b = (int)i;
  return b < 0 ? -1 : cfg_.max_ngram + 1 + (int)cfg_.index_share_edges.size() + b;
}

int CopyHead::index_kind(double share) const {
  int b = -1;
  for (size_t i = 0; i < cfg_.index_share_edges.size(); ++i)
    if (share >= cfg_.index_share_edges[i]) b = (int)i;
  return b < 0 ? -1 : cfg_.max_ngram + 1 + b;
}

void CopyHead::begin(std::span<const int32_t> prompt) {
  // Per-request estimates (from the priors again), so a request drafts the same way whatever ran
  // before it on this drafter state (seeded sampling stays reproducible).
  std::fill(tries_.begin(), tries_.end(), 0.0);
  std::fill(accepts_.begin(), accepts_.end(), 0.0);
  seq_.assign(prompt.begin(), prompt.end());
  committed_len_ = (int64_t)seq_.size();
  drafted_.clear();
  resolve_pending_ = false;
}

void CopyHead::start_draft(int32_t pending) {
  // The previous round's first rejected slot: the target's own token there is this pending token.
  if (resolve_pending_) score(resolve_, pending);
  resolve_pending_ = false;
  seq_.resize((size_t)committed_len_);
  seq_.push_back(pending);
  drafted_.clear();
}

void CopyHead::score(const Slot& s, int32_t target) {
  const int k = kinds();
  ShadowCell& c = shadow_[(size_t)((s.src_n > 0 ? 0 : 1) * k + std::clamp(s.copy_n, 0, k - 1))];
  ++c.evaluated;
  if (s.token == target) ++c.accepted;
  if (s.alt >= 0) {
    ++c.alt_seen;
    if (s.alt == target) ++c.alt_right;
  }
}

CopyProposal lookup_next(std::span<const int32_t> seq, int max_ngram, int min_ngram) {
  min_ngram = std::max(min_ngram, 1);
  const int64_t len = (int64_t)seq.size();
  for (int n = (int)std::min<int64_t>(max_ngram, len - 1); n >= min_ngram; --n) {
    const int32_t* suffix = seq.data() + len - n;
    // Latest start s < len - n whose n tokens equal the suffix; its successor is seq[s + n].
    for (int64_t s = len - n - 1; s >= 0; --s)
      if (std::equal(suffix, suffix + n, seq.data() + s)) return {seq[(size_t)(s + n)], n};
  }
  return {};
}

void lookup_chain(std::span<const int32_t> history, int32_t pending, int n, int max_ngram, int min_ngram, int32_t mask,
                  std::vector<int32_t>* out) {
  std::vector<int32_t> seq(history.begin(), history.end());
  seq.push_back(pending);
  out->assign((size_t)std::max(n, 0), mask);
  if (n <= 0) return;
  (*out)[0] = pending;
  for (int k = 1; k < n; ++k) {
    const CopyProposal p = lookup_next(seq, max_ngram, min_ngram);
    if (p.token < 0) break;
    (*out)[(size_t)k] = p.token;
    seq.push_back(p.token);
  }
}

CopyProposal CopyHead::propose() const { return lookup_next(seq_, cfg_.max_ngram, cfg_.min_ngram); }

void CopyHead::push(int32_t token, int src_n, int copy_n, int32_t alt) {
  seq_.push_back(token);
  drafted_.push_back({token, src_n, copy_n < 0 ? src_n : copy_n, alt});
  if (src_n > 0) ++slots_proposed_;
  else ++drafter_slots_;
}

double CopyHead::confidence(int n) const {
  const size_t i = (size_t)std::clamp(n, 0, kinds() - 1);
  return (accepts_[i] + prior_accepts_[sampled_][i]) / (tries_[i] + prior_tries_[i]);
}

double CopyHead::schedule_confidence(int n) const {
  const size_t i = (size_t)std::clamp(n, 0, kinds() - 1);
  return tries_[i] < (double)cfg_.explore_evaluations ? 1.0 : confidence(n);
}

bool CopyHead::commit(std::span<const int32_t> committed, int64_t pos) {
  if (pos != committed_len_ || committed.empty()) return false;
  // Slot i was evaluated by the target iff slots < i were all accepted; it was accepted iff
  // i < accepted. Later slots tell nothing about the copy head.
  const size_t accepted = committed.size() - 1;
  for (size_t i = 0; i < drafted_.size() && i <= accepted; ++i) {
    const int n = std::max(drafted_[i].src_n, 0);  // bucket 0: the drafter's own slots
    tries_[(size_t)n] += 1.0;
    if (i < accepted) {
      accepts_[(size_t)n] += 1.0;
      if (n > 0) ++slots_accepted_;
      score(drafted_[i], drafted_[i].token);
    } else {
      resolve_ = drafted_[i];  // rejected: scored when the target's token arrives as the next pending
      resolve_pending_ = true;
    }
  }
  drafted_.clear();
  seq_.resize((size_t)committed_len_);
  seq_.insert(seq_.end(), committed.begin(), committed.end());
  committed_len_ = (int64_t)seq_.size();
  return true;
}

nlohmann::json CopyHead::stats() const {
  nlohmann::json by_n = nlohmann::json::array();
  for (int n = cfg_.min_ngram; n <= cfg_.max_ngram; ++n)
    by_n.push_back({{"n", n}, {"evaluated", tries_[(size_t)n]}, {"accepted", accepts_[(size_t)n]},
                    {"confidence", confidence(n)}});
  nlohmann::json by_share = nlohmann::json::array();  // retrieval kinds
  for (size_t b = 0; b < cfg_.index_share_edges.size(); ++b) {
    const int n = cfg_.max_ngram + 1 + (int)b;
    by_share.push_back({{"kind", n}, {"share_from", cfg_.index_share_edges[b]}, {"evaluated", tries_[(size_t)n]},
                        {"accepted", accepts_[(size_t)n]}, {"confidence", confidence(n)}});
  }
  nlohmann::json by_cache = nlohmann::json::array();  // answer-cache kinds
  for (size_t i = 0; i < cfg_.cache_prior.size(); ++i) {
    const int n = cfg_.max_ngram + 1 + (int)cfg_.index_share_edges.size() + (int)i;
    by_cache.push_back({{"kind", n}, {"match_from", cfg_.cache_match_edges[i]}, {"evaluated", tries_[(size_t)n]},
                        {"accepted", accepts_[(size_t)n]}, {"confidence", confidence(n)}});
  }
  nlohmann::json shadow = nlohmann::json::array();
  const int k = kinds();
  for (int who = 0; who < 2; ++who)
    for (int n = 0; n < k; ++n) {
      const ShadowCell& c = shadow_[(size_t)(who * k + n)];
      if (c.evaluated == 0) continue;
      shadow.push_back({{"drafted_by", who == 0 ? "copy" : "drafter"}, {"copy_match", n}, {"evaluated", c.evaluated},
                        {"accepted", c.accepted}, {"alt_seen", c.alt_seen}, {"alt_right", c.alt_right}});
    }
  return {{"shadow", shadow}, {"slots_copied", slots_proposed_}, {"slots_copied_accepted", slots_accepted_},
          {"slots_drafter", drafter_slots_}, {"drafter_slots_evaluated", tries_[0]},
          {"drafter_slots_accepted", accepts_[0]}, {"by_match_length", by_n}, {"by_index_share", by_share},
          {"by_cache_match", by_cache}};
}

}  // namespace dspark::net
