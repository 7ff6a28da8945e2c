// Acceptance rules of speculative decoding, as pure functions (no model): DSPARK.md §4.3.
//
// Greedy (temperature 0): accept while the target's argmax equals the draft; the next token is
// the argmax of the first mismatching row (or of the last row: the bonus). Output equals plain
// greedy decoding of the target.
// Rejection sampling (temperature > 0): accept draft i with probability min(1, p_i(d_i) / q_i(d_i));
// on the first rejection draw from norm(max(p_i - q_i, 0)) (p_i if that has no mass); after a full
// acceptance draw the bonus from p_d. The emitted tokens are distributed exactly as the target's.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "sample/sampler.h"

namespace dspark::spec {

using SparseDist = std::vector<std::pair<int32_t, float>>;  // (token, prob), sums to 1

struct Acceptance {
  int n_accept = 0;      // leading drafts accepted
  int32_t next = -1;     // correction (after a rejection) or bonus token
};

// target_argmax: [d + 1] argmax of each verify row; drafts: [d].
Acceptance accept_greedy(std::span<const int32_t> target_argmax, std::span<const int32_t> drafts);

// p: [d + 1] target distributions after the request's sampler transforms (sample::Sampler::
// distribution); q: [d] the draft distributions the drafts were drawn from.
Acceptance accept_rejection(std::span<const std::vector<sample::TokenProb>> p, std::span<const int32_t> drafts,
                            std::span<const SparseDist> q, Rng& rng);

}  // namespace dspark::spec
