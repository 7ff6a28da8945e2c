// Prompt files (JSONL, one {"id", "category", "turns": [text, ...]} per line) for regen, and the
// guard that keeps evaluation prompts out of training data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::train {

struct PromptRecord {
  int64_t line = 0;        // 0-based line index in the file (the prompt's stable identity)
  std::string id, category;
  std::string text;        // the first turn
};

// Reads every non-empty line; a line without a non-empty string turns[0] is an error naming
// file:line.
Result<std::vector<PromptRecord>> read_prompt_file(const std::string& path);

// Error naming the first training prompt whose text (whitespace-trimmed) equals an evaluation
// prompt's, with the number of such overlaps. Also refuses the same file on both sides.
Status check_no_overlap(const std::string& train_path, const std::vector<PromptRecord>& train,
                        const std::string& eval_path, const std::vector<PromptRecord>& eval);

}  // namespace dspark::train
