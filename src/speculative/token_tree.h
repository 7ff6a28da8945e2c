// Token trees in a greedy round (DraftResult::parent): which branches a round verifies, and which
// branch the target took.
//
// Shape: the drafter proposes its chain plus alternative branches, each token with an estimate of
// the probability that its branch up to it is taken. A branch of L tokens is added while what it
// is expected to add, the sum of its estimates, per millisecond it adds to the verify forward,
// v(rows + L) - v(rows) from the measured verify-cost table, beats the round's own rate,
// E[tokens] / v(rows) with E[tokens] = 1 + the estimates kept so far. A machine whose windows are
// steep therefore keeps a chain; one whose windows cost about what one token costs verifies the
// branches.
// Acceptance (T 0 only): from the pending token's row, follow the child whose token is the target's
// argmax there, as long as there is one; the tokens on that path are accepted and the argmax of its
// last row is the next token: exactly what serial decoding produces, since every row's logits are
// its branch's (model::ForwardOptions::tree_parent).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "speculative/drafter.h"

namespace dspark::speculative {

// Drops the branches of `d` (a tree) that do not pay at verify_ms ([n] ms of a forward over n
// tokens, index 0 unused) and keeps at most max_tokens tokens; a tree left with its chain alone
// becomes a chain (parent cleared). A branch's estimates count gain_scale times (what branches
// have delivered against their estimates so far, TreeCalibration). Returns the branches kept
// besides the chain and the tokens they are expected to add (unscaled).
struct TreePrune {
  int branches = 0;
  double expected = 0;
};
TreePrune prune_tree(DraftResult* d, std::span<const double> verify_ms, int max_tokens, double gain_scale = 1.0);

// What a request's branches delivered against what their estimates promised: the drafter's
// estimates are frequencies in its index, not the target's acceptance (SmolLM2's branches were
// taken in 13-17 % of the rounds that verified them), so the branches are weighed by the measured
// ratio, a moving average over tree rounds like the governor's.
class TreeCalibration {
 public:
  double scale() const { return promised_ > 0 ? std::max(kFloor, delivered_ / promised_) : 1.0; }
  // One tree round: its branches were expected to add `expected` tokens and added `added`.
  void observe(double expected, double added) {
    promised_ = (1 - kAlpha) * promised_ + kAlpha * expected;
    delivered_ = (1 - kAlpha) * delivered_ + kAlpha * added;
  }

 private:
  static constexpr double kAlpha = 0.1, kFloor = 0.05;
  double promised_ = 1.0, delivered_ = 1.0;  // prior: estimates taken at their word
};

// The verify window's parents: row 0 is the pending token (-1), row i + 1 is d.tokens[i].
std::vector<int32_t> window_parents(const DraftResult& d);

struct TreePath {
  std::vector<int> rows;  // accepted rows of the window, in order (each a child of the one before; row 0 excluded)
  int32_t next = 0;       // the target's token after the path
};
// argmax_rows: [rows] the target's argmax per window row; window: the rows' tokens; parent: window_parents().
TreePath accept_tree(std::span<const int32_t> argmax_rows, std::span<const int32_t> window,
                     std::span<const int32_t> parent);

}  // namespace dspark::speculative
