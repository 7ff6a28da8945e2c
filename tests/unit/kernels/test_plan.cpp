// The kernel planner (kernels/plan.h, planner.h, planned_backend.h): the decision from made-up
// timings for every CPU class (AVX2 only, AVX-512 VNNI without AMX, AVX-512 with AMX) on any
// machine, the timing rounds through a fake timer, and the planned dispatch's bits against the
// scalar reference for every weight type and every path this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "core/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu.h"
#include "kernels/packed.h"
#include "kernels/plan.h"
#include "kernels/planned_backend.h"
#include "kernels/planner.h"

namespace dspark::kernels {
namespace {

using P = KernelPath;
const PlanCaps kAvx2{Isa::kAvx2, false}, kAvx512{Isa::kAvx512, false}, kAmx{Isa::kAvx512, true};

// A fake timer: ms from a function of (type, path, n); records every call.
class FakeTimer final : public PlanTimer {
 public:
  using Fn = std::function<double(DType, P, int64_t)>;
  explicit FakeTimer(Fn fn) : fn_(std::move(fn)) {}
  Result<double> run_ms(DType t, P p, int64_t n) override {
    calls.emplace_back(t, p, n);
    return fn_(t, p, n);
  }
  int64_t rows_timed(DType, int64_t) const override { return 64; }
  int64_t cols_timed(DType) const override { return 256; }
  Result<double> stream_ms(DType t, P p) override {
    stream_calls.emplace_back(t, p);
    return stream ? stream(t, p) : -1.0;
  }
  std::vector<std::tuple<DType, P, int64_t>> calls;
  std::function<double(DType, P)> stream;  // unset: streams not timed
  std::vector<std::pair<DType, P>> stream_calls;

 private:
  Fn fn_;
};

std::vector<P> paths_of(const TypePlan& tp) { return std::vector<P>(tp.path.begin(), tp.path.end()); }

double timing_of_for_test(const KernelPlan& plan, DType t, int64_t n, P p) {
  for (const PlanTiming& x : plan.timings)
    if (x.type == t && x.n == n && x.path == p) return x.ms;
  return -1;
}

TEST(Plan, CandidatesPerCpuClass) {
  EXPECT_EQ(candidate_paths(DType::Q8_0, 1, kAvx2), (std::vector<P>{P::kPacked8, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::Q8_0, 1, kAvx512),
            (std::vector<P>{P::kPacked16, P::kPacked16Hw, P::kPacked8, P::kAvx512, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::Q8_0, 2, kAvx512), (std::vector<P>{P::kPacked16, P::kPacked8, P::kAvx512, P::kAvx2}));
  // AMX only from cpu::amx_min_tokens: 5 for Q8_0, 8 for the others.
  EXPECT_EQ(candidate_paths(DType::Q8_0, 4, kAmx), (std::vector<P>{P::kPacked16, P::kPacked8, P::kAvx512, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::Q8_0, 8, kAmx),
            (std::vector<P>{P::kPacked16, P::kPacked8, P::kAmx, P::kAvx512, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::Q4_K, 4, kAmx), (std::vector<P>{P::kPacked16, P::kPacked8, P::kAvx512, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::Q4_K, 8, kAmx).size(), 5u);
  // Q5_K: no packed record; AMX yes. F16: unpacked only. Scalar CPU: nothing.
  EXPECT_EQ(candidate_paths(DType::Q5_K, 16, kAmx), (std::vector<P>{P::kAmx, P::kAvx512, P::kAvx2}));
  EXPECT_EQ(candidate_paths(DType::F16, 512, kAmx), (std::vector<P>{P::kAvx512, P::kAvx2}));
  EXPECT_TRUE(candidate_paths(DType::Q8_0, 1, PlanCaps{Isa::kScalar, false}).empty());
}

TEST(Plan, AmxTypesAgreeWithTheAmxFile) {
  if (detect_isa() < Isa::kAvx512) GTEST_SKIP() << "cpu::amx_supports lives in the AVX-512/AMX file";
  for (DType t : test::all_weight_types()) {
    const auto c = candidate_paths(t, 512, kAmx);
    EXPECT_EQ(std::find(c.begin(), c.end(), P::kAmx) != c.end(), cpu::amx_supports(t)) << dtype_name(t);
  }
}

TEST(Plan, Buckets) {
  KernelPlan p;
  p.chunk = 512;
  const std::vector<std::pair<int64_t, int>> want = {{1, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {7, 2}, {8, 3}, {15, 3},
                                                     {16, 4}, {90, 4}, {91, 5}, {512, 5}, {4096, 5}};
  for (auto [n, b] : want) EXPECT_EQ(p.bucket_of(n), b) << n;  // 90^2 = 8100 < 16 * 512 = 8192 <= 91^2
  EXPECT_EQ(p.bucket_tokens(5), 512);
}

// AVX2-only CPU: packed8 against avx2; unpacked wins the chunk here, so the type keeps both copies.
TEST(Plan, DecideAvx2Only) {
  std::vector<PlanTiming> t;
  for (int64_t n : {1, 2, 4, 8, 16, 512}) {
    t.push_back({DType::Q8_0, n, P::kPacked8, n < 512 ? 1.0 : 10.0});
    t.push_back({DType::Q8_0, n, P::kAvx2, n < 512 ? 2.0 : 8.0});
  }
  const KernelPlan plan = decide_plan(kAvx2, 512, {DType::Q8_0}, t);
  ASSERT_EQ(plan.types.size(), 1u);
  EXPECT_EQ(paths_of(plan.types[0]), (std::vector<P>{P::kPacked8, P::kPacked8, P::kPacked8, P::kPacked8, P::kPacked8, P::kAvx2}));
  EXPECT_EQ(plan.types[0].packed_rows, 8);
  EXPECT_TRUE(plan.types[0].needs_source);
  EXPECT_EQ(plan.path_for(DType::Q8_0, 3, P::kScalar), P::kPacked8);
  EXPECT_EQ(plan.path_for(DType::Q8_0, 300, P::kScalar), P::kAvx2);
  EXPECT_EQ(plan.path_for(DType::Q6_K, 1, P::kAvx512), P::kAvx512);  // not planned: the fallback
}

// AVX-512 without AMX: the packed x16 path wins everywhere: one copy, no source pages needed.
TEST(Plan, DecideAvx512NoAmx) {
  std::vector<PlanTiming> t;
  for (int64_t n : {1, 2, 4, 8, 16, 512})
    for (P p : candidate_paths(DType::Q4_K, n, kAvx512))
      t.push_back({DType::Q4_K, n, p, p == P::kPacked16 ? 1.0 : p == P::kPacked8 ? 1.5 : 2.5});
  const KernelPlan plan = decide_plan(kAvx512, 512, {DType::Q4_K}, t);
  EXPECT_EQ(paths_of(plan.types[0]), std::vector<P>(6, P::kPacked16));
  EXPECT_EQ(plan.types[0].packed_rows, 16);
  EXPECT_FALSE(plan.types[0].needs_source);
}

// AVX-512 with AMX (the machine class): packed x16 for decode and small windows, AMX from
// where it wins; ties within the margin go to the packed path.
TEST(Plan, DecideAvx512WithAmx) {
  std::vector<PlanTiming> t;
  auto ms = [](P p, int64_t n) {
    switch (p) {
      case P::kPacked16: return 0.5 * (double)n;
      case P::kAmx: return 4.0 + 0.01 * (double)n;  // flat: pays from 16 tokens
      case P::kPacked8: return 0.7 * (double)n;
      default: return 1.0 * (double)n;
    }
  };
  for (DType ty : {DType::Q8_0, DType::Q6_K})
    for (int64_t n : {1, 2, 4, 8, 16, 512})
      for (P p : candidate_paths(ty, n, kAmx)) t.push_back({ty, n, p, ms(p, n)});
  t.push_back({DType::Q5_K, 512, P::kAmx, 3.0});  // only some timings: the rest fall to the first candidate
  const KernelPlan plan = decide_plan(kAmx, 512, {DType::Q8_0, DType::Q6_K, DType::Q5_K}, t);
  ASSERT_EQ(plan.types.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(paths_of(plan.types[(size_t)i]),
              (std::vector<P>{P::kPacked16, P::kPacked16, P::kPacked16, P::kPacked16, P::kAmx, P::kAmx}));
    EXPECT_EQ(plan.types[(size_t)i].packed_rows, 16);
    EXPECT_TRUE(plan.types[(size_t)i].needs_source);
  }
  EXPECT_EQ(paths_of(plan.types[2]), (std::vector<P>{P::kAvx512, P::kAvx512, P::kAvx512, P::kAmx, P::kAmx, P::kAmx}));
  EXPECT_EQ(plan.types[2].packed_rows, 0);
  // Within the margin the packed path stays: AMX 2 % faster at 8 tokens is not taken.
  std::vector<PlanTiming> close = {{DType::Q8_0, 8, P::kPacked16, 1.00}, {DType::Q8_0, 8, P::kAmx, 0.98}};
  EXPECT_EQ(decide_plan(kAmx, 512, {DType::Q8_0}, close, 0.03).types[0].path[3], P::kPacked16);
  EXPECT_EQ(decide_plan(kAmx, 512, {DType::Q8_0}, close, 0.01).types[0].path[3], P::kAmx);
}

// One packed layout per type: x8 winning two buckets and x16 four leaves x16 (the x8 buckets choose
// again without x8).
TEST(Plan, OnePackedLayoutPerType) {
  std::vector<PlanTiming> t;
  for (int64_t n : {1, 2, 4, 8, 16, 512}) {
    const bool x8 = n == 2 || n == 4;
    t.push_back({DType::Q5_0, n, P::kPacked16, x8 ? 1.2 : 1.0});
    t.push_back({DType::Q5_0, n, P::kPacked8, x8 ? 1.0 : 1.3});
    t.push_back({DType::Q5_0, n, P::kAvx512, x8 ? 1.1 : 2.0});
  }
  const KernelPlan plan = decide_plan(kAvx512, 512, {DType::Q5_0}, t);
  EXPECT_EQ(paths_of(plan.types[0]),
            (std::vector<P>{P::kPacked16, P::kAvx512, P::kAvx512, P::kPacked16, P::kPacked16, P::kPacked16}));
  EXPECT_EQ(plan.types[0].packed_rows, 16);
}

// The whole planning run through a fake timer, for each CPU class: only candidates are timed, each
// `rounds` times, buckets with one candidate not at all; the best of the rounds counts.
TEST(Plan, MakePlanWithFakeTimer) {
  for (const PlanCaps& caps : {kAvx2, kAvx512, kAmx}) {
    int call = 0;
    FakeTimer timer([&](DType, P p, int64_t n) {
      ++call;
      const double noise = call % 3 == 0 ? 5.0 : 0.0;  // one round in three is slow: the best ignores it
      if (p == P::kAmx) return (n >= 16 ? 0.1 : 3.0) + noise;
      return (p == P::kPacked16 || (p == P::kPacked8 && caps.isa == Isa::kAvx2) ? 1.0 : 2.0) + noise;
    });
    PlanRequest req;
    req.caps = caps;
    req.types = {DType::Q8_0, DType::F16};
    req.rounds = 3;
    auto plan = make_plan(req, timer);
    ASSERT_TRUE(plan.is_ok()) << plan.message();
    size_t min_calls = 0, max_calls = 0;  // rounds x candidates, plus the confirmation rounds at most
    for (DType t : req.types)
      for (int b = 0; b < kPlanBuckets; ++b) {
        const size_t c = candidate_paths(t, plan->bucket_tokens(b), caps).size();
        if (c >= 2) min_calls += 3 * c, max_calls += (3 + (size_t)req.confirm_rounds) * c;
      }
    EXPECT_GE(timer.calls.size(), min_calls) << plan_caps_name(caps);
    EXPECT_LE(timer.calls.size(), max_calls) << plan_caps_name(caps);
    for (auto& [t, p, n] : timer.calls) {
      const auto c = candidate_paths(t, n, caps);
      EXPECT_NE(std::find(c.begin(), c.end(), p), c.end());
    }
    const TypePlan* q8 = plan->find(DType::Q8_0);
    ASSERT_NE(q8, nullptr);
    const P small = caps.isa == Isa::kAvx2 ? P::kPacked8 : P::kPacked16;
    EXPECT_EQ(q8->path[0], small) << plan_caps_name(caps);
    EXPECT_EQ(q8->path[5], caps.amx ? P::kAmx : small) << plan_caps_name(caps);
    EXPECT_EQ(q8->path[4], caps.amx ? P::kAmx : small) << plan_caps_name(caps);
    EXPECT_EQ(q8->path[3], small) << plan_caps_name(caps);
    EXPECT_EQ(plan->find(DType::F16)->packed_rows, 0);
    EXPECT_EQ(plan->threads, 1);
    EXPECT_FALSE(plan_summary(*plan).empty());
    EXPECT_NE(plan_timings_table(*plan).find("*"), std::string::npos);
    EXPECT_EQ(timer.stream_calls.size(), std::count_if(timer.calls.begin(), timer.calls.end(), [](const auto& c) {
                return std::get<2>(c) == 1;  // no stream here: each n = 1 timing asked for one, then ran on the slice
              }));
  }
  PlanRequest bad;
  bad.chunk = 16;
  FakeTimer t([](DType, P, int64_t) { return 1.0; });
  EXPECT_FALSE(make_plan(bad, t).is_ok());
}

// The n = 1 bucket is timed on the stream where the timer has one (never on the slice), every
// candidate including packed16-hw (the x16 kernels without the single token's software prefetch),
// which wins only by more than the margin: the plan keeps one x16 copy either way.
TEST(Plan, DecodeBucketTimedOnTheStream) {
  for (double hw_ms : {0.90, 0.99, 1.20}) {
    // On the slice packed16 wins everywhere; on the stream, packed16-hw by (1 - hw_ms).
    FakeTimer timer([](DType, P p, int64_t) { return p == P::kPacked16 ? 1.0 : 2.0; });
    int pass = 0;
    timer.stream = [&](DType, P p) {
      ++pass;
      const double base = p == P::kPacked16 ? 10.0 : p == P::kPacked16Hw ? 10.0 * hw_ms : 12.0;
      return base + (pass == 2 ? 50.0 : 0.0);  // one slow pass: the best of the rounds ignores it
    };
    PlanRequest req;
    req.caps = kAvx512;
    req.types = {DType::Q4_1};
    auto plan = make_plan(req, timer);
    ASSERT_TRUE(plan.is_ok()) << plan.message();
    const TypePlan* q = plan->find(DType::Q4_1);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->path[0], hw_ms < 0.97 ? P::kPacked16Hw : P::kPacked16) << hw_ms;
    for (int b = 1; b < kPlanBuckets; ++b) EXPECT_EQ(q->path[(size_t)b], P::kPacked16);
    EXPECT_EQ(q->packed_rows, 16);
    EXPECT_FALSE(q->needs_source);
    EXPECT_GE(timer.stream_calls.size(), (size_t)req.rounds * candidate_paths(DType::Q4_1, 1, kAvx512).size());
    for (auto& [t, p, n] : timer.calls) EXPECT_NE(n, 1);  // n = 1 ran on the stream only
    EXPECT_DOUBLE_EQ(timing_of_for_test(*plan, DType::Q4_1, 1, P::kPacked16), 10.0);
  }
  // An AVX2-only CPU: no x16 layout, so no packed16-hw candidate; its n = 1 bucket still streams.
  FakeTimer timer([](DType, P p, int64_t) { return p == P::kPacked8 ? 1.0 : 2.0; });
  timer.stream = [](DType, P p) { return p == P::kAvx2 ? 1.0 : 2.0; };
  PlanRequest req;
  req.caps = kAvx2;
  req.types = {DType::Q4_1};
  auto plan = make_plan(req, timer);
  ASSERT_TRUE(plan.is_ok());
  for (auto& [t, p] : timer.stream_calls) EXPECT_NE(p, P::kPacked16Hw);
  EXPECT_EQ(plan->find(DType::Q4_1)->path[0], P::kAvx2);
  EXPECT_EQ(plan->find(DType::Q4_1)->path[1], P::kPacked8);
}

// A slow stretch of the machine that covers the preferred path's first runs must not move the bucket:
// a rival that beat those inflated runs is timed again against it, and the preferred path's quiet
// runs win. A rival that is really faster still wins after the confirmation.
TEST(Plan, ConfirmationRoundsKeepThePreferredPathThroughANoisyStart) {
  for (double rival_ms : {1.1, 0.5}) {  // slower than the preferred path's quiet 1.0; really faster
    int preferred_runs = 0;
    FakeTimer timer([&](DType, P p, int64_t) {
      if (p == P::kPacked16) return ++preferred_runs <= 3 ? 5.0 : 1.0;  // the first 3 runs hit a slow stretch
      return p == P::kAvx2 ? rival_ms : 9.0;
    });
    PlanRequest req;
    req.caps = kAvx512;
    req.types = {DType::Q8_0};
    req.rounds = 3;
    auto plan = make_plan(req, timer);
    ASSERT_TRUE(plan.is_ok()) << plan.message();
    const P want = rival_ms < 1.0 ? P::kAvx2 : P::kPacked16;
    for (int b = 0; b < kPlanBuckets; ++b) EXPECT_EQ(plan->find(DType::Q8_0)->path[(size_t)b], want) << "rival " << rival_ms << " bucket " << b;
    preferred_runs = 0;
    req.confirm_rounds = 0;  // without the confirmation the slow start decides
    timer.calls.clear();
    auto unconfirmed = make_plan(req, timer);
    ASSERT_TRUE(unconfirmed.is_ok());
    EXPECT_EQ(unconfirmed->find(DType::Q8_0)->path[0], P::kAvx2) << "rival " << rival_ms;
  }
}

// The planned dispatch gives the scalar reference's bits for every weight type, whatever path each
// bucket runs: every plan this CPU can run (each single path everywhere, and mixtures), n from 1 to
// 40 tokens (buckets and the counts between them), products over the packed-only fused layout too.
TEST(Plan, PlannedDispatchIsBitwiseTheReference) {
  if (detect_isa() < Isa::kAvx2) GTEST_SKIP() << "no SIMD paths";
  const PlanCaps caps = detect_plan_caps();
  ThreadPool pool(2);
  Rng rng(11);
  for (DType t : test::all_weight_types()) {
    const int64_t cols = dtype_info(t).block_elems == 256 ? 512 : 96;
    auto w = test::make_matrix(rng, t, 48, cols, test::Pattern::kRandom);
    const std::vector<float> x = test::make_values(rng, 40 * cols, test::Pattern::kRandom);
    // The reference: the scalar backend.
    const Backend& scalar = cpu_backend(Isa::kScalar);
    MatmulContext sctx = scalar.matmul_context(&pool);
    std::vector<float> want((size_t)(40 * 48));
    scalar.matmul(sctx, w.m, x.data(), 40, want.data(), 48);
    // Plans: each candidate everywhere it is one, then a mixture (rotating through the candidates).
    std::vector<std::array<P, kPlanBuckets>> plans;
    const std::vector<P> all = candidate_paths(t, 512, caps);
    for (P p : all) {
      std::array<P, kPlanBuckets> a;
      for (int b = 0; b < kPlanBuckets; ++b) a[(size_t)b] = p;
      plans.push_back(a);
      if (p == P::kPacked16) {  // decode without the software prefetch (n = 1 only)
        a[0] = P::kPacked16Hw;
        plans.push_back(a);
      }
    }
    std::array<P, kPlanBuckets> mix;
    for (int b = 0; b < kPlanBuckets; ++b) mix[(size_t)b] = all.empty() ? P::kScalar : all[(size_t)b % all.size()];
    plans.push_back(mix);
    for (const auto& paths : plans) {
      std::vector<PlanTiming> timings;
      KernelPlan plan;
      plan.caps = caps;
      plan.chunk = 32;
      TypePlan tp;
      tp.type = t;
      tp.path = paths;
      for (P p : paths) {
        if (path_packed_rows(p)) tp.packed_rows = path_packed_rows(p);
        else tp.needs_source = true;
      }
      if (std::count(paths.begin(), paths.end(), P::kPacked8) && std::count(paths.begin(), paths.end(), P::kPacked16))
        continue;  // never planned: one packed layout per type
      plan.types.push_back(tp);
      const PlannedCpuBackend be(default_backend(), plan);
      QMatrix m = w.m;
      Buffer storage;
      be.prepare_weight(&m, &storage);
      // A packed-only copy (as model/weights.h's fusions): the buckets with a packed path run it.
      QMatrix fused;
      Buffer fused_storage;
      const QMatrix* parts[] = {&w.m};
      const bool have_fused = be.fused_weight(parts, &fused, &fused_storage);
      MatmulContext ctx = be.matmul_context(&pool);
      for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 40}) {
        std::vector<float> got((size_t)(n * 48), -1.f);
        be.matmul(ctx, m, x.data(), n, got.data(), 48);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << dtype_name(t) << " n " << n << " path " << kernel_path_name(plan.path_for(t, n, P::kScalar));
        if (have_fused && be.prepared_runs(fused, n)) {
          std::fill(got.begin(), got.end(), -1.f);
          be.matmul(ctx, fused, x.data(), n, got.data(), 48);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << dtype_name(t) << " fused n " << n;
        }
      }
      EXPECT_EQ(be.weight_prepared(m), tp.packed_rows != 0 && !tp.needs_source);
    }
  }
}

// A plan timed for real on this CPU (small matrices, so the test stays fast) runs with the
// reference's bits too, and names only paths this CPU has.
TEST(Plan, RealTimerPlanRunsTheReferenceBits) {
  if (detect_isa() < Isa::kAvx2) GTEST_SKIP() << "no SIMD paths";
  Rng rng(5);
  auto w8 = test::make_matrix(rng, DType::Q8_0, 128, 256, test::Pattern::kRandom);
  auto w4 = test::make_matrix(rng, DType::Q4_K, 64, 512, test::Pattern::kRandom);
  PlanRequest req;
  req.caps = detect_plan_caps();
  req.chunk = 32;
  req.threads = 2;
  req.rounds = 1;
  req.types = {DType::Q8_0, DType::Q4_K, DType::Q5_0};
  MatmulPlanTimer timer({{w8.m}, {w4.m}, {QMatrix{DType::Q5_0, 256, 256, nullptr, 0}}}, 2, 32);
  auto plan = make_plan(req, timer);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  EXPECT_EQ(plan->types.size(), 3u);
  for (const PlanTiming& t : plan->timings) EXPECT_GT(t.ms, 0.0);
  if (req.caps.isa == Isa::kAvx512) {  // packed16-hw timed on the stream like every n = 1 candidate
    EXPECT_GT(timing_of_for_test(*plan, DType::Q8_0, 1, P::kPacked16Hw), 0.0);
  }
  const PlannedCpuBackend be(default_backend(), *plan);
  ThreadPool pool(2);
  for (auto* w : {&w8, &w4}) {
    QMatrix m = w->m;
    Buffer storage;
    be.prepare_weight(&m, &storage);
    const std::vector<float> x = test::make_values(rng, 32 * m.n_cols, test::Pattern::kRandom);
    std::vector<float> want((size_t)(32 * m.n_rows)), got(want.size());
    MatmulContext sctx = cpu_backend(Isa::kScalar).matmul_context(&pool), ctx = be.matmul_context(&pool);
    for (int64_t n : {1, 4, 16, 32}) {
      cpu_backend(Isa::kScalar).matmul(sctx, w->m, x.data(), n, want.data(), m.n_rows);
      be.matmul(ctx, m, x.data(), n, got.data(), m.n_rows);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), (size_t)(n * m.n_rows) * 4), 0) << dtype_name(m.type) << " " << n;
    }
  }
}

}  // namespace
}  // namespace dspark::kernels
