// Lloyd-Max scalar quantizer for the standard normal (docs/QUANT-FORMAT.md §4), the TurboQuant codebook:
// alternate boundary = midpoint of neighbouring levels and level = conditional mean of N(0, 1) on
// its cell until nothing moves. Double precision; symmetric, ascending.
// Proof: tests/unit/quant/test_turbo.cpp checks the MSE (0.36338, 0.11748, 0.03455, 0.00950 for
// 1..4 bits) and the positive-half levels, tabulated to 5 decimals.
#pragma once

#include <vector>

namespace dspark::quant {

struct LloydMaxCodebook {
  int bits = 0;
  std::vector<double> levels;      // [2^bits] ascending
  std::vector<double> boundaries;  // [2^bits - 1] ascending; cell i = (boundaries[i-1], boundaries[i])
  double mse = 0;                  // E[(X - q(X))^2] for X ~ N(0, 1)
  int iterations = 0;
};

// bits in 1..8.
LloydMaxCodebook lloyd_max_gaussian(int bits);

// The levels as stored in a checkpoint (f32, ascending), [2^bits].
std::vector<float> turbo_levels(int bits);

}  // namespace dspark::quant
