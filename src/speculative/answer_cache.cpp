#include "speculative/answer_cache.h"

#include <algorithm>

namespace dspark::speculative {

namespace {
constexpr int64_t kMinCapacity = 64;

uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

int n_tables(const AnswerCacheConfig& c) { return std::max(0, c.max_match - c.min_match + 1); }
}  // namespace

int64_t AnswerCache::bytes_for(int64_t capacity_tokens, const AnswerCacheConfig& shape) {
  const int64_t slots = (int64_t)pow2_at_least((uint64_t)std::max<int64_t>(capacity_tokens, 1));
  return capacity_tokens * (int64_t)sizeof(int32_t) + n_tables(shape) * slots * (int64_t)sizeof(Entry);
}

int64_t AnswerCache::capacity_for(int64_t bytes, const AnswerCacheConfig& shape) {
  // Capacities that are powers of two use their tables fully; take the largest that fits.
  int64_t cap = 0;
  for (int64_t c = kMinCapacity; bytes_for(c, shape) <= bytes; c <<= 1) cap = c;
  return cap;
}

AnswerCache::AnswerCache(AnswerCacheConfig cfg) : cfg_(cfg) {
  cfg_.min_match = std::max(cfg_.min_match, 1);
  cfg_.max_match = std::max(cfg_.max_match, cfg_.min_match);
  cfg_.lead_in = std::max(cfg_.lead_in, 0);
  cfg_.max_extend = std::max(cfg_.max_extend, cfg_.max_match);
  cap_ = std::max<int64_t>(cfg_.capacity_tokens, kMinCapacity);
  cfg_.capacity_tokens = cap_;
  ring_.assign((size_t)cap_, -1);
  const uint64_t slots = pow2_at_least((uint64_t)cap_);
  mask_ = slots - 1;
  tables_.assign((size_t)n_tables(cfg_), std::vector<Entry>((size_t)slots));
}

uint64_t AnswerCache::hash(const int32_t* t, int k) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)k;  // FNV-1a over the ids, then a final mix
  for (int i = 0; i < k; ++i) {
    h ^= (uint32_t)t[i];
    h *= 1099511628211ull;
  }
  h ^= h >> 30;  // splitmix64's finalizer: every bit of the table index depends on every id
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

void AnswerCache::push(int32_t token) {
  ring_[(size_t)(head_ % cap_)] = token;
  ++head_;
  run_ = token < 0 ? 0 : run_ + 1;
}

void AnswerCache::add(std::span<const int32_t> prompt, std::span<const int32_t> answer) {
  if (answer.empty()) return;
  if ((int64_t)answer.size() > cap_ - 1) answer = answer.subspan(answer.size() - (size_t)(cap_ - 1));
  const size_t lead = std::min(prompt.size(), (size_t)cfg_.lead_in);
  for (size_t i = prompt.size() - lead; i < prompt.size(); ++i) push(prompt[i]);
  std::vector<int32_t> window((size_t)cfg_.max_match);
  for (const int32_t t : answer) {
    if (t < 0) continue;  // ids only; a separator inside an answer would end it early
    // Register the k tokens before this one (all inside this entry) as continued by it.
    const int64_t p = head_;
    for (int k = cfg_.min_match; k <= cfg_.max_match && k <= run_; ++k) {
      for (int i = 0; i < k; ++i) window[(size_t)i] = at(p - k + i);
      const uint64_t key = hash(window.data(), k);
      tables_[(size_t)(k - cfg_.min_match)][key & mask_] = Entry{key, p};
    }
    push(t);
  }
  push(-1);
  answers_.fetch_add(1, std::memory_order_relaxed);
  stored_.store(std::min(head_, cap_), std::memory_order_relaxed);
}

int AnswerCache::propose(std::span<const int32_t> context, int max_n, std::vector<int32_t>* out) const {
  out->clear();
  if (max_n <= 0) return 0;
  queries_.fetch_add(1, std::memory_order_relaxed);
  const int64_t n = (int64_t)context.size();
  for (int k = (int)std::min<int64_t>(cfg_.max_match, n); k >= cfg_.min_match; --k) {
    const int32_t* tail = context.data() + (n - k);
    const uint64_t key = hash(tail, k);
    const Entry& e = tables_[(size_t)(k - cfg_.min_match)][key & mask_];
    if (e.pos < 0 || e.key != key || !live(e.pos - k) || !live(e.pos)) continue;
    bool same = true;
    for (int i = 0; i < k && same; ++i) same = at(e.pos - k + i) == tail[i];
    if (!same || at(e.pos) < 0) continue;
    for (int64_t q = e.pos; q < head_ && (int)out->size() < max_n; ++q) {
      const int32_t t = at(q);
      if (t < 0) break;
      out->push_back(t);
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    int len = k;
    while (len < cfg_.max_extend && len < n && live(e.pos - len - 1) && at(e.pos - len - 1) == context[(size_t)(n - len - 1)])
      ++len;
    return len;
  }
  return 0;
}

nlohmann::json AnswerCache::stats() const {
  return {{"capacity_tokens", cap_},
          {"bytes", bytes_for(cap_, cfg_)},
          {"answers", answers_.load(std::memory_order_relaxed)},
          {"tokens", stored_.load(std::memory_order_relaxed)},
          {"queries", queries_.load(std::memory_order_relaxed)},
          {"hits", hits_.load(std::memory_order_relaxed)}};
}

}  // namespace dspark::speculative
