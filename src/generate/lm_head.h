// Which LM head a greedy (T 0) forward uses: the model's exact greedy head, which reads only each
// row's argmax (model::ArgmaxHead, where the model has one), or every logit (as llama.cpp computes
// them). Both give the same tokens; `full` measures the other head. One parser for every place that
// takes the choice (`bench --lm-head`, `ab` arms' `lm-head=`).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace dspark {

enum class LmHead {
  kArgmax,  // the exact greedy head (default)
  kFull,    // every logit computed
  kBoth,    // bench only: greedy decode with each head, alternating per repeat
};

inline const char* lm_head_name(LmHead h) {
  switch (h) {
    case LmHead::kArgmax: return "argmax";
    case LmHead::kFull: return "full";
    case LmHead::kBoth: return "both";
  }
  return "?";
}

// "argmax", "full", or (with allow_both) "both"; the error lists the choices.
inline Result<LmHead> parse_lm_head(std::string_view s, bool allow_both) {
  for (LmHead h : {LmHead::kArgmax, LmHead::kFull, LmHead::kBoth})
    if (s == lm_head_name(h) && (allow_both || h != LmHead::kBoth)) return h;
  return Status::error(std::string("lm-head must be argmax") + (allow_both ? ", full or both" : " or full") + ", not '" +
                       std::string(s) + "'");
}

}  // namespace dspark
