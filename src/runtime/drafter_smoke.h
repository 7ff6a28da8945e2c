// One real draft round of a DSpark checkpoint against its target: the reload check of
// `dspark quantize-drafter` (and a quick "does it load and draft" probe in general).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"

namespace dspark::runtime {

struct SmokeResult {
  std::vector<int32_t> tokens;  // drafted target ids
  double draft_ms = 0;          // the draft() call
  int64_t draft_vocab = 0;
  bool quantized = false;       // the checkpoint has a quantization block
};

// Loads `dir` against `target`, runs the target over a fixed 8-token prompt with the drafter's taps,
// begin() + one greedy draft() of the whole block; checks that every drafted id is in the
// vocabulary and every base logit is finite.
Result<SmokeResult> smoke_check_drafter(const std::string& dir, const model::Model& target, ThreadPool* pool);

}  // namespace dspark::runtime
