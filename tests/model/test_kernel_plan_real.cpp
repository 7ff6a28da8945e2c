// The kernel planner on the real targets: a plan that alternates packed and GGUF-layout paths over
// the token-count buckets (so fused matrices run for some window sizes and their parts for others)
// gives the unplanned model's logits bitwise, for a prompt and verify windows of 1 to 16 tokens;
// and the plan timed for real on this CPU loads and does the same.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/plan.h"
#include "kernels/planned_backend.h"
#include "real_model.h"

namespace dspark::testing {
namespace {

// Every matmul weight type of the model, alternating its first candidate (packed where the type
// has a packed record) and its first GGUF-layout one across the buckets.
kernels::KernelPlan alternating_plan(const model::ModelWeights& w) {
  const kernels::PlanCaps caps = kernels::detect_plan_caps();
  kernels::KernelPlan plan;
  plan.caps = caps;
  plan.chunk = 512;
  std::vector<DType> types;
  for (const model::LayerWeights& L : w.layers)
    for (const kernels::QMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      if (std::find(types.begin(), types.end(), m->type) == types.end()) types.push_back(m->type);
  for (DType t : {w.output.type, DType::Q5_0})
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  for (DType t : types) {
    kernels::TypePlan tp;
    tp.type = t;
    for (int b = 0; b < kernels::kPlanBuckets; ++b) {
      const auto c = kernels::candidate_paths(t, plan.bucket_tokens(b), caps);
      kernels::KernelPath p = c.empty() ? kernels::KernelPath::kScalar : c.front();
      if (b % 2 == 1)
        for (kernels::KernelPath q : c)
          if (!kernels::path_packed_rows(q)) { p = q; break; }
      tp.path[(size_t)b] = p;
      if (kernels::path_packed_rows(p)) tp.packed_rows = kernels::path_packed_rows(p);
      else tp.needs_source = true;
    }
    plan.types.push_back(tp);
  }
  return plan;
}

void expect_same_logits(const model::Model& a, const model::Model& b, const tokenizer::Tokenizer& tok) {
  const model::SessionOptions opt{.n_ctx = 256, .max_batch = 64};
  model::Session sa(a, opt, &test_pool()), sb(b, opt, &test_pool());
  const model::ForwardOptions all{model::LogitsMode::kAll, {}};
  const int64_t V = a.config().n_vocab;
  std::vector<int32_t> prompt = tok.encode("The history of the city begins with a small harbour where fishermen", true, false);
  ASSERT_TRUE(a.forward(sa, prompt, all).is_ok());
  ASSERT_TRUE(b.forward(sb, prompt, all).is_ok());
  ASSERT_EQ(std::memcmp(sa.logits(), sb.logits(), prompt.size() * V * sizeof(float)), 0) << "prompt";
  for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16}) {
    std::vector<int32_t> win;
    for (int64_t i = 0; i < n; ++i) win.push_back(prompt[(size_t)(1 + i % (int64_t)(prompt.size() - 1))]);
    ASSERT_TRUE(a.forward(sa, win, all).is_ok());
    ASSERT_TRUE(b.forward(sb, win, all).is_ok());
    ASSERT_EQ(std::memcmp(sa.logits(), sb.logits(), (size_t)n * V * sizeof(float)), 0) << "window of " << n;
  }
}

void check_model(runtime::LoadedModel* lm) {
  if (kernels::detect_isa() < kernels::Isa::kAvx2) GTEST_SKIP() << "no SIMD paths to plan";
  const kernels::PlannedCpuBackend be(kernels::default_backend(), alternating_plan(lm->model->weights()));
  auto planned = runtime::load_model(lm->path, "", "", be);
  ASSERT_TRUE(planned.is_ok()) << planned.message();
  expect_same_logits(*planned->model, *lm->model, *lm->tok);
}

TEST(KernelPlanReal, AlternatingPlanIsBitwiseGemma) {
  DSPARK_REQUIRE_REAL_MODEL();
  check_model(real_model());
}

TEST(KernelPlanReal, AlternatingPlanIsBitwiseSmolLM2) {
  DSPARK_REQUIRE_SMOLLM2();
  check_model(real_smollm2());
}

TEST(KernelPlanReal, TimedPlanLoadsAndIsBitwise) {
  DSPARK_REQUIRE_SMOLLM2();
  const std::string file = ::testing::TempDir() + "dspark_real.plan";
  std::remove(file.c_str());
  auto lm = runtime::load_model(real_smollm2()->path, "", "", runtime::BackendFlags{"", file, 2, 512, nullptr, {}});
  ASSERT_TRUE(lm.is_ok()) << lm.message();
  ASSERT_NE(lm->backend.planned, nullptr);
  EXPECT_NE(lm->backend.plan_status.find("planned in"), std::string::npos);
  expect_same_logits(*lm->model, *real_smollm2()->model, *lm->tok);
  std::remove(file.c_str());
}

}  // namespace
}  // namespace dspark::testing
