// Tokenizer vocabulary as stored in a GGUF file (GEMMA3-GGUF.md 2.2): token texts, scores, types
// and the special ids / flags. Plain data; SpmTokenizer (spm.h) builds its lookup tables from it.
//
// Defaults follow llama.cpp's SPM loader (src/llama-vocab.cpp, model "llama"): bos 1, eos 2, unk 0,
// no pad, add_bos on, add_eos off, space prefix on; every key present in the file overrides them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::formats {
class GgufFile;
}

namespace dspark::tokenizer {

// tokenizer.ggml.token_type values (llama.h llama_token_type). Other values load as "undefined":
// they merge like any token but decode to nothing.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  std::vector<std::string> tokens;  // [n_vocab] token text, spaces stored as U+2581
  std::vector<float> scores;        // [n_vocab] merge priority (higher merges first)
  std::vector<int32_t> types;       // [n_vocab] TokenType values
  int32_t bos = 1;                  // -1: none
  int32_t eos = 2;
  int32_t unk = 0;
  int32_t pad = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
};

// Checks a vocabulary built by hand or loaded: non-empty, scores/types as long as tokens, finite
// scores, special ids in [-1, n_vocab). Errors name the field.
Status validate_vocab(const Vocab& vocab);

// Reads the tokenizer.ggml.* keys of a GGUF file. Refuses tokenizer.ggml.model other than "llama"
// (SentencePiece), arrays of unequal length and special ids outside the vocabulary; errors name the
// file and key. Absent scores load as 0, absent types as kNormal (llama.cpp does the same).
Result<Vocab> load_vocab(const formats::GgufFile& file);

}  // namespace dspark::tokenizer
