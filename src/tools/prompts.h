// Prompt files for the benchmarking verbs (bench --spec, ab): Spec-Bench style JSON Lines,
// {"category": ..., "turns": [text, ...]} (only the first turn is used), and how a prompt
// becomes token ids (Gemma 3 chat template with one user turn, or raw text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/spm.h"

namespace dspark::tools {


struct Prompt {
  std::string category;  // "all" when the line has none
  std::string text;      // first turn
};

// Reads `path` and picks `n` prompts round robin over the categories (file order within each),
// so a small n still covers every category; n <= 0 takes them all. Errors name the file and line.
Result<std::vector<Prompt>> load_prompts(const std::string& path, int64_t n);

// chat: `<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n` with BOS; else BOS + text.
Result<std::vector<int32_t>> encode_prompt(const tokenizer::SpmTokenizer& tok, const std::string& text, bool chat);

}  // namespace dspark::tools
