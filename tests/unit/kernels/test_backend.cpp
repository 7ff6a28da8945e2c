// The backend seam (kernels/backend.h), as (backend, op or weight type, tolerance) tables run once per
// available backend: every op against the scalar references, and the CPU backends against each other
// (the kernels are ISA-invariant, so those tolerances are 0: the same bits). Buffers and the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/f16.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/profiling_backend.h"
#include "kernels/ref/ref.h"
#include "kernel_test_util.h"

namespace dspark::kernels {
namespace {

using test::make_matrix;
using test::make_values;
using test::Pattern;

// |backend - matmul_ref| <= tol * sum |w x| (as tests of the SIMD kernels: the reference sums in
// another order; F16 / BF16: the reference rounds activations to f16 / bf16).
constexpr double kTolMatmulInt = 1e-5;
constexpr double kTolMatmulF16 = 1e-3;
constexpr double kTolMatmulBF16 = 5e-3;
constexpr double kTolMatmulF32 = 1e-5;
// Between two CPU backends: the same bits (canonical accumulation order, kernels.h).
constexpr double kTolCpuVsCpu = 0.0;
// Elementwise ops against their scalar formulas: relative, a few f32 ulp (the SIMD exp / tanh paths).
constexpr double kTolOpsRel = 1e-5;

double matmul_tol(DType t) {
  switch (t) {
    case DType::F16: return kTolMatmulF16;
    case DType::BF16: return kTolMatmulBF16;
    case DType::F32: return kTolMatmulF32;
    default: return kTolMatmulInt;
  }
}

// The available backends whose memory is the host's (the CPU's): these tables pass host arrays to the
// ops. A device backend's tests stage through its buffers (test_cuda_backend.cpp).
std::vector<const Backend*> available() {
  std::vector<const Backend*> v;
  for (const BackendInfo& b : backends())
    if (std::string(b.name).rfind("cpu", 0) == 0 && b.available()) v.push_back(b.get());
  return v;
}

class BackendTable : public ::testing::TestWithParam<DType> {};

// Every weight type through every backend's prepared weights (packed copies where it has them),
// 1..9 tokens (decode, verify windows), against the reference and against the scalar backend.
TEST_P(BackendTable, MatmulPreparedVsReference) {
  const DType type = GetParam();
  Rng rng(11);
  const int64_t rows = 40, cols = 512;  // 5 row groups of 8; two 256-element super-blocks
  test::TestMatrix tm = make_matrix(rng, type, rows, cols, Pattern::kRandom);
  ThreadPool pool(2);
  const Backend& oracle = cpu_backend(Isa::kScalar);
  for (int64_t n : {1, 2, 5, 9}) {
    const std::vector<float> x = make_values(rng, n * cols, Pattern::kRandom);
    std::vector<float> ref((size_t)(n * rows)), base((size_t)(n * rows));
    matmul_ref(tm.m, x.data(), n, ref.data(), rows);
    MatmulContext octx = oracle.matmul_context(&pool);
    oracle.matmul(octx, tm.m, x.data(), n, base.data(), rows);
    const std::vector<float> scale = test::abs_scale(tm.m, x, n);
    for (const Backend* be : available()) {
      QMatrix m = tm.m;
      Buffer storage;
      be->prepare_weight(&m, &storage);
      DeviceArray<float> xd(be, x.size()), yd(be, ref.size());
      be->from_host(xd.data(), x.data(), x.size() * sizeof(float));
      MatmulContext ctx = be->matmul_context(&pool);
      be->matmul(ctx, m, xd.data(), n, yd.data(), rows);
      std::vector<float> y(ref.size());
      be->to_host(y.data(), yd.data(), y.size() * sizeof(float));
      // The path the report (--verbose) names: a SIMD kernel on every SIMD backend, packed tiles
      // exactly where the backend prepared a packed copy, the reference on the scalar backend.
      const MatmulPath path = be->matmul_path(m);
      EXPECT_EQ(path.simd, be->name() != "cpu-scalar") << be->name() << " " << dtype_name(type) << ": " << path.kernel;
      EXPECT_EQ(path.kernel.rfind("packed", 0) == 0, m.packed != nullptr) << be->name() << ": " << path.kernel;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_LE(std::fabs((double)y[i] - ref[i]), matmul_tol(type) * scale[i] + 1e-30)
            << be->name() << " " << dtype_name(type) << " n " << n << " i " << i;
        ASSERT_LE(std::fabs((double)y[i] - base[i]), kTolCpuVsCpu) << be->name() << " vs " << oracle.name();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, BackendTable, ::testing::ValuesIn(test::all_weight_types()),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

TEST(Backend, ElementwiseOpsVsFormulas) {
  Rng rng(3);
  const int64_t rows = 3, n = 64;
  const std::vector<float> x = make_values(rng, rows * n, Pattern::kRandom), w = make_values(rng, n, Pattern::kRandom);
  const std::vector<float> g = make_values(rng, n, Pattern::kRandom), u = make_values(rng, n, Pattern::kRandom);
  for (const Backend* be : available()) {
    std::vector<float> out((size_t)(rows * n));
    be->rms_norm_rows(x.data(), w.data(), out.data(), rows, n, 1e-6f);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += (double)x[(size_t)(r * n + i)] * x[(size_t)(r * n + i)];
      const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[(size_t)(r * n + i)] * inv * w[(size_t)i];
        EXPECT_NEAR(out[(size_t)(r * n + i)], want, kTolOpsRel * (std::fabs(want) + 1e-3)) << be->name();
      }
    }
    std::vector<float> s((size_t)n), ref((size_t)n);
    be->silu_mul(g.data(), u.data(), s.data(), n);
    silu_mul_ref(g.data(), u.data(), ref.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s[(size_t)i], ref[(size_t)i], kTolOpsRel * (std::fabs(ref[(size_t)i]) + 1e-3));
    std::vector<float> y = g;
    be->scale(y.data(), n, 0.5f);
    be->add_inplace(y.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[(size_t)i], g[(size_t)i] * 0.5f + u[(size_t)i]);
    std::vector<uint16_t> h((size_t)n);
    be->f32_to_f16(g.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(h[(size_t)i], fp32_to_fp16(g[(size_t)i]));
    std::vector<float> a = g;
    a[17] = 100.0f;
    a[40] = 100.0f;
    EXPECT_EQ(be->argmax(a.data(), n), 17) << be->name();
  }
}

// RoPE, the table GELU, embedding rows and attention: every backend gives the scalar backend's bits.
TEST(Backend, GraphOpsSameBitsOnEveryBackend) {
  Rng rng(5);
  const int64_t hd = 64, heads = 4, keys = 37;
  const std::vector<float> q = make_values(rng, heads * hd, Pattern::kRandom);
  // GELU inputs: random values, then a sweep over [-12, 12] (both cut-offs, f16 rounding ties near
  // them); 509 = not a multiple of the SIMD widths, so the tails run too.
  constexpr int64_t kGelu = 509;
  std::vector<float> g = make_values(rng, 256, Pattern::kRandom);
  for (int64_t i = 256; i < kGelu; ++i) g.push_back(-12.0f + 24.0f * (float)(i - 256) / 252.0f);
  const float edges[] = {-10.0f, 10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f), 9.9990234f, -0.0f};
  for (size_t i = 0; i < std::size(edges); ++i) g[256 + i] = edges[i];
  const std::vector<float> u = make_values(rng, kGelu, Pattern::kRandom);
  test::TestMatrix table = make_matrix(rng, DType::Q8_0, 50, hd, Pattern::kRandom);
  std::vector<uint16_t> k((size_t)(keys * hd)), v((size_t)(keys * hd));
  for (auto& e : k) e = fp32_to_fp16(test::gauss(rng));
  for (auto& e : v) e = fp32_to_fp16(test::gauss(rng));
  const KvView view{k.data(), v.data(), keys, hd};
  auto run = [&](const Backend& be) {
    std::vector<float> out;
    for (RopeMode mode : {RopeMode::kNeox, RopeMode::kNormal}) {
      std::vector<float> r = q, cs((size_t)hd);
      be.rope_angles(hd, 1234, 10000.0f, cs.data());
      be.rope(mode, r.data(), heads, hd, cs.data());
      out.insert(out.end(), r.begin(), r.end());
      // The angles and the rotation are rope_neox / rope_norm, split: the same bits.
      std::vector<float> whole = q;
      if (mode == RopeMode::kNeox) rope_neox(whole.data(), heads, hd, 1234, 10000.0f);
      else rope_norm(whole.data(), heads, hd, 1234, 10000.0f);
      EXPECT_EQ(0, std::memcmp(whole.data(), r.data(), r.size() * sizeof(float)));
    }
    std::vector<float> gm((size_t)kGelu);
    be.gelu_mul(g.data(), u.data(), gm.data(), kGelu);
    out.insert(out.end(), gm.begin(), gm.end());
    const int32_t ids[3] = {7, 0, 49};
    std::vector<float> e((size_t)(3 * hd));
    be.embed_rows(table.m, ids, 3, 25.3f, e.data());
    out.insert(out.end(), e.begin(), e.end());
    std::vector<float> scores((size_t)(heads * keys)), att((size_t)(heads * hd));
    be.attention(q.data(), (int)heads, hd, view, 0, keys, scores.data(), att.data());
    out.insert(out.end(), att.begin(), att.end());
    return out;
  };
  const std::vector<float> base = run(cpu_backend(Isa::kScalar));
  std::vector<float> ref_att((size_t)(heads * hd)), ref_scores((size_t)(heads * keys));
  attention_f16kv_ref(q.data(), (int)heads, hd, view, 0, keys, ref_scores.data(), ref_att.data());
  for (int64_t i = 0; i < heads * hd; ++i)
    ASSERT_EQ(base[base.size() - (size_t)(heads * hd) + (size_t)i], ref_att[(size_t)i]) << "scalar backend vs ref";
  for (const Backend* be : available()) {
    const std::vector<float> got = run(*be);
    ASSERT_EQ(got.size(), base.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs((double)got[i] - base[i]), kTolCpuVsCpu) << be->name() << " element " << i;
  }
}

TEST(Backend, BuffersAndArrays) {
  for (const Backend* be : available()) {
    Buffer b = be->alloc(100);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.bytes(), 100u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    EXPECT_TRUE(be->alloc(0).data() == nullptr);
    DeviceArray<float> a(be, 4);
    const float src[4] = {1, 2, 3, 4};
    be->from_host(a.data(), src, sizeof(src));
    a.resize(6);  // keeps the first 4, zero-fills the rest
    float back[6];
    be->to_host(back, a.data(), sizeof(back));
    EXPECT_EQ(back[3], 4.0f);
    EXPECT_EQ(back[5], 0.0f);
    a.resize(2);
    EXPECT_EQ(a.size(), 2u);
  }
}

// The profiling decorator (bench --profile) changes no result and counts only while started.
TEST(Backend, ProfilingBackendSameBitsAndCountsWhileStarted) {
  Rng rng(5);
  const Backend& inner = default_backend();
  const ProfilingBackend prof(inner);
  test::TestMatrix tm = make_matrix(rng, DType::Q8_0, 40, 256, Pattern::kRandom);
  const std::vector<float> x = make_values(rng, 3 * 256, Pattern::kRandom);
  std::vector<float> a(3 * 40), b(3 * 40), na(256), nb(256);
  ThreadPool pool(2);
  MatmulContext ca = inner.matmul_context(&pool), cb = prof.matmul_context(&pool);
  inner.matmul(ca, tm.m, x.data(), 3, a.data(), 40);
  prof.matmul(cb, tm.m, x.data(), 3, b.data(), 40);  // not started: untimed
  EXPECT_TRUE(prof.table().empty());
  prof.start();
  prof.matmul(cb, tm.m, x.data(), 3, b.data(), 40);
  prof.matmul(cb, tm.m, x.data(), 3, b.data(), 40);
  const float w[256] = {};
  inner.rms_norm_rows(x.data(), w, na.data(), 1, 256, 1e-6f);
  prof.rms_norm_rows(x.data(), w, nb.data(), 1, 256, 1e-6f);
  EXPECT_EQ(prof.argmax(x.data(), 256), inner.argmax(x.data(), 256));
  prof.stop();
  prof.matmul(cb, tm.m, x.data(), 3, b.data(), 40);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(na.data(), nb.data(), na.size() * sizeof(float)), 0);
  const std::vector<OpTime> t = prof.table();
  ASSERT_EQ(t.size(), 3u);
  for (const OpTime& o : t) {
    EXPECT_GE(o.ms, 0.0);
    EXPECT_FALSE(o.thread_time) << o.op;  // all called on this thread
    if (o.op == "matmul Q8_0 [40 x 256]") EXPECT_EQ(o.calls, 2);
    else EXPECT_EQ(o.calls, 1) << o.op;
  }
  EXPECT_EQ(prof.name(), inner.name());
  prof.reset();
  EXPECT_TRUE(prof.table().empty());
}

TEST(Backend, RegistryFindsByNameAndRefusesUnknown) {
  auto a = find_backend("auto");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(*a, &default_backend());
  auto s = find_backend("cpu-scalar");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*s)->name(), "cpu-scalar");
  auto bad = find_backend("cuda9");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'cuda9'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("cpu-scalar"), std::string::npos);
  // A registered backend this machine cannot run says why, in one line naming the flag.
  for (const BackendInfo& b : backends()) {
    if (std::string(b.name) != "cuda" || b.available()) continue;
    auto cuda = find_backend("cuda");
    ASSERT_FALSE(cuda.is_ok());
    const std::string m = cuda.status().message();
    EXPECT_EQ(m.rfind("--backend cuda: ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(b.why_not()), std::string::npos) << m;
    EXPECT_FALSE(b.why_not().empty());
  }
}

}  // namespace
}  // namespace dspark::kernels
