// The kernel planner (kernels/planner.h): timing rounds over the candidates, and the real timer.
#include "kernels/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/rng.h"
#include "kernels/packed.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {

Result<KernelPlan> make_plan(const PlanRequest& req, PlanTimer& timer) {
  if (req.chunk <= 16) return Status::error("kernel plan: the prefill chunk must exceed 16 tokens");
  KernelPlan shape;  // for bucket_tokens
  shape.chunk = req.chunk;
  std::vector<PlanTiming> timings;
  for (DType t : req.types) {
    for (int b = 0; b < kPlanBuckets; ++b) {
      const int64_t n = shape.bucket_tokens(b);
      const std::vector<KernelPath> cands = candidate_paths(t, n, req.caps);
      if (cands.size() < 2) continue;  // nothing to choose
      std::vector<double> best(cands.size(), std::numeric_limits<double>::infinity());
      auto time_round = [&](const std::vector<size_t>& which) -> Status {
        for (size_t i : which) {
          Result<double> ms = n == 1 ? timer.stream_ms(t, cands[i]) : Result<double>(-1.0);
          if (ms && *ms < 0) ms = timer.run_ms(t, cands[i], n);
          if (!ms) return ms.status();
          best[i] = std::min(best[i], *ms);
        }
        return Status::ok();
      };
      std::vector<size_t> all(cands.size());
      for (size_t i = 0; i < cands.size(); ++i) all[i] = i;
      for (int r = 0; r < std::max(1, req.rounds); ++r) DSPARK_RETURN_IF_ERROR(time_round(all));
      // Seen on a KVM Xeon (AVX-512, no AMX): a plan timed while other tenants loaded the host chose
      // the unpacked AVX2 kernel for the Q8_0 head at 1 token (0.269 ms against 0.286 for packed16,
      // both ~5x their quiet times), and decode ran at 341 tok/s against 403 with the plan off.
      std::vector<size_t> contest = {0};
      for (size_t i = 1; i < cands.size(); ++i)
        if (best[i] < best[0] * (1.0 - req.margin)) contest.push_back(i);
      if (contest.size() > 1)
        for (int r = 0; r < req.confirm_rounds; ++r) DSPARK_RETURN_IF_ERROR(time_round(contest));
      for (size_t i = 0; i < cands.size(); ++i) timings.push_back({t, n, cands[i], best[i]});
    }
  }
  KernelPlan plan = decide_plan(req.caps, req.chunk, req.types, timings, req.margin);
  plan.threads = req.threads;
  for (TypePlan& tp : plan.types) {
    tp.rows_timed = timer.rows_timed(tp.type, 1);
    tp.cols_timed = timer.cols_timed(tp.type);
  }
  return plan;
}

// One type's matrix and its two slices (0: n <= 16, 1: the chunk), each with packed copies made on
// first use (index: 0 x8, 1 x16) and a record of which paths have run once (warm-up).
struct MatmulPlanTimer::Slot {
  DType type = DType::F32;
  QMatrix full;
  std::vector<uint8_t> synthetic;  // the bytes of a matrix the file does not hold
  size_t stream_bytes = 0;         // PlanMatrix::stream_bytes
  struct Slice {
    QMatrix m;
    std::vector<uint8_t> packed[2];
    bool warm[kNumKernelPaths] = {};
  } slice[2];
};

namespace {

int64_t slice_rows(const QMatrix& m, bool chunk) {
  const int64_t want = chunk ? MatmulPlanTimer::kChunkSliceElems / std::max<int64_t>(1, m.n_cols)
                             : (int64_t)(MatmulPlanTimer::kSmallSliceBytes / std::max<size_t>(1, m.row_stride));
  return std::min(m.n_rows, std::max<int64_t>(64, want / 64 * 64));
}

}  // namespace

MatmulPlanTimer::MatmulPlanTimer(std::vector<PlanMatrix> mats, int threads, int64_t chunk)
    : pool_(std::max(1, threads)), chunk_(chunk) {
  ctx_.isa = detect_isa();
  ctx_.pool = &pool_;
  int64_t max_cols = 0, max_rows = 0;
  Rng rng(20261206);
  for (PlanMatrix& pm : mats) {
    auto s = std::make_unique<Slot>();
    s->type = pm.m.type;
    s->full = pm.m;
    s->stream_bytes = pm.stream_bytes;
    if (!s->full.data) {  // synthetic: the rows the larger slice needs, quantized from uniform noise
      s->full.row_stride = row_bytes(s->type, s->full.n_cols);
      const int64_t rows = std::max(slice_rows(s->full, false), slice_rows(s->full, true));
      s->synthetic.resize(s->full.row_stride * (size_t)rows);
      std::vector<float> v((size_t)s->full.n_cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (float& e : v) e = (float)(rng.uniform() * 2.0 - 1.0);
        quantize_row_ref(s->type, v.data(), s->synthetic.data() + s->full.row_stride * (size_t)r, s->full.n_cols);
      }
      s->full.data = s->synthetic.data();
      s->full.n_rows = rows;
    }
    for (int c = 0; c < 2; ++c) {
      s->slice[c].m = s->full;
      s->slice[c].m.n_rows = slice_rows(s->full, c == 1);
      s->slice[c].m.packed = nullptr;
      max_rows = std::max(max_rows, s->slice[c].m.n_rows);
    }
    max_cols = std::max(max_cols, s->full.n_cols);
    slots_.push_back(std::move(s));
  }
  x_.resize((size_t)(chunk * max_cols));
  for (float& e : x_) e = (float)(rng.uniform() * 2.0 - 1.0);
  y_.resize((size_t)(chunk * max_rows));
}

MatmulPlanTimer::~MatmulPlanTimer() = default;

MatmulPlanTimer::Slot* MatmulPlanTimer::slot(DType t) {
  for (auto& s : slots_)
    if (s->type == t) return s.get();
  return nullptr;
}
const MatmulPlanTimer::Slot* MatmulPlanTimer::slot(DType t) const {
  for (const auto& s : slots_)
    if (s->type == t) return s.get();
  return nullptr;
}

int64_t MatmulPlanTimer::rows_timed(DType t, int64_t n) const {
  const Slot* s = slot(t);
  return s ? s->slice[n > 16 ? 1 : 0].m.n_rows : 0;
}
int64_t MatmulPlanTimer::cols_timed(DType t) const {
  const Slot* s = slot(t);
  return s ? s->full.n_cols : 0;
}

Result<MatmulPlanTimer::Slot*> MatmulPlanTimer::slot_for(DType t, KernelPath p, int64_t n) {
  Slot* s = slot(t);
  if (!s) return Status::error(std::string("kernel plan: no matrix of type ") + dtype_name(t) + " to time");
  if (n > chunk_) return Status::error("kernel plan: " + std::to_string(n) + " tokens exceed the chunk");
  const std::vector<KernelPath> here = candidate_paths(t, n, detect_plan_caps());
  if (std::find(here.begin(), here.end(), p) == here.end())
    return Status::error(std::string("kernel plan: this CPU cannot run ") + kernel_path_name(p) + " for " + dtype_name(t) +
                         " at " + std::to_string(n) + " tokens");
  return s;
}

QMatrix MatmulPlanTimer::in_layout(Slot& s, int c, KernelPath p) {
  Slot::Slice& sl = s.slice[c];
  QMatrix w = sl.m;
  if (const int rows = path_packed_rows(p)) {
    std::vector<uint8_t>& copy = sl.packed[rows == 16 ? 1 : 0];
    if (copy.empty()) {
      copy.resize(packed_bytes(w, rows));
      pack(w, rows, copy.data());
    }
    w.packed = copy.data();
    w.packed_rows = rows;
    w.data = nullptr;
  }
  return w;
}

Result<double> MatmulPlanTimer::run_ms(DType t, KernelPath p, int64_t n) {
  auto s = slot_for(t, p, n);
  if (!s) return s.status();
  const int c = n > 16 ? 1 : 0;
  Slot::Slice& sl = (*s)->slice[c];
  const QMatrix w = in_layout(**s, c, p);
  using Clock = std::chrono::steady_clock;
  if (!sl.warm[(int)p]) {
    matmul_on(ctx_, p, w, x_.data(), n, y_.data(), w.n_rows);
    sl.warm[(int)p] = true;
  }
  const auto t0 = Clock::now();
  matmul_on(ctx_, p, w, x_.data(), n, y_.data(), w.n_rows);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Result<double> MatmulPlanTimer::stream_ms(DType t, KernelPath p) {
  auto s = slot_for(t, p, 1);
  if (!s) return s.status();
  if (stream_type_ != t)
    for (auto& v : stream_) v.clear();
  stream_type_ = t;
  QMatrix w = in_layout(**s, 0, p);
  const int rows = path_packed_rows(p);
  std::vector<std::vector<uint8_t>>& copies = stream_[rows == 16 ? 2 : rows == 8 ? 1 : 0];
  const bool fresh = copies.empty();
  if (fresh) {  // copies of the slice's bytes in this layout, each its own pages
    const auto* src = rows ? w.packed : static_cast<const uint8_t*>(w.data);
    const size_t bytes = rows ? packed_bytes(w, rows) : w.row_stride * (size_t)w.n_rows;
    const size_t want = std::min(std::max((*s)->stream_bytes, bytes), std::max(kStreamMaxBytes, bytes));
    const size_t n = std::max<size_t>(1, (want + bytes / 2) / bytes);
    for (size_t i = 0; i < n; ++i) copies.emplace_back(src, src + bytes);
  }
  auto pass = [&] {
    for (const std::vector<uint8_t>& c : copies) {
      if (rows) w.packed = c.data();
      else w.data = c.data();
      matmul_on(ctx_, p, w, x_.data(), 1, y_.data(), w.n_rows);
    }
  };
  using Clock = std::chrono::steady_clock;
  if (fresh) pass();  // warm-up: the pages touched, the pool awake
  const auto t0 = Clock::now();
  pass();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace dspark::kernels
