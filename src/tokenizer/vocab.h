// Tokenizer vocabulary as stored in a GGUF file (tokenizer.ggml.* keys, docs/GGUF.md): token texts, scores, types,
// BPE merges and the special ids / flags. Plain data; SpmTokenizer (spm.h, model "llama") and
// BpeTokenizer (bpe.h, model "gpt2") build their lookup tables from it.
//
// Defaults follow llama.cpp's loader (src/llama-vocab.cpp, llama_vocab::impl::load); every key
// present in the file overrides them:
//  - "llama" (SentencePiece): bos 1, eos 2, unk 0, no pad, add_bos on, add_eos off, space prefix on.
//  - "gpt2" (byte-level BPE): bos 11, eos 11, no unk, no pad (a default outside the vocabulary
//    becomes -1, as llama.cpp disables it), add_bos off except for the llama3 pre-tokenizer family
//    (pretokenize.h), add_eos off, space prefix off.
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
  std::string model = "llama";      // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (BPE)
  std::string pre = "default";      // tokenizer.ggml.pre: the BPE pre-tokenizer (pretokenize.h)
  std::vector<std::string> tokens;  // [n_vocab] token text; SPM: spaces as U+2581; BPE: bytes in
                                    // the GPT-2 byte alphabet (space = U+0120)
  std::vector<float> scores;        // [n_vocab] SPM merge priority (higher merges first)
  std::vector<int32_t> types;       // [n_vocab] TokenType values
  std::vector<std::string> merges;  // [n_merges] BPE only: "left right", rank = index
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
// (SentencePiece) and "gpt2" (byte-level BPE; needs tokenizer.ggml.merges and a known
// tokenizer.ggml.pre, absent = "default"), arrays of unequal length and special ids outside the
// vocabulary; errors name the file and key. Absent scores load as 0, absent types as kNormal
// (llama.cpp does the same). Merge strings are checked by BpeTokenizer::create.
Result<Vocab> load_vocab(const formats::GgufFile& file);

}  // namespace dspark::tokenizer
