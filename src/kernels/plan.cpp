// The kernel plan's pure decision (kernels/plan.h): candidates and timings in, a plan out.
#include "kernels/plan.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "kernels/cpu/cpu.h"

namespace dspark::kernels {

PlanCaps detect_plan_caps() { return PlanCaps{detect_isa(), cpu::amx_usable()}; }

std::string plan_caps_name(const PlanCaps& c) { return std::string(isa_name(c.isa)) + (c.amx ? "+amx" : ""); }

bool packable(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q4_K ||
         t == DType::Q6_K;
}

namespace {

// The types the unpacked AVX2 / AVX-512 kernel tables cover (cpu/gemm_impl.h fill_kernels): the
// same for both ISAs.
bool has_unpacked_kernels(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::Q4_1: case DType::Q5_1:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::F32: case DType::F16: case DType::BF16:
      return true;
    default: return false;
  }
}

// The types gemm_amx runs (cpu::amx_supports, gemm_amx.cpp; a test checks they agree), kept here
// so the plan's logic never calls into the AMX file on a CPU without it.
bool amx_types(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K;
}

}  // namespace

int KernelPlan::bucket_of(int64_t n) const {
  if (n >= 16) return n * n >= 16 * chunk ? kPlanBuckets - 1 : kPlanBuckets - 2;
  int b = 0;
  while (b + 1 < kPlanBuckets - 1 && kPlanSmallTokens[b + 1] <= n) ++b;
  return b;
}

const TypePlan* KernelPlan::find(DType t) const {
  for (const TypePlan& p : types)
    if (p.type == t) return &p;
  return nullptr;
}

std::vector<KernelPath> candidate_paths(DType t, int64_t n, const PlanCaps& caps) {
  std::vector<KernelPath> v;
  const bool avx512 = caps.isa == Isa::kAvx512, avx2 = caps.isa >= Isa::kAvx2;
  if (avx512 && packable(t)) v.push_back(KernelPath::kPacked16);
  if (avx512 && packable(t) && n == 1) v.push_back(KernelPath::kPacked16Hw);  // the same code but for 1 token
  if (avx2 && packable(t)) v.push_back(KernelPath::kPacked8);
  if (avx512 && caps.amx && amx_types(t) && n >= cpu::amx_min_tokens(t)) v.push_back(KernelPath::kAmx);
  if (avx512 && has_unpacked_kernels(t)) v.push_back(KernelPath::kAvx512);
  if (avx2 && has_unpacked_kernels(t)) v.push_back(KernelPath::kAvx2);
  return v;
}

int path_packed_rows(KernelPath p) {
  return p == KernelPath::kPacked16 || p == KernelPath::kPacked16Hw ? 16 : p == KernelPath::kPacked8 ? 8 : 0;
}

namespace {

// The timing of (t, n, p), or a negative value when there is none.
double timing_of(const std::vector<PlanTiming>& timings, DType t, int64_t n, KernelPath p) {
  for (const PlanTiming& x : timings)
    if (x.type == t && x.n == n && x.path == p) return x.ms;
  return -1;
}

// Bucket choice among `cands` (preference order) minus `excluded`: the first within margin of the
// fastest timed one; the first candidate when none is timed; scalar when there is none.
KernelPath choose(const std::vector<KernelPath>& cands, KernelPath excluded, const std::vector<PlanTiming>& timings,
                  DType t, int64_t n, double margin) {
  double best = std::numeric_limits<double>::infinity();
  KernelPath first = KernelPath::kScalar;
  bool have_first = false;
  for (KernelPath p : cands) {
    if (p == excluded) continue;
    if (!have_first) first = p, have_first = true;
    const double ms = timing_of(timings, t, n, p);
    if (ms >= 0) best = std::min(best, ms);
  }
  if (best == std::numeric_limits<double>::infinity()) return first;
  for (KernelPath p : cands) {
    if (p == excluded) continue;
    const double ms = timing_of(timings, t, n, p);
    if (ms >= 0 && ms <= best * (1.0 + margin)) return p;
  }
  return first;
}

}  // namespace

KernelPlan decide_plan(const PlanCaps& caps, int64_t chunk, const std::vector<DType>& types,
                       const std::vector<PlanTiming>& timings, double margin) {
  KernelPlan plan;
  plan.caps = caps;
  plan.chunk = chunk;
  plan.margin = margin;
  plan.timings = timings;
  for (DType t : types) {
    if (plan.find(t)) continue;
    TypePlan tp;
    tp.type = t;
    auto decide = [&](KernelPath excluded) {
      for (int b = 0; b < kPlanBuckets; ++b) {
        const int64_t n = plan.bucket_tokens(b);
        tp.path[(size_t)b] = choose(candidate_paths(t, n, caps), excluded, timings, t, n, margin);
      }
    };
    decide(KernelPath::kScalar);  // nothing excluded (scalar is never a candidate)
    const auto count = [&](KernelPath p) { return std::count(tp.path.begin(), tp.path.end(), p); };
    const auto n16 = count(KernelPath::kPacked16) + count(KernelPath::kPacked16Hw), n8 = count(KernelPath::kPacked8);
    if (n16 > 0 && n8 > 0) decide(n16 >= n8 ? KernelPath::kPacked8 : KernelPath::kPacked16);
    for (KernelPath p : tp.path) {
      if (path_packed_rows(p)) tp.packed_rows = path_packed_rows(p);
      else tp.needs_source = true;
    }
    plan.types.push_back(tp);
  }
  return plan;
}

std::string plan_summary(const KernelPlan& plan) {
  std::string out;
  for (const TypePlan& tp : plan.types) {
    out += std::string(dtype_name(tp.type)) + ":";
    for (int b = 0; b < kPlanBuckets; ++b)
      out += std::string(b ? ", n" : " n") + std::to_string(plan.bucket_tokens(b)) + " " +
             kernel_path_name(tp.path[(size_t)b]);
    out += tp.packed_rows ? "; a packed x" + std::to_string(tp.packed_rows) + " copy" : std::string("; no packed copy");
    if (tp.packed_rows && tp.needs_source) out += ", and the GGUF pages stay mapped";
    out += "\n";
  }
  return out;
}

std::string plan_timings_table(const KernelPlan& plan) {
  std::string out = "| type | paths | n |";
  for (int b = 0; b < kPlanBuckets; ++b) {  // appended piece by piece: GCC 12 warns (-Wrestrict) on " " + string
    out += ' ';
    out += std::to_string(plan.bucket_tokens(b));
    out += " |";
  }
  out += "\n|---|---|---|";
  for (int b = 0; b < kPlanBuckets; ++b) out += "---:|";
  out += "\n";
  char buf[48];
  for (const TypePlan& tp : plan.types) {
    for (KernelPath p : {KernelPath::kPacked16, KernelPath::kPacked16Hw, KernelPath::kPacked8, KernelPath::kAmx,
                         KernelPath::kAvx512, KernelPath::kAvx2, KernelPath::kScalar}) {  // the preference order
      std::string row;
      bool any = false;
      for (int b = 0; b < kPlanBuckets; ++b) {
        const double ms = timing_of(plan.timings, tp.type, plan.bucket_tokens(b), p);
        if (ms < 0) {
          row += " |";
          continue;
        }
        any = true;
        std::snprintf(buf, sizeof buf, " %.3f%s |", ms, tp.path[(size_t)b] == p ? "*" : "");
        row += buf;
      }
      if (any)
        out += "| " + std::string(dtype_name(tp.type)) + " [" + std::to_string(tp.rows_timed) + " x " +
               std::to_string(tp.cols_timed) + "] | " + kernel_path_name(p) + " | ms |" + row + "\n";
    }
  }
  out += "(n 1: ms of one pass over a stream as large as the weights a decoded token reads, where the planner had one;\n"
         "the other columns: one product over the timed slice)\n";
  return out;
}

}  // namespace dspark::kernels
