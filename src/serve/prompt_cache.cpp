#include "serve/prompt_cache.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

namespace dspark::serve {

namespace {
bool is_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {  // a is a prefix of b
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}
}  // namespace

void PromptCache::save(const model::KvCache& kv, const spec::SeqHistory& h) {
  const int64_t n = (int64_t)h.tokens.size();
  if (budget_ == 0 || n < 2 || n != kv.length()) return;
  std::lock_guard lk(mu_);
  for (Entry& e : entries_)
    if (is_prefix(h.tokens, e.h.tokens) && e.h.tap_ids == h.tap_ids) {
      e.last_used = ++clock_;
      return;
    }
  Entry e;
  e.h = h;
  e.high_water = kv.high_water();
  const int64_t kv_dim = kv.kv_dim(), hd = kv.head_dim();  // a row: n_head_kv heads of hd
  for (int64_t il = 0; il < kv.n_layer(); ++il) {
    // Ring rows of positions below high_water - capacity were overwritten (a global layer's
    // capacity is n_ctx: it keeps everything).
    const int64_t first = std::min(n, std::max<int64_t>(0, e.high_water - kv.capacity(il)));
    e.first.push_back(first);
    std::vector<uint16_t> k((size_t)((n - first) * kv_dim)), v(k.size());
    for (int64_t pos = first; pos < n; ++pos)  // entry rows: [kv_dim], heads side by side
      for (int64_t hh = 0; hh < kv.n_head_kv(); ++hh) {
        std::memcpy(k.data() + (pos - first) * kv_dim + hh * hd, kv.k_at(il, hh, pos), sizeof(uint16_t) * hd);
        std::memcpy(v.data() + (pos - first) * kv_dim + hh * hd, kv.v_at(il, hh, pos), sizeof(uint16_t) * hd);
      }
    e.bytes += 2 * k.size() * sizeof(uint16_t);
    e.k.push_back(std::move(k));
    e.v.push_back(std::move(v));
  }
  e.bytes += h.tokens.size() * sizeof(int32_t) + h.tap_bytes();
  if (e.bytes > budget_) return;
  // The same conversation, shorter: superseded.
  for (size_t i = 0; i < entries_.size();) {
    if (is_prefix(entries_[i].h.tokens, h.tokens) && entries_[i].h.tap_ids == h.tap_ids) {
      total_ -= entries_[i].bytes;
      entries_.erase(entries_.begin() + (ptrdiff_t)i);
    } else {
      ++i;
    }
  }
  e.last_used = ++clock_;
  total_ += e.bytes;
  entries_.push_back(std::move(e));
  evict_locked();
}

void PromptCache::evict_locked() {
  bool freed = false;
  while (total_ > budget_ && !entries_.empty()) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
    total_ -= lru->bytes;
    entries_.erase(lru);
    freed = true;
  }
  // Snapshots are large and of every size; glibc keeps freed heap pages, so a cache churning at its
  // budget would otherwise ratchet RSS up (the soak measured +8 % in 10 min). Return them.
  if (freed) malloc_trim(0);
}

std::pair<int, int64_t> PromptCache::best(std::span<const int32_t> tokens) const {
  std::lock_guard lk(mu_);
  int best = -1;
  int64_t best_len = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int64_t len = spec::common_prefix(entries_[i].h.tokens, tokens);
    if (len > best_len) {
      best = (int)i;
      best_len = len;
    }
  }
  return {best, best_len};
}

bool PromptCache::restore(int i, model::KvCache& kv, spec::SeqHistory* h) {
  std::lock_guard lk(mu_);
  if (i < 0 || i >= (int)entries_.size()) return false;
  Entry& e = entries_[(size_t)i];
  const int64_t n = (int64_t)e.h.tokens.size(), kv_dim = kv.kv_dim(), hd = kv.head_dim();
  if (n > kv.n_ctx() || kv.n_layer() != (int64_t)e.k.size() || e.h.tap_ids != h->tap_ids) return false;
  for (int64_t il = 0; il < kv.n_layer(); ++il)
    if (std::min(n, std::max<int64_t>(0, e.high_water - kv.capacity(il))) != e.first[il]) return false;  // another ring
  kv.clear();
  for (int64_t il = 0; il < kv.n_layer(); ++il)
    for (int64_t pos = e.first[il]; pos < n; ++pos)
      for (int64_t hh = 0; hh < kv.n_head_kv(); ++hh) {
        const int64_t src = (pos - e.first[il]) * kv_dim + hh * hd;
        std::memcpy(kv.k_at(il, hh, pos), e.k[il].data() + src, sizeof(uint16_t) * hd);
        std::memcpy(kv.v_at(il, hh, pos), e.v[il].data() + src, sizeof(uint16_t) * hd);
      }
  kv.advance(n);
  kv.raise_high_water(e.high_water);
  *h = e.h;
  e.last_used = ++clock_;
  return true;
}

size_t PromptCache::entries() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

size_t PromptCache::bytes() const {
  std::lock_guard lk(mu_);
  return total_;
}

}  // namespace dspark::serve
