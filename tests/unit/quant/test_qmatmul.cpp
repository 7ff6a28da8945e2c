// Quantized products: every ISA's kernels against the scalar reference (matmul_ref, double
// accumulation) within kTolQMatmul, over methods, bit widths, group sizes, awkward shapes and token
// counts; batch invariance and gathered-row products bitwise; dequantize_row in the original basis.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "core/threadpool.h"
#include "quant/affine.h"
#include "quant/lloyd_max.h"
#include "quant/qmatrix.h"
#include "quant/turbo.h"

namespace dspark::quant {
namespace {

// |y - y_ref| <= kTolQMatmul * Σ_j |ŵ_j x_j| + 1e-6: f32 accumulation over <= 1024 terms in
// groups (measured worst 2.6e-7 relative to Σ|ŵ x| over every ISA, spec and shape below).
constexpr double kTolQMatmul = 2e-6;

// Owns the buffers of a random quantized matrix.
struct TestMatrix {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales, biases;
  std::vector<float> dense;  // the source f32 values
  QuantMatrix q;
  TestMatrix(QuantSpec spec, int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    dense.resize((size_t)(rows * cols));
    for (float& x : dense) x = (float)(rng.uniform() - 0.5) * 0.2f;
    if (rows > 2)
      for (int64_t j = 0; j < cols; ++j) dense[(size_t)(2 * cols + j)] = 0.0f;  // an all-zero row
    const int64_t rb = code_row_bytes(cols, spec.bits), ng = cols / spec.group_size;
    codes.resize((size_t)(rows * rb));
    scales.resize((size_t)(rows * ng));
    q.spec = spec;
    q.n_rows = rows;
    q.n_cols = cols;
    if (spec.method == Method::kAffine) {
      biases.resize((size_t)(rows * ng));
      for (int64_t r = 0; r < rows; ++r)
        affine_quantize_row(&dense[(size_t)(r * cols)], cols, spec.bits, spec.group_size, &codes[(size_t)(r * rb)],
                            &scales[(size_t)(r * ng)], &biases[(size_t)(r * ng)]);
      q.biases = biases.data();
    } else {
      auto t = std::make_shared<TurboTables>();
      t->levels = turbo_levels(spec.bits);
      t->rot = make_rotation(cols, spec.rotation_block, spec.rotation_seed);
      for (int64_t r = 0; r < rows; ++r)
        turbo_quantize_row(&dense[(size_t)(r * cols)], t->rot, t->levels, spec.bits, spec.group_size,
                           &codes[(size_t)(r * rb)], &scales[(size_t)(r * ng)]);
      q.turbo = t;
    }
    q.codes = codes.data();
    q.scales = scales.data();
  }
};

std::vector<float> random_x(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x((size_t)n);
  for (float& v : x) v = (float)(2 * rng.uniform() - 1);
  return x;
}

std::vector<QuantSpec> specs(int64_t cols) {
  std::vector<QuantSpec> out;
  for (int g : kGroupSizes) {
    if (cols % g) continue;
    for (int b : kAffineBits) out.push_back({Method::kAffine, b, g});
    const int blk = default_rotation_block(cols);
    for (int b : kTurboBits) out.push_back({Method::kTurbo, b, g, blk, 17});
  }
  return out;
}

TEST(QuantMatmul, EveryIsaMatchesReference) {
  const kernels::Isa best = kernels::detect_isa();
  ThreadPool pool(2);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {33, 640}, {20, 1024}}) {
    for (const QuantSpec& spec : specs(cols)) {
      const TestMatrix m(spec, rows, cols, (uint64_t)(rows * 131 + cols));
      for (int64_t n_tok : {1, 3, 8, 11}) {
        const std::vector<float> x = random_x(n_tok * cols, (uint64_t)n_tok);
        std::vector<float> ref((size_t)(n_tok * rows)), absdot((size_t)(n_tok * rows), 0.0f);
        matmul_ref(m.q, x.data(), n_tok, ref.data(), rows);
        {  // Σ|ŵ x| in the basis the kernel uses (turbo: rotated)
          std::vector<float> xr = x, row((size_t)cols);
          if (spec.method == Method::kTurbo)
            for (int64_t t = 0; t < n_tok; ++t) rotate_ref(m.q.turbo->rot, xr.data() + t * cols);
          for (int64_t r = 0; r < rows; ++r) {
            dequantize_row_stored_ref(m.q, r, row.data());
            for (int64_t t = 0; t < n_tok; ++t)
              for (int64_t j = 0; j < cols; ++j)
                absdot[(size_t)(t * rows + r)] += std::fabs(row[(size_t)j] * xr[(size_t)(t * cols + j)]);
          }
        }
        for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
          if (isa > best) continue;
          kernels::MatmulContext ctx;
          ctx.isa = isa;
          ctx.pool = &pool;
          std::vector<float> y((size_t)(n_tok * rows), NAN);
          matmul(ctx, m.q, x.data(), n_tok, y.data(), rows);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], kTolQMatmul * absdot[i] + 1e-6)
                << kernels::isa_name(isa) << " " << spec_string(spec) << " [" << rows << ", " << cols << "] n_tok "
                << n_tok << " at " << i;
          // Batch invariance: each token alone gives the same bits.
          for (int64_t t = 0; t < n_tok; ++t) {
            std::vector<float> y1((size_t)rows);
            matmul(ctx, m.q, x.data() + t * cols, 1, y1.data(), rows);
            ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + t * rows, (size_t)rows * 4))
                << kernels::isa_name(isa) << " " << spec_string(spec) << " token " << t;
          }
        }
      }
    }
  }
}

TEST(QuantMatmul, GatheredRowsEqualFullProductBitwise) {
  const kernels::Isa best = kernels::detect_isa();
  for (const QuantSpec& spec : {QuantSpec{Method::kAffine, 4, 64}, QuantSpec{Method::kTurbo, 3, 32, 64, 5},
                                QuantSpec{Method::kAffine, 3, 32}}) {
    const int64_t rows = 300, cols = 64;  // the last rows exercise the padded-codes path
    const TestMatrix m(spec, rows, cols, 77);
    const std::vector<float> x = random_x(cols, 8);
    const std::vector<int64_t> sel = {299, 0, 17, 298, 150, 3, 297, 64};
    for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
      if (isa > best) continue;
      kernels::MatmulContext ctx;
      ctx.isa = isa;
      std::vector<float> full((size_t)rows), part(sel.size());
      matmul(ctx, m.q, x.data(), 1, full.data(), rows);
      matmul_rows(ctx, m.q, sel.data(), (int64_t)sel.size(), x.data(), part.data());
      for (size_t i = 0; i < sel.size(); ++i)
        ASSERT_EQ(part[i], full[(size_t)sel[i]]) << kernels::isa_name(isa) << " " << spec_string(spec) << " row " << sel[i];
    }
  }
}

TEST(QuantMatmul, DequantizeRowIsTheOriginalBasis) {
  // The product of the dequantized (un-rotated) rows with x equals the quantized product.
  for (const QuantSpec& spec : {QuantSpec{Method::kAffine, 4, 32}, QuantSpec{Method::kTurbo, 4, 32, 128, 3}}) {
    const int64_t rows = 16, cols = 640;
    const TestMatrix m(spec, rows, cols, 12);
    const std::vector<float> x = random_x(cols, 4);
    std::vector<float> y((size_t)rows);
    matmul_ref(m.q, x.data(), 1, y.data(), rows);
    std::vector<float> row((size_t)cols), stored((size_t)cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(m.q, r, row.data());
      dequantize_row_stored_ref(m.q, r, stored.data());  // the reference gather: stored row, un-rotated
      if (spec.method == Method::kTurbo) unrotate_ref(m.q.turbo->rot, stored.data());
      ASSERT_EQ(0, std::memcmp(row.data(), stored.data(), (size_t)cols * 4)) << spec_string(spec) << " row " << r;
      double d = 0, a = 0;
      for (int64_t j = 0; j < cols; ++j) {
        d += (double)row[(size_t)j] * x[(size_t)j];
        a += std::fabs((double)row[(size_t)j] * x[(size_t)j]);
      }
      EXPECT_NEAR(d, y[(size_t)r], 1e-5 * a + 1e-6) << spec_string(spec) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace dspark::quant
