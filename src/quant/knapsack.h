// Bit allocation for a drafter: the greedy knapsack over a sensitivity table (docs/QUANT-FORMAT.md §7).
//
// Each tensor has candidate formats (method, bits, group) with their true bits per weight (scales
// and biases included) and a measured sensitivity KL (the drafter's draft distributions with only
// that tensor simulate-quantized, vs the unquantized drafter). Every tensor starts at its cheapest
// candidate; then, while the budget allows, the upgrade with the largest KL reduction per extra
// byte is applied (a tensor's upgrade may jump to any costlier candidate with a lower KL, so a
// method switch at equal bits is an upgrade too). The budget is a CEILING: total bits <= target
// bpw x total weights (optiq treats it as a floor; ours is a bytes budget, so it must not be
// exceeded). Upgrades that do not fit are skipped and smaller ones still considered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::quant {

struct Candidate {
  std::string method;    // "affine" | "turbo" | "none" (kept in bf16)
  int bits = 0;          // 16 for "none"
  int group = 0;         // 0 for "none"
  double bpw = 0;        // bits per weight including scales / biases
  double kl = 0;         // sensitivity; NaN or inf = maximal
};

struct TensorSensitivity {
  std::string name;
  int64_t params = 0;
  std::vector<Candidate> candidates;
};

struct Allocation {
  std::vector<size_t> choice;   // per tensor: index into its candidates
  double total_bits = 0;
  double bpw = 0;               // total_bits / total params
  double total_kl = 0;          // sum of the chosen candidates' KL (the additive surrogate)
  int64_t upgrades = 0;
};

// Greedy allocation under target_bpw (a ceiling). Errors: empty table, a tensor without
// candidates or weights, or a target below the cheapest possible mix (named in the message).
Result<Allocation> allocate_bits(const std::vector<TensorSensitivity>& table, double target_bpw);

}  // namespace dspark::quant
