// Pre-tokenizers of byte-level BPE vocabularies: the word splitting llama.cpp applies before BPE
// merges (src/llama-vocab.cpp llm_tokenizer_bpe: the regex list per tokenizer.ggml.pre;
// src/unicode.cpp unicode_regex_split and its hand-written splitters). Hand-written scanners here
// too (no std::regex), reproducing llama.cpp's splits exactly, quirks included.
//
// Text handling as llama.cpp's unicode_cpts_from_utf8: UTF-8 is decoded laxly (overlong forms and
// surrogates pass as their code point); a byte that starts no complete sequence becomes one U+FFFD
// and decoding resumes at the next byte. A 4-byte form above U+10FFFF (F4 90.., F5..F7 leads)
// makes llama.cpp throw an uncaught exception later; here its lead byte is invalid like the rest.
// Words are returned as code point counts; BpeTokenizer re-encodes them as UTF-8.
//
// The rule families (the regex llama.cpp names, and what its scanner really does):
//  kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//  kSmollm  every \p{N} code point isolated first, then kGpt2 on each piece
//  kDefault [\p{P}$+<=>^~|]+ runs isolated (ASCII: every punctuation or symbol except '`'), then
//           kGpt2, then \p{N}+ runs isolated, then runs of 3 ASCII digits isolated
//  kLlama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//  kQwen2   as kLlama3 with \p{N} (single digits) instead of \p{N}{1,3}
// where \s is the White_Space property and the classes come from unicode_data.h (Unicode 15.1,
// llama.cpp's table). Each step splits only inside the pieces of the previous one, and a scanner
// never looks past the end of its piece (so "\s+(?!\S)" keeps a trailing run whole).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dspark::tokenizer {

enum class PreTokenizerKind { kDefault, kGpt2, kSmollm, kLlama3, kQwen2 };

struct PreTokenizerSpec {
  PreTokenizerKind kind = PreTokenizerKind::kDefault;
  bool ignore_merges = false;    // a word that is a token is emitted whole (llama3 family)
  bool default_add_bos = false;  // llama.cpp's add_bos before tokenizer.ggml.add_bos_token
};

// The rules llama.cpp applies for tokenizer.ggml.pre = `pre`. Accepted names (llama.cpp's, plus
// "gpt2", which llama.cpp spells "gpt-2"):
//   kDefault: default
//   kGpt2:    gpt-2 gpt2 phi-2 mpt olmo jais trillion granite-docling exaone4 gigachat a.x-4.0
//             mellum jina-es jina-de
//   kSmollm:  smollm starcoder refact command-r codeshell exaone minerva-7b mellum2
//   kLlama3:  llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano
//             (ignore_merges, add_bos); dbrx smaug-bpe (neither)
//   kQwen2:   qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open
// Names llama.cpp maps to other rules, or to these rules plus options this tokenizer lacks
// (add_sep, token strip attributes, BERT normalisation), are refused. Anything else is an error
// naming tokenizer.ggml.pre.
Result<PreTokenizerSpec> find_pre_tokenizer(std::string_view pre);

// Lax UTF-8 decoding (see above) of `text`, appended to *cpts.
void decode_utf8_lax(std::string_view text, std::vector<uint32_t>* cpts);
// UTF-8 of `cp` (<= 0x10FFFF; surrogates are encoded like any other value) appended to *out.
void append_utf8(uint32_t cp, std::string* out);

// Splits `cpts` into words: *word_lengths gets their lengths in code points, in order, each > 0,
// summing to cpts.size() (nothing for empty input).
void pretokenize(PreTokenizerKind kind, const std::vector<uint32_t>& cpts,
                 std::vector<size_t>* word_lengths);

// Convenience for tests and tools: decode, split and re-encode each word as UTF-8.
std::vector<std::string> pretokenize_text(PreTokenizerKind kind, std::string_view text);

}  // namespace dspark::tokenizer
