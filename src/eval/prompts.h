// Prompt files for the benchmarking verbs (bench --spec, ab): Spec-Bench style JSON Lines,
// {"category": ..., "turns": [text, ...]} (only the first turn is used), and how a prompt
// becomes token ids (the model's chat template with one user turn, or raw text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark::eval {


struct Prompt {
  std::string category;  // "all" when the line has none
  std::string text;      // first turn
};

// Reads `path` and picks `n` prompts round robin over the categories (file order within each),
// so a small n still covers every category; n <= 0 takes them all. Errors name the file and line.
Result<std::vector<Prompt>> load_prompts(const std::string& path, int64_t n);

// chat: one user turn in the model's chat template plus the generation prompt, encoded with the
// tokenizer's BOS; else the raw text with BOS (when the vocabulary adds one).
Result<std::vector<int32_t>> encode_prompt(const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& tmpl,
                                           const std::string& text, bool chat);

}  // namespace dspark::eval
