// Target hidden-state rows ("taps") for a run of positions, as a forward with taps records them
// and as drafters that read the target's hidden states (DSpark) consume them.
#pragma once

#include <cstdint>
#include <vector>

namespace dspark::model {

// taps[i] is [n_rows, n_embd] f32 for the i-th requested tap point (model::kTap* / layer ids),
// rows in position order. Non-owning.
struct TapRows {
  std::vector<const float*> taps;
  int64_t n_rows = 0;
  int64_t n_embd = 0;
};

}  // namespace dspark::model
