// The tokenizer interface the rest of dspark uses: one value type over every tokenizer model a
// GGUF can name in tokenizer.ggml.model —
//   "llama" -> SentencePiece-style merges by score (SpmTokenizer, spm.h; Gemma 3)
//   "gpt2"  -> byte-level BPE by merge rank with a pre-tokenizer regex (BpeTokenizer, bpe.h; Llama 3,
//              SmolLM2, Qwen 2)
// Both are bit-exact with llama.cpp's tokenizer of the same model. A Tokenizer is immutable and
// cheap to copy (the tables are shared); its const methods may run on any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"

namespace dspark::tokenizer {

class Tokenizer {
 public:
  Tokenizer(SpmTokenizer t) : impl_(std::move(t)) {}  // NOLINT: implicit by design
  Tokenizer(BpeTokenizer t) : impl_(std::move(t)) {}  // NOLINT

  // "spm" or "bpe".
  const char* kind() const { return impl_.index() == 0 ? "spm" : "bpe"; }

  // Text -> ids. add_special: BOS (and EOS) per the vocabulary flags. parse_special: let CONTROL
  // and UNKNOWN token texts in `text` become their ids (template text only; never user content).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const {
    return std::visit([&](const auto& t) { return t.encode(text, add_special, parse_special); }, impl_);
  }
  // Bytes of one token (may be a partial UTF-8 sequence); out-of-range ids give "".
  std::string token_to_piece(int32_t id, bool render_special = false) const {
    return std::visit([&](const auto& t) { return t.token_to_piece(id, render_special); }, impl_);
  }
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const {
    return std::visit([&](const auto& t) { return t.decode(ids, render_special); }, impl_);
  }
  int32_t find_token(std::string_view text) const {
    return std::visit([&](const auto& t) { return t.find_token(text); }, impl_);
  }
  int32_t n_vocab() const { return std::visit([](const auto& t) { return t.n_vocab(); }, impl_); }
  int32_t bos() const { return std::visit([](const auto& t) { return t.bos(); }, impl_); }
  int32_t eos() const { return std::visit([](const auto& t) { return t.eos(); }, impl_); }
  // The chat turn-end token (<end_of_turn>, <|im_end|>, <|eot_id|>), -1 if none.
  int32_t end_of_turn() const { return std::visit([](const auto& t) { return t.end_of_turn(); }, impl_); }
  // End of generation: eos, the turn-end token, and the model's other end-of-generation tokens.
  bool is_stop(int32_t id) const { return std::visit([&](const auto& t) { return t.is_stop(id); }, impl_); }
  bool add_bos() const { return std::visit([](const auto& t) { return t.add_bos(); }, impl_); }
  const std::string& token_text(int32_t id) const {
    return std::visit([&](const auto& t) -> const std::string& { return t.token_text(id); }, impl_);
  }
  float token_score(int32_t id) const { return std::visit([&](const auto& t) { return t.token_score(id); }, impl_); }
  bool is_control(int32_t id) const { return std::visit([&](const auto& t) { return t.is_control(id); }, impl_); }

 private:
  std::variant<SpmTokenizer, BpeTokenizer> impl_;
};

// Reads the vocabulary of a GGUF and builds the tokenizer its tokenizer.ggml.model names; an
// unsupported model or pre-tokenizer is an error naming the file and key.
Result<Tokenizer> load_tokenizer(const formats::GgufFile& file);

}  // namespace dspark::tokenizer
