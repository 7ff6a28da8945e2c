// Retrieval drafting (issue #37 part 2a): a suffix array over the target's own answers, memory-mapped,
// queried for the most frequent continuation of the longest suffix of the request's context
// (REST, arXiv 2311.08252; SuffixDecoding, arXiv 2411.04975). docs/SPECULATION.md, "Retrieval drafting".
//
// The corpus is one token stream: every sequence's tokens followed by kSuffixSeparator (-1), so no
// match crosses a sequence boundary and every continuation stops at its sequence's end. The suffix
// array holds the position of every non-separator token, ordered by the suffix starting there:
// token by token as int32 (the separator, -1, sorts before every id), and two suffixes equal up to
// and including a separator by position. That order is total, so a build is reproducible byte for byte.
//
// File (.sfx, little-endian; kSfxHeaderBytes of header, then the payload):
//   0   char[8]   magic "DSPKSUFX"
//   8   u32       version (kSfxVersion)
//   12  u32       n_vocab of the target tokenizer
//   16  u64       n_tokens   stream length, separators included
//   24  u64       n_suffixes (= n_tokens - n_seqs)
//   32  u64       n_seqs     (= separators in the stream)
//   40  u32       meta_bytes (JSON text: how it was built)
//   44  u32       0
//   48  char[64]  tokenizer fingerprint (hex SHA-256, tokenizer_fingerprint())
//   112 char[64]  hex SHA-256 of the payload (every byte after the header)
//   payload: meta JSON [meta_bytes], zeros to a multiple of 8, tokens i32 [n_tokens], sa u32 [n_suffixes]
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace dspark::formats {
class MappedFile;
}

namespace dspark::speculative {

inline constexpr char kSfxMagic[8] = {'D', 'S', 'P', 'K', 'S', 'U', 'F', 'X'};
inline constexpr uint32_t kSfxVersion = 1;
inline constexpr size_t kSfxHeaderBytes = 176;
inline constexpr int32_t kSuffixSeparator = -1;

// Hex SHA-256 of the vocabulary: n_vocab, BOS, EOS, then each token's text with its length
// (u32 little-endian fields). Two tokenizers with the same fingerprint map ids to the same pieces.
std::string tokenizer_fingerprint(const tokenizer::Tokenizer& tok);

// The suffix array of `stream` (which must end with kSuffixSeparator; ids >= 0 otherwise), in the
// order above. Bucketed by first token, then sorted per bucket; `progress(done)` counts suffixes.
std::vector<uint32_t> build_suffix_array(std::span<const int32_t> stream,
                                         const std::function<void(uint64_t)>& progress = nullptr);

// Writes an index file (through a temporary file and a rename). `sa` = build_suffix_array(stream).
Status write_suffix_index(const std::string& path, std::span<const int32_t> stream, std::span<const uint32_t> sa,
                          int32_t n_vocab, const std::string& fingerprint, const std::string& meta_json);

// How a query turns a context into a draft.
struct SuffixQueryConfig {
  int max_context = 8;     // the longest context suffix matched
  int min_context = 2;     // the shortest; a shorter match proposes nothing
  // Draft token k is proposed while count(context + draft[0..k]) / count(context) >= min_prob: the
  // share of the matched occurrences that continue with the whole draft so far (the adaptive length).
  double min_prob = 0.1;
};

struct SuffixProposal {
  std::vector<int32_t> tokens;     // the draft, most frequent continuation first
  std::vector<uint32_t> support;   // [tokens.size()] occurrences continuing with tokens[0..k]
  uint32_t context_count = 0;      // occurrences of the matched context that have a continuation
  int context_len = 0;             // tokens of the matched context suffix (0: no match)
};

// A token tree's branches for one context: the chain propose() gives first, then the proposals
// that start with the next most frequent first tokens.
using SuffixBranches = std::vector<SuffixProposal>;

class SuffixIndex {
 public:
  // Maps and checks a file: magic, version, size, vocabulary size, tokenizer fingerprint, payload
  // SHA-256, then the stream and array bounds. Every error names the file.
  static Result<std::shared_ptr<const SuffixIndex>> open(const std::string& path, int32_t n_vocab,
                                                         const std::string& fingerprint);
  // The same, shared: a path already open in this process (same vocabulary) is mapped once.
  static Result<std::shared_ptr<const SuffixIndex>> open_shared(const std::string& path, int32_t n_vocab,
                                                                const std::string& fingerprint);
  // An index over owned arrays (tests, and a build's own check); `sa` = build_suffix_array(stream).
  static std::shared_ptr<const SuffixIndex> from_arrays(std::vector<int32_t> stream, std::vector<uint32_t> sa);

  // Longest context suffix of length in [min_context, max_context] that occurs with a continuation,
  // then greedily the most frequent next token (ties: the smaller id) while the draft's share stays
  // >= min_prob, at most max_n tokens.
  SuffixProposal propose(std::span<const int32_t> context, const SuffixQueryConfig& cfg, int max_n) const;
  // Up to `width` proposals for the same matched context, each starting with a different first token
  // (most frequent first; the first is propose()'s), each continued as propose() continues, at most
  // max_n tokens, every first token taken by at least min_prob of the context's occurrences.
  SuffixBranches propose_branches(std::span<const int32_t> context, const SuffixQueryConfig& cfg, int max_n,
                                  int width) const;

  // [lo, hi) of the suffixes that start with `pattern` (no separators in it).
  std::pair<uint64_t, uint64_t> range(std::span<const int32_t> pattern) const;

  std::span<const int32_t> stream() const { return stream_; }
  std::span<const uint32_t> suffixes() const { return sa_; }
  const std::string& meta_json() const { return meta_; }

 private:
  SuffixIndex() = default;
  std::shared_ptr<formats::MappedFile> file_;
  std::vector<int32_t> own_stream_;
  std::vector<uint32_t> own_sa_;
  std::span<const int32_t> stream_;
  std::span<const uint32_t> sa_;
  std::string meta_;
};

// Reference for tests: the same proposal by scanning the whole stream (no suffix array).
SuffixProposal propose_by_scan(std::span<const int32_t> stream, std::span<const int32_t> context,
                               const SuffixQueryConfig& cfg, int max_n);

}  // namespace dspark::speculative
