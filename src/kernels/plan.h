// The kernel plan: which matmul path (kernels.h KernelPath) runs each weight type at each token
// count, chosen at load from timings of the paths this CPU has (kernels/planner.h times them; the
// runtime caches the result, runtime/kernel_plan_file.h). Everything here is pure: candidates and
// timings in, a plan out, so the decision is unit-tested with made-up timings for any CPU class
// (tests/unit/kernels/test_plan.cpp) on any machine.
//
// Token counts ("buckets"): 1, 2, 4, 8, 16 (decode and speculative verify windows) and the prefill
// chunk (SessionOptions::max_batch, 512 by default). A product over n tokens uses the bucket
// bucket_of(n): for n <= 16 the largest bucket <= n; above 16 the nearer of 16 and the chunk on a
// log scale (n^2 >= 16 * chunk: the chunk's).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace dspark::kernels {

// What the CPU offers the plan: its ISA and whether AMX-INT8 is usable (cpu::amx_usable()).
struct PlanCaps {
  Isa isa = Isa::kScalar;
  bool amx = false;
};
PlanCaps detect_plan_caps();
std::string plan_caps_name(const PlanCaps& c);  // "avx512-vnni", "avx512-vnni+amx", "avx2", "scalar"

inline constexpr int kPlanBuckets = 6;
inline constexpr int64_t kPlanSmallTokens[kPlanBuckets - 1] = {1, 2, 4, 8, 16};

// Types with a packed record (kernels/packed.h) whatever the CPU: Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K.
bool packable(DType t);

// The paths a CPU with `caps` has for weight type t at n tokens, in preference order (ties within
// the plan's margin go to the earlier one: packed copies first, since a packed type's matrices
// also run fused, model/weights.h): packed16, packed16-hw (n == 1: the x16 kernels without the single
// token's software prefetch), packed8, amx (n >= cpu::amx_min_tokens(t)), avx512, avx2. Empty: the
// scalar path only.
std::vector<KernelPath> candidate_paths(DType t, int64_t n, const PlanCaps& caps);

// One measurement behind a plan: the best ms of a matmul of the type's timed matrix over n tokens.
struct PlanTiming {
  DType type = DType::F32;
  int64_t n = 0;
  KernelPath path = KernelPath::kScalar;
  double ms = 0;
};

// The plan of one weight type.
struct TypePlan {
  DType type = DType::F32;
  std::array<KernelPath, kPlanBuckets> path{};  // bucket b's path
  int packed_rows = 0;       // rows per group of the packed copy its paths need: 0 (none), 8 or 16
  bool needs_source = false; // some bucket runs the GGUF layout (avx2, avx512, amx, scalar)
  int64_t rows_timed = 0, cols_timed = 0;  // the matrix slice the timings ran on [rows, cols]
};

struct KernelPlan {
  PlanCaps caps;
  int64_t chunk = 512;  // the last bucket's token count (> 16)
  int threads = 1;      // the pool size the timings ran with
  double margin = 0.03; // a preferred path within this fraction of the fastest wins
  std::vector<TypePlan> types;
  std::vector<PlanTiming> timings;  // every measurement, for reports (bench -v)

  int64_t bucket_tokens(int b) const { return b < kPlanBuckets - 1 ? kPlanSmallTokens[b] : chunk; }
  int bucket_of(int64_t n) const;
  const TypePlan* find(DType t) const;
  // The planned path for t at n tokens, or `fallback` when t is not planned.
  KernelPath path_for(DType t, int64_t n, KernelPath fallback) const {
    const TypePlan* p = find(t);
    return p ? p->path[(size_t)bucket_of(n)] : fallback;
  }
};

// The decision: for every type and bucket, among candidate_paths with a timing, the fastest, or
// the first in preference order within `margin` of it; a bucket with no timed candidate takes the
// first candidate (scalar when none). One packed layout per type: when buckets chose both x16 and
// x8, the layout chosen by more buckets (x16 on a tie) stays and the others choose again without
// the other layout, so each type keeps at most one packed copy.
KernelPlan decide_plan(const PlanCaps& caps, int64_t chunk, const std::vector<DType>& types,
                       const std::vector<PlanTiming>& timings, double margin = 0.03);

// Whether path p reads the packed copy (and of how many rows per group: 8, 16; 0 = the GGUF layout).
int path_packed_rows(KernelPath p);

// One line per type: "Q8_0: n1 packed16, n2 packed16, n4 packed16, n8 packed16, n16 amx, n512 amx; a
// packed x16 copy, and the GGUF pages stay mapped" (the weight copies the plan keeps).
std::string plan_summary(const KernelPlan& plan);
// A markdown table of the timings (ms per product) with the chosen path marked *.
std::string plan_timings_table(const KernelPlan& plan);

}  // namespace dspark::kernels
