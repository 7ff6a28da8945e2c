// The kernel planner: times the candidate paths (kernels/plan.h) of each weight type at each
// bucket's token count and hands the timings to decide_plan. The timer is an interface so the
// whole planning run is unit-tested with made-up timings for any CPU class; MatmulPlanTimer is the
// real one, over a slice of a real matrix of the model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "kernels/plan.h"

namespace dspark::kernels {

class PlanTimer {
 public:
  virtual ~PlanTimer() = default;
  // ms of one matmul of type t's timed matrix over n tokens on path p (one run; the planner
  // repeats and keeps the best). rows / cols: the matrix timed, for reports.
  virtual Result<double> run_ms(DType t, KernelPath p, int64_t n) = 0;
  virtual int64_t rows_timed(DType t, int64_t n) const = 0;
  virtual int64_t cols_timed(DType t) const = 0;
  // ms of one pass of single-token products on path p over a stream of copies of type t's timed matrix
  // as large as the weights a decoded token reads (so that they come from where decode's weights come
  // from: DRAM, or L3 where the model fits); a negative value: no stream (run_ms times n = 1 then).
  virtual Result<double> stream_ms(DType t, KernelPath p) {
    (void)t, (void)p;
    return -1.0;
  }
};

struct PlanRequest {
  PlanCaps caps;
  int64_t chunk = 512;  // prefill chunk (the last bucket), > 16
  int threads = 1;
  std::vector<DType> types;
  double margin = 0.03;
  int rounds = 3;       // runs per (type, n, path), interleaved over the paths; the best counts
  // More runs, interleaved, of the preferred path (the first candidate) and of every path that beat it
  // by more than the margin, before the bucket is decided: the plan is kept for every later start, so
  // one slow moment of a shared machine during the first rounds must not move a bucket off it.
  int confirm_rounds = 4;
};

// Times every candidate of every (type, bucket) with at least two candidates (rounds x, the paths
// of one bucket interleaved so a slow moment of the machine hits them alike; confirm_rounds more for
// the preferred path and the paths that beat it by more than the margin), then decide_plan. The n = 1
// bucket is timed on the timer's stream (stream_ms) where it has one: a decoded token streams the
// whole model's weights, and whether the x16 kernels' software prefetch pays (packed16 against
// packed16-hw) depends on the CPU and on where the weights come from (into L1 8 KB ahead: SmolLM2's
// decode 1.12x on an Intel Xeon, family 6 model 207; ~6 % slower on AMD Zen 4, family 25 model 17).
Result<KernelPlan> make_plan(const PlanRequest& req, PlanTimer& timer);

// A matrix of the model to time for one type: [n_rows, n_cols] of that type; data == nullptr means
// a matrix made at load that the file does not hold (the greedy head's Q5_0 screen,
// model/argmax_head.h): timed on synthetic blocks of that shape (the kernels' speed does not
// depend on the values).
struct PlanMatrix {
  QMatrix m;
  size_t stream_bytes = 0;  // the bytes of weights a decoded token reads in the model (the stream's size)
};

// The real timer: for n <= 16 a slice of up to kSmallSliceBytes of the matrix's first rows (decode
// streams weights: bytes matter), for the chunk up to kChunkSliceElems weights (compute matters),
// both multiples of 64 rows; packed copies of the slices made on first use; activations random.
// The stream (stream_ms): copies of the small slice, in the path's layout (GGUF, x8 or x16), adding up
// to the bytes a decoded token reads (PlanMatrix::stream_bytes), at most kStreamMaxBytes per layout;
// one type's streams held at a time.
class MatmulPlanTimer final : public PlanTimer {
 public:
  static constexpr size_t kSmallSliceBytes = (size_t)4 << 20;
  static constexpr int64_t kChunkSliceElems = (int64_t)1 << 18;
  static constexpr size_t kStreamMaxBytes = (size_t)128 << 20;
  MatmulPlanTimer(std::vector<PlanMatrix> mats, int threads, int64_t chunk);
  ~MatmulPlanTimer() override;
  Result<double> run_ms(DType t, KernelPath p, int64_t n) override;
  int64_t rows_timed(DType t, int64_t n) const override;
  int64_t cols_timed(DType t) const override;
  Result<double> stream_ms(DType t, KernelPath p) override;

 private:
  struct Slot;
  Slot* slot(DType t);
  const Slot* slot(DType t) const;
  // The slot of t when this CPU can run p for t at n tokens, else why not.
  Result<Slot*> slot_for(DType t, KernelPath p, int64_t n);
  // Slice c of s in the layout p reads: its packed copy (made on first use; data == nullptr, so a
  // silent fallback cannot time the wrong kernel) or the GGUF rows.
  static QMatrix in_layout(Slot& s, int c, KernelPath p);
  std::vector<std::unique_ptr<Slot>> slots_;
  ThreadPool pool_;
  MatmulContext ctx_;
  std::vector<float> x_, y_;
  int64_t chunk_;
  DType stream_type_ = DType::F32;
  std::vector<std::vector<uint8_t>> stream_[3];  // the current type's copies of the slice: GGUF, x8, x16
};

}  // namespace dspark::kernels
