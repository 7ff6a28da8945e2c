// Cross-request retrieval (docs/SPECULATION.md, "Answers already served"): a bounded pool of the
// answers a server has produced, searched like prompt lookup. Templated tasks, agent loops and
// repeated questions repeat text across requests, which a request's own prompt lookup cannot see.
//
// The pool is a ring of tokens: each answer is stored after the last lead_in tokens of its prompt
// (so an answer's first tokens can match the end of a new prompt) and followed by a separator (-1).
// For each match length k in [min_match, max_match] a direct-mapped table maps a hash of k tokens to
// the ring position after their latest occurrence. A query takes the longest k whose last k context
// tokens are found there (checked token by token against the ring, so a hash collision or a slot
// overwritten since never proposes wrong text) and returns the tokens that followed, up to the end of
// that answer, with the match's full length: the agreement is extended backwards token by token up to
// max_extend (a repeated question agrees for its whole tail, a chance phrase for a few tokens). Newer answers overwrite older table entries and, once the ring is full, older tokens:
// eviction is by age, and memory is fixed at construction (bytes_for()).
//
// Thread safety: add() and propose() from one thread (the serve scheduler's); the counters may be
// read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace dspark::speculative {

struct AnswerCacheConfig {
  int64_t capacity_tokens = 0;  // ring size (>= 64)
  int min_match = 3;            // shorter context matches propose nothing
  int max_match = 5;
  int lead_in = 16;             // prompt tokens stored before each answer
  int max_extend = 32;          // the match length reported is at most this
};

class AnswerCache {
 public:
  explicit AnswerCache(AnswerCacheConfig cfg);

  // The largest capacity whose ring and tables fit in `bytes` (0 if not even 64 tokens).
  static int64_t capacity_for(int64_t bytes, const AnswerCacheConfig& shape = {});
  // Memory held by a cache of this capacity.
  static int64_t bytes_for(int64_t capacity_tokens, const AnswerCacheConfig& shape = {});

  // Stores an answer (token ids >= 0) after the tail of its prompt. Answers longer than the ring keep
  // their last part.
  void add(std::span<const int32_t> prompt, std::span<const int32_t> answer);

  // The continuation (at most max_n tokens, within one stored answer) of the longest suffix of
  // `context` of min_match..max_match tokens found in the pool; returns how many context tokens agree
  // with the pool before it (that suffix, extended backwards up to max_extend; 0: no match, out empty).
  int propose(std::span<const int32_t> context, int max_n, std::vector<int32_t>* out) const;

  const AnswerCacheConfig& config() const { return cfg_; }
  // {"capacity_tokens", "bytes", "answers", "tokens" (stored so far, separators included, capped at
  // the capacity), "queries", "hits"}.
  nlohmann::json stats() const;

 private:
  struct Entry {
    uint64_t key = 0;
    int64_t pos = -1;  // ring position (absolute) after the k tokens; -1: empty
  };
  static uint64_t hash(const int32_t* t, int k);
  int32_t at(int64_t pos) const { return ring_[(size_t)(pos % cap_)]; }
  bool live(int64_t pos) const { return pos >= head_ - cap_ && pos < head_; }
  void push(int32_t token);

  AnswerCacheConfig cfg_;
  int64_t cap_ = 0;
  std::vector<int32_t> ring_;                // [cap_] token ids, -1 = separator
  int64_t head_ = 0;                         // tokens written so far; position p lives at p % cap_
  int64_t run_ = 0;                          // tokens since the last separator
  std::vector<std::vector<Entry>> tables_;   // [max_match - min_match + 1][mask_ + 1]
  uint64_t mask_ = 0;
  std::atomic<int64_t> answers_{0}, stored_{0};
  mutable std::atomic<int64_t> queries_{0}, hits_{0};
};

}  // namespace dspark::speculative
