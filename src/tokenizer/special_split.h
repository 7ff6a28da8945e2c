// The first step of every llama.cpp tokenizer (tokenizer_st_partition), shared by the SentencePiece
// and BPE tokenizers: the special tokens (CONTROL, USER_DEFINED, UNKNOWN), longest text first,
// each split every raw fragment of the text at its leftmost non-overlapping matches. A byte trie
// over the special texts finds which of them occur at all, so partitioning runs only for those
// (same result as trying every special).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dspark::tokenizer {

struct Fragment {
  size_t offset;
  size_t length;
  int32_t id;  // -1: raw text still to tokenize
};

class SpecialSplitter {
 public:
  // ids: the special tokens; texts: [n_vocab] token texts; parse_only(id): the token is matched
  // only with parse_special (CONTROL and UNKNOWN; USER_DEFINED always matches). The order is
  // llama.cpp's: std::sort by text length, longest first (not stable_sort: equal lengths tie alike).
  void build(const std::vector<std::string>& texts, std::vector<int32_t> ids,
             const std::function<bool(int32_t)>& parse_only);
  // Splits text into fragments (raw ones id -1) in text order. texts as given to build().
  void partition(std::string_view text, bool parse_special, const std::vector<std::string>& texts,
                 std::vector<Fragment>* out) const;

 private:
  std::vector<int32_t> specials_;                     // ids in llama.cpp order
  std::vector<uint8_t> parse_only_;                   // [specials_] 1: only with parse_special
  std::vector<int32_t> node_rank_;                    // trie node -> index into specials_, or -1
  std::unordered_map<uint64_t, int32_t> node_child_;  // (node << 8 | byte) -> child node
};

}  // namespace dspark::tokenizer
