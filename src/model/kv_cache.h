// Per-layer K/V cache of a target model, f16 storage (as llama.cpp's default cache type), in
// buffers of the model's backend (kernels/backend.h); the prompt cache copies rows to and from the
// host through it.
//
// Global layers keep every position: slot(pos) = pos, capacity n_ctx.
// Sliding layers keep a ring: slot(pos) = pos % capacity with capacity = window + max_batch.
// Invariant that makes trim() safe across the window boundary: a forward writes at most max_batch
// positions [L, L + b); a query at position p >= L - 0 needs keys (p - window, p], and writing the
// batch only overwrites positions < L + b - capacity <= L - window. So after trim(n) back into the
// batch, every key a later query can see is still intact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/backend.h"
#include "model/config.h"

namespace dspark::model {

class KvCache {
 public:
  KvCache(const kernels::Backend& be, const ModelConfig& config, int64_t n_ctx, int64_t max_batch);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t max_batch() const { return max_batch_; }
  int64_t length() const { return length_; }   // positions committed so far
  int64_t kv_dim() const { return n_head_kv_ * head_dim_; }
  int64_t n_layer() const { return (int64_t)layers_.size(); }
  int64_t capacity(int64_t il) const { return layers_[il].capacity; }  // slots of layer il (ring size if sliding)
  size_t bytes() const;

  int64_t n_head_kv() const { return n_head_kv_; }
  int64_t head_dim() const { return head_dim_; }
  // The backend whose memory holds the rows (copies to and from the host go through it).
  const kernels::Backend& backend() const { return *be_; }

  // Row of K/V head h of layer il at absolute position pos: [head_dim] f16. A layer's rows are
  // head-major, [n_head_kv][capacity][head_dim], so the keys one attention call reads are contiguous:
  // rows interleaved by head (stride kv_dim) left decode attention waiting on memory, 1.7-1.9x slower
  // (BM_AttentionCold, SmolLM2's 3 K/V heads, 512-1,024 keys); SmolLM2's forward of 1 token took
  // 4.98 -> 4.20 ms after 700 tokens and 6.87 -> 5.07 ms after 1,500 (scripts/curve_ab.py, 15 pairs).
  uint16_t* k_at(int64_t il, int64_t h, int64_t pos) { return layers_[il].k.data() + offset(il, h, pos); }
  uint16_t* v_at(int64_t il, int64_t h, int64_t pos) { return layers_[il].v.data() + offset(il, h, pos); }
  const uint16_t* k_at(int64_t il, int64_t h, int64_t pos) const { return layers_[il].k.data() + offset(il, h, pos); }
  const uint16_t* v_at(int64_t il, int64_t h, int64_t pos) const { return layers_[il].v.data() + offset(il, h, pos); }

  // First position visible to a query at pos on layer il.
  int64_t first_visible(int64_t il, int64_t pos) const {
    if (!layers_[il].sliding) return 0;
    const int64_t lo = pos - window_ + 1;
    return lo > 0 ? lo : 0;
  }

  // K/V head h of layer il as a slot view for kernels::attention_f16kv.
  kernels::KvView view(int64_t il, int64_t h) const {
    const Layer& l = layers_[il];
    const int64_t off = h * l.capacity * head_dim_;
    return {l.k.data() + off, l.v.data() + off, l.capacity, head_dim_};
  }

  // Called by the forward after writing rows [length, length + n).
  void advance(int64_t n) {
    length_ += n;
    if (length_ > written_) written_ = length_;
  }
  // Drops the last n positions (speculative rollback). n <= length.
  void trim(int64_t n);
  // Copies every layer's K/V rows of position `from` to position `to` (a token tree's accepted
  // branch moved into place after verification; both < length).
  void move_row(int64_t from, int64_t to);
  // Forgets everything.
  void clear() { length_ = written_ = 0; }

  // Smallest length L > 0 that trim() may go back to with every key a query at L can see still
  // intact (prefix reuse across requests). Sliding layers are rings: rows written at positions up
  // to the high-water mark (rolled-back drafts included) overwrote position q once q + capacity
  // was written, and a query at L reads keys [L - window + 1, L). Going back to 0 is always safe.
  int64_t min_restorable_length() const;
  // High-water mark of written positions since clear(); raise_high_water() only raises it (a restored
  // copy of a cache declares which of its oldest ring rows were already overwritten).
  int64_t high_water() const { return written_; }
  void raise_high_water(int64_t w) {
    if (w > written_) written_ = w;
  }

 private:
  struct Layer {
    bool sliding = false;
    int64_t capacity = 0;
    kernels::DeviceArray<uint16_t> k;  // [n_head_kv, capacity, head_dim] f16
    kernels::DeviceArray<uint16_t> v;  // [n_head_kv, capacity, head_dim] f16
  };
  int64_t slot(int64_t il, int64_t pos) const {
    const Layer& l = layers_[il];
    return l.sliding ? pos % l.capacity : pos;
  }
  int64_t offset(int64_t il, int64_t h, int64_t pos) const {
    return (h * layers_[il].capacity + slot(il, pos)) * head_dim_;
  }

  const kernels::Backend* be_ = nullptr;
  int64_t n_ctx_ = 0;
  int64_t max_batch_ = 0;
  int64_t window_ = 0;
  int64_t n_head_kv_ = 0;
  int64_t head_dim_ = 0;
  int64_t length_ = 0;
  int64_t written_ = 0;   // high-water mark of positions written since clear()
  std::vector<Layer> layers_;
};

}  // namespace dspark::model
