// What a server slot's round costs when several slots verify in one batched forward
// (Model::forward_multi), so that each slot's draft-length governor weighs the right numbers.
//
// A batched forward over R rows (every busy slot's window: its pending token plus its drafts)
// costs T(R) ms. A slot whose window has w rows is charged
//
//     charge = T(n) / n  +  T(R) - T(R - (w - 1))      (n = slots in the forward)
//
// its share of the forward the same slots would have run with no drafts at all, plus what its
// draft rows add at the margin. With these charges a slot's governor drafts exactly when its extra
// tokens per extra millisecond beat the batch's plain rate n / T(n): adding d rows that yield
// E - 1 more tokens pays iff (E - 1) / (T(R) - T(R - d)) > n / T(n) (when the others are plain),
// which is the batch's own rule. Charging by rows (w / R of the forward) instead hides what the
// extra rows cost and gives a plain slot a share of its neighbours' drafts.
//
// T(R) is a moving average per R measured from the forwards themselves; a row count not yet seen
// is estimated from a prior table (one sequence's verify cost by window size, measured at start-up)
// scaled by how the measured forwards compare with it, else interpolated linearly between measured
// row counts. The charges are finally scaled so that they describe this forward's measured time.
// Thread safety: none (the scheduler thread owns it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dspark::serve {

class BatchCost {
 public:
  // `prior_ms[r]`: one forward over r rows (index 0 unused); may be empty. `max_rows`: the largest
  // forward (slots x largest window).
  BatchCost(std::vector<double> prior_ms, int64_t max_rows);

  // One forward over `rows` rows took `ms`.
  void observe(int64_t rows, double ms);
  // Estimated T(rows) in ms (0 for rows <= 0; 0 when nothing is known at all).
  double cost(int64_t rows) const;

  // The charges (ms) of a forward over windows of `windows[i]` rows that took `ms`, by the rule
  // above. Falls back to a split by rows while the estimates cannot tell the margin.
  std::vector<double> charges(std::span<const int64_t> windows, double ms) const;

 private:
  struct Ema {
    double v = 0;
    int64_t n = 0;
  };
  double prior(int64_t rows) const;  // the prior table, extrapolated linearly past its end

  std::vector<double> prior_;
  std::vector<Ema> t_;  // [max_rows + 1] measured T(rows)
  Ema scale_;           // measured / prior
};

}  // namespace dspark::serve
