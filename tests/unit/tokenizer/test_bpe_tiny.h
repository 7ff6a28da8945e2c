// A small hand-built byte-level BPE vocabulary for tokenizer unit tests (SmolLM2-like layout):
//   0 <|endoftext|> CONTROL, 1 <|im_start|> CONTROL (bos), 2 <|im_end|> CONTROL (eos),
//   3 <tool> USER_DEFINED, 4 <reponame> NORMAL (llama.cpp forces it to CONTROL: FIM repo, EOG),
//   5 </s> NORMAL (forced CONTROL, EOG), then the 256 byte-alphabet characters (byte b is id
//   kBpeFirstByte + b), then the caller's extra tokens; merges as given.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace dspark::tokenizer::testing {

inline constexpr int32_t kBpeEndOfText = 0;
inline constexpr int32_t kBpeImStart = 1;
inline constexpr int32_t kBpeImEnd = 2;
inline constexpr int32_t kBpeTool = 3;
inline constexpr int32_t kBpeRepoName = 4;
inline constexpr int32_t kBpeSlashS = 5;
inline constexpr int32_t kBpeFirstByte = 6;

// UTF-8 of the GPT-2 alphabet character standing for byte `b`.
inline std::string alphabet_char(unsigned char b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  uint32_t cp = b;
  if (!printable) {
    cp = 256;
    for (unsigned c = 0; c < b; ++c) {
      if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++cp;
    }
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// `raw` bytes written in the alphabet ("a b" -> "a\xC4\xA0" "b", i.e. "aĠb").
inline std::string enc(std::string_view raw) {
  std::string out;
  for (unsigned char b : raw) out += alphabet_char(b);
  return out;
}

// "left right" merge of two raw strings.
inline std::string merge_of(std::string_view left, std::string_view right) {
  return enc(left) + " " + enc(right);
}

inline Vocab make_tiny_bpe_vocab(const std::vector<std::string>& extra_raw_tokens,
                                 const std::vector<std::pair<std::string, std::string>>& raw_merges,
                                 std::string pre = "gpt2") {
  Vocab v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  auto add = [&v](std::string text, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(0);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add("<|endoftext|>", TokenType::kControl);
  add("<|im_start|>", TokenType::kControl);
  add("<|im_end|>", TokenType::kControl);
  add("<tool>", TokenType::kUserDefined);
  add("<reponame>", TokenType::kNormal);
  add("</s>", TokenType::kNormal);
  for (int b = 0; b < 256; ++b) add(alphabet_char(static_cast<unsigned char>(b)), TokenType::kNormal);
  for (const std::string& t : extra_raw_tokens) add(enc(t), TokenType::kNormal);
  for (const auto& [l, r] : raw_merges) v.merges.push_back(merge_of(l, r));
  v.bos = kBpeImStart;
  v.eos = kBpeImEnd;
  v.unk = -1;
  v.pad = -1;
  v.add_bos = false;
  v.add_eos = false;
  v.add_space_prefix = false;
  return v;
}

inline int32_t tiny_bpe_byte(unsigned char b) { return kBpeFirstByte + b; }

}  // namespace dspark::tokenizer::testing
