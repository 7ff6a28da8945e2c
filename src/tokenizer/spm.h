// SentencePiece-style (SPM) tokenizer, bit-exact with llama.cpp's LLAMA_VOCAB_TYPE_SPM path
// (src/llama-vocab.cpp: tokenizer_st_partition, llm_tokenizer_spm_session, token_to_piece).
//
// Encode:
//  1. Partition: the special list (CONTROL, USER_DEFINED and UNKNOWN tokens, sorted by text length,
//     longest first, with the same std::sort call as llama.cpp so equal lengths tie the same way)
//     splits the raw text at each exact byte match, one token at a time. CONTROL/UNKNOWN take part
//     only with parse_special; USER_DEFINED always.
//  2. BOS first when add_special && add_bos; EOS last when add_special && add_eos.
//  3. Each raw fragment: " " prefix when add_space_prefix and the previous piece was special (or
//     the start); every 0x20 -> U+2581; score-driven merge of UTF-8 characters, highest score
//     first, ties leftmost; final symbols that are no token become one <0xXX> token per byte.
//
// llama.cpp's resegment() also looks up "remembered pairs" for final symbols that are no token.
// That branch is unreachable (a pair is remembered only when its text is a token, and a token text
// is emitted before the lookup), so it is not reproduced; the merge order is identical.
//
// Token attributes as llama.cpp sets them at load: texts of its end-of-generation list
// (<end_of_turn>, <eos>, </s>, <|im_end|>, ...) are forced to CONTROL in addition to their stored
// type. In Gemma 3 this makes USER_DEFINED "</s>" (212) a control token: matched only with
// parse_special, decoded only with render_special.
//
// Thread safety: an SpmTokenizer is immutable after create(); copies share the tables and any
// number of threads may call its const methods concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace dspark::formats {
class GgufFile;
}

namespace dspark::tokenizer {

class SpmTokenizer {
 public:
  // Validates `vocab` (validate_vocab, unique token texts, well-formed <0xXX> byte tokens) and
  // builds the lookup tables. Empty token texts become "[EMPTY_<id>]" like llama.cpp.
  static Result<SpmTokenizer> create(Vocab vocab);

  // Text -> ids. add_special: BOS (and EOS) per the vocabulary flags. parse_special: let CONTROL
  // and UNKNOWN token texts in `text` become their ids (template text only; never user content).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes of one token (llama.cpp's token_to_piece): NORMAL text with U+2581 -> space; BYTE its byte;
  // USER_DEFINED its text; CONTROL/UNKNOWN nothing unless render_special; UNUSED and undefined
  // types nothing. Out-of-range ids give "". The result may be a partial UTF-8 sequence.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // Concatenated pieces; with add_space_prefix one leading space of the first piece is dropped
  // (llama_detokenize). Not validated as UTF-8: see utf8.h.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t find_token(std::string_view text) const;  // exact stored text, -1 if absent
  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t end_of_turn() const;  // id of "<end_of_turn>", -1 if absent
  bool is_stop(int32_t id) const;  // eos or end_of_turn
  bool add_bos() const;
  const std::string& token_text(int32_t id) const;  // stored text; DSPARK_CHECKs the range
  float token_score(int32_t id) const;
  bool is_control(int32_t id) const;  // CONTROL or UNKNOWN attribute (forced ones included)

  struct Tables;  // defined in spm.cpp

 private:
  explicit SpmTokenizer(std::shared_ptr<const Tables> t) : t_(std::move(t)) {}
  std::shared_ptr<const Tables> t_;
};

// load_vocab + SpmTokenizer::create; errors name the file and key (most callers want
// tokenizer.h load_tokenizer, which picks the tokenizer model).
Result<SpmTokenizer> load_spm_tokenizer(const formats::GgufFile& file);

}  // namespace dspark::tokenizer
