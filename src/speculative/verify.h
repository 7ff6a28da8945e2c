// Acceptance rules of speculative decoding, as pure functions (no model); temperature > 0:
// docs/SAMPLING.md, 'Speculative acceptance at temperature > 0'.
//
// Greedy (temperature 0): accept while the target's argmax equals the draft; the next token is
// the argmax of the first mismatching row (or of the last row: the bonus). Output equals plain
// greedy decoding of the target.
// Rejection sampling (temperature > 0): accept draft i with probability min(1, p_i(d_i) / q_i(d_i));
// on the first rejection draw from norm(max(p_i - q_i, 0)) (p_i if that has no mass); after a full
// acceptance draw the bonus from p_d. The emitted tokens are distributed exactly as the target's.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "sample/sampler.h"

namespace dspark::speculative {

using SparseDist = std::vector<sample::IdProb>;  // (token, prob), sums to 1

struct Acceptance {
  int n_accept = 0;      // leading drafts accepted
  int32_t next = -1;     // correction (after a rejection) or bonus token
};

// target_argmax: [d + 1] argmax of each verify row; drafts: [d].
Acceptance accept_greedy(std::span<const int32_t> target_argmax, std::span<const int32_t> drafts);

// p_row(i), i <= d: the target's distribution for verify row i after the request's sampler
// transforms (sample::Sampler::row), built on demand and valid until the next call: rows after the
// first rejection are never built. q: [d] the draft distributions the drafts were drawn from.
using RowSource = std::function<const sample::RowDist&(int row)>;
Acceptance accept_rejection(const RowSource& p_row, std::span<const int32_t> drafts, std::span<const SparseDist> q,
                            Rng& rng);

// The same rule over explicit lists (p: [d + 1] from sample::distribution_reference): the oracle
// of accept_rejection, consuming the same random numbers.
Acceptance accept_rejection_ref(std::span<const std::vector<sample::TokenProb>> p, std::span<const int32_t> drafts,
                                std::span<const SparseDist> q, Rng& rng);

}  // namespace dspark::speculative
