// Host-side prompt cache of `dspark serve`: snapshots of finished sequences (tokens, KV rows,
// drafter tap rows) that any slot can restore, least recently used first out of a byte budget.
// It complements the per-slot cache (a slot keeps its last sequence in place): with more
// conversations than slots, a returning conversation is restored here instead of re-prefilled.
//
// The server snapshots the whole finished sequence, prompt and answer: a chat client sends the
// answer back as part of its next turn, so the answer's rows are what a returning conversation
// reuses most. A snapshot of n positions stores every row of the global layers and the sliding
// layers' ring rows not yet overwritten (rolled-back drafts may have written past n), and the KV's
// high-water mark, so KvCache::min_restorable_length is the same after a restore as after the
// original run. Per position it costs the K/V rows (f16: n_layer x n_head_kv x head_dim x 2 x 2
// bytes) plus the drafter's tap rows when the slot records them (f32: taps x n_embd x 4 bytes);
// SmolLM2-135M: 23,040 + 13,824 bytes.
// Thread safety: all methods lock an internal mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "speculative/spec_stepper.h"

namespace dspark::serve {

class PromptCache {
 public:
  explicit PromptCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // Snapshots the first min(n, kv length) positions of what `kv` holds (h.tokens). An entry that
  // is a prefix of it is replaced; if it is itself a prefix of an entry, that entry is only marked
  // used. Evicts least recently used entries beyond the budget; a sequence larger than the whole
  // budget is not stored.
  void save(const model::KvCache& kv, const speculative::SeqHistory& h, int64_t n = INT64_MAX);

  // The entry sharing the longest prefix with `tokens`: {index, length}; {-1, 0} if none.
  std::pair<int, int64_t> best(std::span<const int32_t> tokens) const;

  // Replaces the session's KV and `h` with the first min(n_use, its length) positions of entry `i`
  // (h->tap_ids must equal the entry's): the copy costs what the caller reuses, not the entry's
  // size. Returns false (and changes nothing) when the entry does not fit the KV or its taps differ.
  bool restore(int i, model::KvCache& kv, speculative::SeqHistory* h, int64_t n_use = INT64_MAX);

  size_t entries() const;
  size_t bytes() const;
  size_t budget() const { return budget_; }

 private:
  struct Entry {
    speculative::SeqHistory h;
    int64_t high_water = 0;                     // the KV's high-water mark at save time
    std::vector<int64_t> first;                 // [n_layer] first stored position
    std::vector<std::vector<uint16_t>> k, v;    // [n_layer] of [n_head_kv][n - first][head_dim] f16
    uint64_t last_used = 0;
    size_t bytes = 0;
  };
  void evict_locked();

  mutable std::mutex mu_;
  size_t budget_;
  size_t total_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace dspark::serve
