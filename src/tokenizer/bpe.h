// Byte-level BPE tokenizer (GPT-2 style, tokenizer.ggml.model = "gpt2"), bit-exact with llama.cpp's
// LLAMA_VOCAB_TYPE_BPE path (src/llama-vocab.cpp: tokenizer_st_partition, llm_tokenizer_bpe_session,
// token_to_piece; src/unicode.cpp: unicode_regex_split, the byte <-> unicode alphabet).
//
// Encode:
//  1. Partition exactly as SpmTokenizer (spm.h): the special list (CONTROL, USER_DEFINED and
//     UNKNOWN tokens, longest first, same std::sort call as llama.cpp) splits the raw text at each
//     exact byte match; CONTROL/UNKNOWN take part only with parse_special, USER_DEFINED always.
//  2. BOS first when add_special && add_bos; EOS last when add_special && add_eos.
//  3. Each raw fragment is split into words by the pre-tokenizer of tokenizer.ggml.pre
//     (pretokenize.h; invalid UTF-8 becomes U+FFFD there, as in llama.cpp). Each word's UTF-8
//     bytes are mapped to the GPT-2 byte alphabet (printable Latin-1 bytes stand for themselves,
//     the other 68 bytes for U+0100.., so a space is U+0120); with ignore_merges (llama3 family) a
//     word that is a token is emitted whole. Otherwise one symbol per byte, and adjacent symbols
//     merge by the rank of the pair in tokenizer.ggml.merges, lowest rank first, ties leftmost.
//     A final symbol that is no token is emitted as the tokens of its single bytes (of the
//     alphabet's UTF-8, as llama.cpp does), skipping bytes that are no token.
//
// Decode (token_to_piece): NORMAL tokens map each alphabet character back to its byte (a character
// outside the alphabet gives llama.cpp's "[UNK_BYTE_0x..<text>]"); CONTROL/UNKNOWN give their text
// only with render_special; USER_DEFINED their text; BYTE (<0xXX>) the byte; other types nothing.
// decode() concatenates pieces (one leading space dropped when add_space_prefix, as
// llama_detokenize); it does not apply llama_detokenize's clean_up_tokenization_spaces pass, so it
// equals what a stream of token_to_piece gives and encode -> decode returns valid UTF-8 input.
//
// Token attributes as llama.cpp sets them at load: its end-of-turn, end-of-generation and
// fill-in-the-middle texts (<|im_end|>, <|endoftext|>, <reponame>, ...) are forced to CONTROL;
// "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>" become USER_DEFINED (gpt-oss); the
// o200k "<|end|>" and the "</s>"-with-"<|tool_response>" exceptions are kept.
//
// Thread safety: a BpeTokenizer is immutable after create(); copies share the tables and any
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

class BpeTokenizer {
 public:
  // Validates `vocab` (validate_vocab, model "gpt2", a known pre-tokenizer, unique token texts,
  // well-formed <0xXX> BYTE tokens, every merge "left right" naming two tokens) and builds the
  // lookup tables. Empty token texts become "[EMPTY_<id>]" like llama.cpp. Errors name the field.
  static Result<BpeTokenizer> create(Vocab vocab);

  // Text -> ids. add_special: BOS (and EOS) per the vocabulary flags. parse_special: let CONTROL
  // and UNKNOWN token texts in `text` become their ids (template text only; never user content).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes of one token (see above); out-of-range ids give "". May be a partial UTF-8 sequence.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // Concatenated pieces (see above). Not validated as UTF-8: see utf8.h.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t find_token(std::string_view text) const;  // exact stored text, -1 if absent
  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  // Id of the chat turn-end token: "<|im_end|>", "<|eot_id|>" or "<end_of_turn>", the first
  // present in that order; -1 if none.
  int32_t end_of_turn() const;
  // eos, or any token llama.cpp treats as end of generation (llama_vocab_is_eog): its EOG text list
  // (<|im_end|>, <|endoftext|>, <|eot_id|>, <|eom_id|>, <|end|>, <end_of_turn>, </s>, ...) and the
  // FIM pad / repo / file-separator tokens.
  bool is_stop(int32_t id) const;
  bool add_bos() const;
  const std::string& token_text(int32_t id) const;  // stored text; DSPARK_CHECKs the range
  float token_score(int32_t id) const;              // BPE has no scores: 0 (DSPARK_CHECKs)
  bool is_control(int32_t id) const;  // CONTROL or UNKNOWN attribute (forced ones included)

  struct Tables;  // defined in bpe.cpp

 private:
  explicit BpeTokenizer(std::shared_ptr<const Tables> t) : t_(std::move(t)) {}
  std::shared_ptr<const Tables> t_;
};

// load_vocab + BpeTokenizer::create; errors name the file and key.
Result<BpeTokenizer> load_bpe_tokenizer(const formats::GgufFile& file);

}  // namespace dspark::tokenizer
