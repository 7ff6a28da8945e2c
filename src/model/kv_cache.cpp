#include "model/kv_cache.h"

#include <algorithm>

#include "core/status.h"

namespace dspark::model {

KvCache::KvCache(const kernels::Backend& be, const ModelConfig& c, int64_t n_ctx, int64_t max_batch)
    : be_(&be), n_ctx_(n_ctx), max_batch_(max_batch), window_(c.sliding_window), n_head_kv_(c.n_head_kv),
      head_dim_(c.head_dim) {
  DSPARK_CHECK(n_ctx > 0 && max_batch > 0);
  layers_.resize(c.n_layer);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    Layer& l = layers_[il];
    l.sliding = c.is_sliding(il);
    l.capacity = l.sliding ? std::min(n_ctx, window_ + max_batch) : n_ctx;
    l.k.bind(&be);  // zero-filled
    l.v.bind(&be);
    l.k.resize((size_t)(l.capacity * kv_dim()));
    l.v.resize((size_t)(l.capacity * kv_dim()));
  }
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const Layer& l : layers_) b += (l.k.size() + l.v.size()) * sizeof(uint16_t);
  return b;
}

void KvCache::trim(int64_t n) {
  DSPARK_CHECK(n >= 0 && n <= length_);
  length_ -= n;
}

void KvCache::move_row(int64_t from, int64_t to) {
  DSPARK_CHECK(from >= 0 && from < length_ && to >= 0 && to < length_);
  if (from == to) return;
  const size_t bytes = sizeof(uint16_t) * (size_t)head_dim_;
  for (int64_t il = 0; il < (int64_t)layers_.size(); ++il)
    for (int64_t h = 0; h < n_head_kv_; ++h) {
      be_->copy(k_at(il, h, to), k_at(il, h, from), bytes);
      be_->copy(v_at(il, h, to), v_at(il, h, from), bytes);
    }
}

int64_t KvCache::min_restorable_length() const {
  int64_t lo = 0;
  for (const Layer& l : layers_) {
    if (!l.sliding || written_ <= l.capacity) continue;
    lo = std::max(lo, written_ - l.capacity + window_ - 1);
  }
  return lo;
}

}  // namespace dspark::model
