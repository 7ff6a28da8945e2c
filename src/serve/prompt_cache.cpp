#include "serve/prompt_cache.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

namespace dspark::serve {

namespace {
bool is_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {  // a is a prefix of b
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Copies the rows of positions [first, n) of K/V head h of layer il between the cache (backend
// memory) and a host snapshot buffer [n - first][head_dim] (a ring layer's positions wrap once at
// most: n - first <= capacity).
void copy_head_rows(const kernels::Backend& be, uint16_t* cache_k, uint16_t* cache_v, int64_t capacity, bool sliding,
                    int64_t hd, int64_t first, int64_t n, uint16_t* buf_k, uint16_t* buf_v, bool to_cache) {
  for (int64_t pos = first; pos < n;) {
    const int64_t slot = sliding ? pos % capacity : pos;
    const int64_t run = std::min(n - pos, capacity - slot);  // contiguous up to the ring's end
    const size_t bytes = sizeof(uint16_t) * (size_t)(run * hd);
    uint16_t* ck = cache_k + slot * hd;
    uint16_t* cv = cache_v + slot * hd;
    uint16_t* bk = buf_k + (pos - first) * hd;
    uint16_t* bv = buf_v + (pos - first) * hd;
    if (to_cache) {
      be.from_host(ck, bk, bytes);
      be.from_host(cv, bv, bytes);
    } else {
      be.to_host(bk, ck, bytes);
      be.to_host(bv, cv, bytes);
    }
    pos += run;
  }
}

}  // namespace

void PromptCache::save(const model::KvCache& kv, const speculative::SeqHistory& h, int64_t n_keep) {
  const int64_t n = std::min<int64_t>(n_keep, (int64_t)h.tokens.size());
  if (budget_ == 0 || n < 2 || (int64_t)h.tokens.size() != kv.length()) return;
  speculative::SeqHistory kept;
  kept.tap_ids = h.tap_ids;
  kept.tokens.assign(h.tokens.begin(), h.tokens.begin() + n);
  std::lock_guard lk(mu_);
  for (Entry& e : entries_)
    if (is_prefix(kept.tokens, e.h.tokens) && e.h.tap_ids == h.tap_ids) {
      e.last_used = ++clock_;
      return;
    }
  Entry e;
  e.high_water = kv.high_water();
  const int64_t hd = kv.head_dim(), heads = kv.n_head_kv();
  for (int64_t il = 0; il < kv.n_layer(); ++il) {
    // Ring rows of positions below high_water - capacity were overwritten (a global layer's
    // capacity is n_ctx: it keeps everything).
    const int64_t cap = kv.capacity(il), first = std::min(n, std::max<int64_t>(0, e.high_water - cap));
    const bool sliding = cap < kv.n_ctx();
    e.first.push_back(first);
    std::vector<uint16_t> k((size_t)(heads * (n - first) * hd)), v(k.size());
    for (int64_t hh = 0; hh < heads; ++hh)
      copy_head_rows(kv.backend(), const_cast<uint16_t*>(kv.k_at(il, hh, 0)), const_cast<uint16_t*>(kv.v_at(il, hh, 0)), cap,
                     sliding, hd, first, n, k.data() + hh * (n - first) * hd, v.data() + hh * (n - first) * hd,
                     /*to_cache=*/false);
    e.bytes += 2 * k.size() * sizeof(uint16_t);
    e.k.push_back(std::move(k));
    e.v.push_back(std::move(v));
  }
  kept.taps.resize(h.taps.size());
  for (size_t t = 0; t < h.taps.size(); ++t) {
    const size_t row = h.taps[t].size() / std::max<size_t>(h.tokens.size(), 1);
    kept.taps[t].assign(h.taps[t].begin(), h.taps[t].begin() + (ptrdiff_t)(row * (size_t)n));
  }
  e.h = std::move(kept);
  e.bytes += e.h.tokens.size() * sizeof(int32_t) + e.h.tap_bytes();
  if (e.bytes > budget_) return;
  // The same conversation, shorter: superseded.
  for (size_t i = 0; i < entries_.size();) {
    if (is_prefix(entries_[i].h.tokens, e.h.tokens) && entries_[i].h.tap_ids == e.h.tap_ids) {
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
    const int64_t len = speculative::common_prefix(entries_[i].h.tokens, tokens);
    if (len > best_len) {
      best = (int)i;
      best_len = len;
    }
  }
  return {best, best_len};
}

bool PromptCache::restore(int i, model::KvCache& kv, speculative::SeqHistory* h, int64_t n_use) {
  std::lock_guard lk(mu_);
  if (i < 0 || i >= (int)entries_.size()) return false;
  Entry& e = entries_[(size_t)i];
  const int64_t n = (int64_t)e.h.tokens.size(), hd = kv.head_dim();
  if (n > kv.n_ctx() || kv.n_layer() != (int64_t)e.k.size() || e.h.tap_ids != h->tap_ids) return false;
  for (int64_t il = 0; il < kv.n_layer(); ++il)
    if (std::min(n, std::max<int64_t>(0, e.high_water - kv.capacity(il))) != e.first[il]) return false;  // another ring
  // Only the positions the caller will use: a restore costs what it saves, not the entry's size.
  const int64_t m = std::clamp<int64_t>(n_use, 0, n);
  kv.clear();
  for (int64_t il = 0; il < kv.n_layer(); ++il) {
    const int64_t cap = kv.capacity(il), first = e.first[(size_t)il], rows = n - first;
    if (first >= m) continue;
    for (int64_t hh = 0; hh < kv.n_head_kv(); ++hh)
      copy_head_rows(kv.backend(), kv.k_at(il, hh, 0), kv.v_at(il, hh, 0), cap, cap < kv.n_ctx(), hd, first, m,
                     e.k[(size_t)il].data() + hh * rows * hd, e.v[(size_t)il].data() + hh * rows * hd,
                     /*to_cache=*/true);
  }
  kv.advance(m);
  kv.raise_high_water(e.high_water);
  h->tokens.assign(e.h.tokens.begin(), e.h.tokens.begin() + m);
  h->taps.resize(e.h.taps.size());
  for (size_t t = 0; t < e.h.taps.size(); ++t) {
    const size_t row = e.h.taps[t].size() / std::max<size_t>((size_t)n, 1);
    h->taps[t].assign(e.h.taps[t].begin(), e.h.taps[t].begin() + (ptrdiff_t)(row * (size_t)m));
  }
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
