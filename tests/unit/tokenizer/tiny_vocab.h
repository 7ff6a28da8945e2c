// A small hand-built SentencePiece vocabulary for tokenizer unit tests: Gemma-like special ids
// (pad 0, eos 1, bos 2, unk 3), all 256 <0xXX> byte tokens, and a few scored pieces chosen so
// that merge order, ties and byte fallback are visible.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace dspark::tokenizer::testing {

struct TinyPiece {
  std::string text;
  float score;
  TokenType type;
};

inline constexpr int32_t kTinyStartOfTurn = 4;
inline constexpr int32_t kTinyEndOfTurn = 5;
inline constexpr int32_t kTinyNewline = 6;
inline constexpr int32_t kTinyNewline2 = 7;
inline constexpr int32_t kTinyBoldTag = 8;
inline constexpr int32_t kTinyUnused = 9;
inline constexpr int32_t kTinyEndS = 10;     // "</s>": USER_DEFINED, forced CONTROL like llama.cpp
inline constexpr int32_t kTinyFirstByte = 11;  // <0x00>; <0xXX> is kTinyFirstByte + 0xXX

inline Vocab make_tiny_vocab(const std::vector<TinyPiece>& normal_pieces) {
  Vocab v;
  auto add = [&v](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add("<pad>", -1000, TokenType::kControl);
  add("<eos>", -1000, TokenType::kControl);
  add("<bos>", -1000, TokenType::kControl);
  add("<unk>", -1000, TokenType::kControl);
  add("<start_of_turn>", -1000, TokenType::kControl);
  add("<end_of_turn>", -1000, TokenType::kControl);
  add("\n", -1000, TokenType::kUserDefined);
  add("\n\n", -1000, TokenType::kUserDefined);
  add("<b>", -1000, TokenType::kUserDefined);
  add("<unused0>", -1000, TokenType::kUnused);
  add("</s>", -1000, TokenType::kUserDefined);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::kByte);
  }
  for (const TinyPiece& p : normal_pieces) add(p.text, p.score, p.type);
  v.pad = 0;
  v.eos = 1;
  v.bos = 2;
  v.unk = 3;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = false;
  return v;
}

// "▁" is U+2581, the stored form of a space.
inline std::vector<TinyPiece> default_tiny_pieces() {
  return {
      {"a", -1, TokenType::kNormal},         {"b", -1, TokenType::kNormal},
      {"c", -1, TokenType::kNormal},         {"d", -1, TokenType::kNormal},
      {"<", -5, TokenType::kNormal},         {">", -5, TokenType::kNormal},
      {"\xE2\x96\x81", -2, TokenType::kNormal},
      {"ab", -3, TokenType::kNormal},        {"bc", -2, TokenType::kNormal},
      {"abc", -4, TokenType::kNormal},       {"cd", -3, TokenType::kNormal},
      {"\xE2\x96\x81" "b", -1.5f, TokenType::kNormal},
      {"\xC3\xA9", -2, TokenType::kNormal},  // é
  };
}

inline SpmTokenizer make_tiny_tokenizer(Vocab v) {
  Result<SpmTokenizer> t = SpmTokenizer::create(std::move(v));
  DSPARK_CHECK(t.is_ok());
  return std::move(t).value();
}

inline SpmTokenizer make_tiny_tokenizer() { return make_tiny_tokenizer(make_tiny_vocab(default_tiny_pieces())); }

// The tiny vocabulary (no merges) padded with plain pieces "w<i>" up to n_vocab ids, matching a tiny
// model's vocabulary size (spec / serve tests).
inline std::unique_ptr<Tokenizer> make_padded_tiny_tokenizer(int n_vocab) {
  Vocab v = make_tiny_vocab({});
  for (int i = (int)v.tokens.size(); i < n_vocab; ++i) {
    v.tokens.push_back(std::string("w").append(std::to_string(i)));  // (GCC 12 -Wrestrict false positive on "w" + s)
    v.scores.push_back(0);
    v.types.push_back((int32_t)TokenType::kNormal);
  }
  return std::make_unique<Tokenizer>(make_tiny_tokenizer(std::move(v)));
}

inline int32_t tiny_byte(unsigned char b) { return kTinyFirstByte + b; }

}  // namespace dspark::tokenizer::testing
