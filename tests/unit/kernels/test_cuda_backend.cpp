// The CUDA backend (kernels/cuda/) against the CPU backend, through the Backend interface only: inputs
// staged into device buffers, results copied back. The matmul, norms, RoPE, GELU, f16 stores, embedding
// rows and argmax must give the CPU's bits; SiLU (the device's expf) and attention (its own summation
// order) agree within the tolerances below. Skipped (with the reason) where `--backend cuda` cannot run:
// a build without CUDA, or no device / driver.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/f16.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/ref/ref.h"
#include "kernel_test_util.h"

namespace dspark::kernels {
namespace {

using test::make_matrix;
using test::make_values;
using test::Pattern;

// SiLU: the device's expf is within 2 ulp of the host's; g / (1 + e) * up stays within a few f32 ulp.
constexpr double kTolSiluRel = 1e-6;
// Attention: probabilities are rounded to f16 (relative step 2^-11) after scores summed in another
// order, so one probability may round the other way: |out - ref| <= 2^-11 * max |v| per output. Twice that.
constexpr double kTolAttentionOfMaxV = 1e-3;

const Backend* cuda() {
  auto r = find_backend("cuda");
  return r.is_ok() ? *r : nullptr;
}
std::string why() {
  auto r = find_backend("cuda");
  return r.is_ok() ? "" : r.status().message();
}
#define CUDA_OR_SKIP(be)                   \
  const Backend* be = cuda();              \
  if (!be) GTEST_SKIP() << why()

template <class T>
DeviceArray<T> up(const Backend* be, const std::vector<T>& v) {
  DeviceArray<T> d(be, v.size());
  be->from_host(d.data(), v.data(), v.size() * sizeof(T));
  return d;
}
template <class T>
std::vector<T> down(const Backend* be, const DeviceArray<T>& d) {
  std::vector<T> v(d.size());
  be->to_host(v.data(), d.data(), v.size() * sizeof(T));
  return v;
}
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Every weight type, decode to prefill-sized token counts: the CPU's y, bit for bit (so also the same
// y for a token whatever the count: batch invariance on the device).
TEST(CudaBackend, MatmulSameBitsAsCpu) {
  CUDA_OR_SKIP(be);
  const Backend& cpu = default_backend();
  Rng rng(17);
  ThreadPool pool(2);
  for (DType type : test::all_weight_types()) {
    for (int64_t cols : {int64_t{512}, int64_t{768}}) {
      const int64_t rows = 37;
      test::TestMatrix tm = make_matrix(rng, type, rows, cols, Pattern::kRandom);
      QMatrix m = tm.m;
      Buffer storage;
      ASSERT_TRUE(be->prepare_weight(&m, &storage)) << dtype_name(type);
      EXPECT_TRUE(be->weight_prepared(m));
      EXPECT_TRUE(be->matmul_path(m).simd);
      for (int64_t n : {1, 2, 3, 8, 16, 70}) {
        const std::vector<float> x = make_values(rng, n * cols, n == 3 ? Pattern::kZeroBlocks : Pattern::kRandom);
        std::vector<float> want((size_t)(n * rows));
        MatmulContext cctx = cpu.matmul_context(&pool);
        cpu.matmul(cctx, tm.m, x.data(), n, want.data(), rows);
        DeviceArray<float> xd = up(be, x), yd(be, want.size());
        MatmulContext ctx = be->matmul_context(nullptr);
        be->matmul(ctx, m, xd.data(), n, yd.data(), rows);
        ASSERT_TRUE(same_bits(down(be, yd), want)) << dtype_name(type) << " cols " << cols << " n " << n;
      }
    }
  }
}

TEST(CudaBackend, RowOpsSameBitsAsCpu) {
  CUDA_OR_SKIP(be);
  const Backend& cpu = default_backend();
  Rng rng(19);
  for (int64_t n : {int64_t{64}, int64_t{100}, int64_t{576}, int64_t{640}}) {  // 100: a tail past the 16-lane sums
    const int64_t rows = 5;
    const std::vector<float> x = make_values(rng, rows * n, Pattern::kRandom), w = make_values(rng, n, Pattern::kRandom);
    std::vector<float> want((size_t)(rows * n));
    cpu.rms_norm_rows(x.data(), w.data(), want.data(), rows, n, 1e-6f);
    DeviceArray<float> xd = up(be, x), wd = up(be, w), od(be, want.size());
    be->rms_norm_rows(xd.data(), wd.data(), od.data(), rows, n, 1e-6f);
    EXPECT_TRUE(same_bits(down(be, od), want)) << "rms_norm n " << n;
    be->rms_norm_rows(xd.data(), wd.data(), xd.data(), rows, n, 1e-6f);  // in place, as the model calls it
    EXPECT_TRUE(same_bits(down(be, xd), want)) << "rms_norm in place n " << n;
  }
  for (int64_t hd : {int64_t{64}, int64_t{256}}) {
    const int64_t heads = 4;
    const std::vector<float> q = make_values(rng, heads * hd, Pattern::kRandom);
    for (RopeMode mode : {RopeMode::kNeox, RopeMode::kNormal}) {
      std::vector<float> want = q, cs((size_t)hd);
      cpu.rope_angles(hd, 4321, 1e6f, cs.data());
      cpu.rope(mode, want.data(), heads, hd, cs.data());
      DeviceArray<float> qd = up(be, q), csd(be, (size_t)hd);
      be->rope_angles(hd, 4321, 1e6f, csd.data());
      EXPECT_TRUE(same_bits(down(be, csd), cs)) << "rope angles hd " << hd;
      for (int64_t pos : {int64_t{0}, int64_t{20000}, int64_t{4321}}) {  // 20000: the device table grows
        std::vector<float> c2((size_t)hd);
        cpu.rope_angles(hd, pos, 1e6f, c2.data());
        DeviceArray<float> d2(be, (size_t)hd);
        be->rope_angles(hd, pos, 1e6f, d2.data());
        EXPECT_TRUE(same_bits(down(be, d2), c2)) << "rope angles hd " << hd << " pos " << pos;
      }
      be->rope(mode, qd.data(), heads, hd, csd.data());
      EXPECT_TRUE(same_bits(down(be, qd), want)) << "rope hd " << hd;
    }
  }
  // Several rows in one call (the model's verify windows and prefill): RoPE with per-row angles and
  // strided f16 stores, against the CPU's one-row ops.
  {
    const int64_t rows = 3, heads = 4, hd = 64, xs = heads * hd + 32, css = 2 * hd;
    const std::vector<float> x = make_values(rng, rows * xs, Pattern::kRandom);
    std::vector<float> cs((size_t)(rows * css)), want = x;
    for (int64_t t = 0; t < rows; ++t) {
      cpu.rope_angles(hd, 100 + 7 * t, 1e4f, cs.data() + t * css);
      cpu.rope(RopeMode::kNormal, want.data() + t * xs, heads, hd, cs.data() + t * css);
    }
    DeviceArray<float> xd = up(be, x), csd = up(be, cs);
    be->rope_rows(RopeMode::kNormal, xd.data(), rows, xs, heads, hd, csd.data(), css);
    EXPECT_TRUE(same_bits(down(be, xd), want)) << "rope_rows";
    std::vector<uint16_t> h16((size_t)(rows * hd));
    for (int64_t t = 0; t < rows; ++t) cpu.f32_to_f16(x.data() + t * xs + 5, h16.data() + t * hd, hd);
    DeviceArray<float> x2 = up(be, x);
    DeviceArray<uint16_t> hd16(be, h16.size());
    be->f32_to_f16_rows(x2.data() + 5, xs, hd16.data(), hd, rows, hd);
    EXPECT_TRUE(same_bits(down(be, hd16), h16)) << "f32_to_f16_rows";
  }
  // Elementwise: scale then add, the GELU table (both cut-offs), f16 stores.
  constexpr int64_t n = 509;
  std::vector<float> g = make_values(rng, n, Pattern::kLarge), u = make_values(rng, n, Pattern::kRandom);
  for (int64_t i = 0; i < 200; ++i) g[(size_t)i] = -12.0f + 24.0f * (float)i / 199.0f;
  std::vector<float> want = g;
  cpu.scale(want.data(), n, 0.37f);
  cpu.add_inplace(want.data(), u.data(), n);
  DeviceArray<float> gd = up(be, g), ud = up(be, u), od(be, (size_t)n);
  be->copy(od.data(), gd.data(), sizeof(float) * n);
  be->scale(od.data(), n, 0.37f);
  be->add_inplace(od.data(), ud.data(), n);
  EXPECT_TRUE(same_bits(down(be, od), want)) << "scale, add";
  std::vector<float> gelu((size_t)n);
  cpu.gelu_mul(g.data(), u.data(), gelu.data(), n);
  be->gelu_mul(gd.data(), ud.data(), od.data(), n);
  EXPECT_TRUE(same_bits(down(be, od), gelu)) << "gelu table";
  std::vector<uint16_t> h((size_t)n);
  cpu.f32_to_f16(g.data(), h.data(), n);
  DeviceArray<uint16_t> hd(be, (size_t)n);
  be->f32_to_f16(gd.data(), hd.data(), n);
  EXPECT_TRUE(same_bits(down(be, hd), h)) << "f32 -> f16";
  std::vector<float> silu((size_t)n);
  cpu.silu_mul(g.data(), u.data(), silu.data(), n);
  be->silu_mul(gd.data(), ud.data(), od.data(), n);
  const std::vector<float> s = down(be, od);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(s[(size_t)i], silu[(size_t)i], kTolSiluRel * (std::fabs(silu[(size_t)i]) + 1e-3)) << "silu " << i;
}

TEST(CudaBackend, EmbeddingRowsAndArgmaxSameAsCpu) {
  CUDA_OR_SKIP(be);
  const Backend& cpu = default_backend();
  Rng rng(23);
  for (DType type : test::all_weight_types()) {
    test::TestMatrix table = make_matrix(rng, type, 50, 256, Pattern::kRandom);
    const int32_t ids[4] = {7, 0, 49, 7};
    for (float scale : {25.3f, 1.0f}) {
      std::vector<float> want(4 * 256);
      cpu.embed_rows(table.m, ids, 4, scale, want.data());
      DeviceArray<float> xd(be, want.size());
      be->embed_rows(table.m, ids, 4, scale, xd.data());  // the table on the host: dequantized there
      EXPECT_TRUE(same_bits(down(be, xd), want)) << dtype_name(type) << " host table";
      QMatrix m = table.m;  // the table on the device (as a tied LM head's copy): gathered there
      Buffer storage;
      ASSERT_TRUE(be->prepare_weight(&m, &storage));
      DeviceArray<float> yd(be, want.size());
      be->embed_rows(m, ids, 4, scale, yd.data());
      EXPECT_TRUE(same_bits(down(be, yd), want)) << dtype_name(type) << " device table";
    }
  }
  std::vector<float> v = make_values(rng, 49152, Pattern::kRandom);
  v[30000] = 50.f;
  v[40000] = 50.f;  // a tie: the first wins
  v[3] = -1e30f;
  DeviceArray<float> vd = up(be, v);
  EXPECT_EQ(be->argmax(vd.data(), (int64_t)v.size()), cpu.argmax(v.data(), (int64_t)v.size()));
  EXPECT_EQ(be->argmax(vd.data(), (int64_t)v.size()), 30000);
  const std::vector<float> neg(33, -5.f);
  DeviceArray<float> nd = up(be, neg);
  EXPECT_EQ(be->argmax(nd.data(), 33), 0);
}

// Attention over a ring cache (positions wrap), a token tree's extra keys, and several rows at once
// (attention_rows must be attention() per row, bit for bit, on the device too).
TEST(CudaBackend, AttentionWithinToleranceOfTheReference) {
  CUDA_OR_SKIP(be);
  Rng rng(29);
  for (int64_t hd : {int64_t{64}, int64_t{256}}) {
    const int n_q = 3;
    const int64_t cap = 300, keys = 260, first = 100;  // positions 100..359: slots wrap at 300
    std::vector<uint16_t> k((size_t)(cap * hd)), v((size_t)(cap * hd));
    float max_v = 0.f;
    for (auto& e : k) e = fp32_to_fp16(test::gauss(rng));
    for (auto& e : v) {
      e = fp32_to_fp16(test::gauss(rng));
      max_v = std::max(max_v, std::fabs(fp16_to_fp32(e)));
    }
    const std::vector<int64_t> extra = {5, 17, 380};
    const std::vector<float> q = make_values(rng, n_q * hd, Pattern::kRandom);
    DeviceArray<uint16_t> kd = up(be, k), vd = up(be, v);
    DeviceArray<float> qd = up(be, q);
    for (int64_t n_extra : {int64_t{0}, int64_t{3}}) {
      const KvView host{k.data(), v.data(), cap, hd, extra.data(), n_extra};
      std::vector<float> ref((size_t)(n_q * hd)), ref_scores((size_t)(n_q * (keys + n_extra)));
      attention_f16kv_ref(q.data(), n_q, hd, host, first, keys, ref_scores.data(), ref.data());
      const KvView dev{kd.data(), vd.data(), cap, hd, extra.data(), n_extra};  // extra: host positions
      DeviceArray<float> sd(be, ref_scores.size()), od(be, ref.size());
      be->attention(qd.data(), n_q, hd, dev, first, keys, sd.data(), od.data());
      const std::vector<float> got = down(be, od);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], kTolAttentionOfMaxV * max_v) << "hd " << hd << " extra " << n_extra << " i " << i;
    }
    // Four rows of a window: rows r at first + r, r + 1 more keys each.
    const int rows = 4;
    const std::vector<float> q4 = make_values(rng, rows * n_q * hd, Pattern::kRandom);
    DeviceArray<float> q4d = up(be, q4), o4(be, q4.size()), one(be, (size_t)(n_q * hd)),
        sd(be, (size_t)(n_q * (keys + rows)));
    const int64_t fp[rows] = {first, first, first, first}, nk[rows] = {keys, keys + 1, keys + 2, keys + 3};
    const KvView dev{kd.data(), vd.data(), cap, hd};
    be->attention_rows(AttnRows{q4d.data(), n_q * hd, o4.data(), n_q * hd, fp, nk, rows}, n_q, hd, dev, sd.data());
    const std::vector<float> all = down(be, o4);
    for (int r = 0; r < rows; ++r) {
      be->attention(q4d.data() + r * n_q * hd, n_q, hd, dev, fp[r], nk[r], sd.data(), one.data());
      const std::vector<float> o = down(be, one);
      EXPECT_EQ(std::memcmp(o.data(), all.data() + r * n_q * hd, o.size() * sizeof(float)), 0) << "row " << r;
    }
  }
}

TEST(CudaBackend, BuffersAndUnsupportedWeights) {
  CUDA_OR_SKIP(be);
  EXPECT_FALSE(be->host_memory());
  DeviceArray<float> a(be, 4);
  EXPECT_EQ(down(be, a), std::vector<float>(4, 0.f));  // zero-filled
  const std::vector<float> src = {1, 2, 3, 4};
  be->from_host(a.data(), src.data(), 16);
  a.resize(6);  // keeps the first 4, zero-fills the rest
  EXPECT_EQ(down(be, a), (std::vector<float>{1, 2, 3, 4, 0, 0}));
  // A type with no CUDA kernel: not prepared, and a product names it instead of computing garbage.
  std::vector<uint8_t> bytes(row_bytes(DType::Q2_K, 256) * 4);
  QMatrix m{DType::Q2_K, 4, 256, bytes.data(), row_bytes(DType::Q2_K, 256)};
  Buffer storage;
  EXPECT_FALSE(be->prepare_weight(&m, &storage));
  EXPECT_FALSE(be->matmul_path(m).simd);
  DeviceArray<float> x(be, 256), y(be, 4);
  MatmulContext ctx = be->matmul_context(nullptr);
  try {
    be->matmul(ctx, m, x.data(), 1, y.data(), 4);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dspark::kernels
