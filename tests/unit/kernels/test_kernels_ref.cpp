// Reference kernels: hand-written blocks pin each layout; activation quantizers match ggml's
// rounding rules; quantize -> dequantize error bounds; matmul_ref vs the f32 oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/f16.h"
#include "kernel_test_util.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

// Round-trip NMSE = sum (x - deq(q(x)))^2 / sum x^2 on 64 rows x 1024 N(0,1) values, seed 7,
// measured with this file's RoundTrip test inputs; bounds are 1.5x the measurement:
// Q8_0 2.86e-5, Q4_0 7.35e-3, Q4_1 6.09e-3, Q5_0 1.81e-3, Q5_1 1.43e-3, Q4_K 6.12e-3 (our simple
// min/max K quantizer, not ggml's search), Q5_K 1.45e-3, Q6_K 3.54e-4, F16 4.28e-8, BF16 2.75e-6.
constexpr double kMaxNmseQ8_0 = 4.3e-5;
constexpr double kMaxNmseQ4_0 = 1.1e-2;
constexpr double kMaxNmseQ4_1 = 9.2e-3;
constexpr double kMaxNmseQ5_0 = 2.7e-3;
constexpr double kMaxNmseQ5_1 = 2.2e-3;
constexpr double kMaxNmseQ4K = 9.2e-3;
constexpr double kMaxNmseQ5K = 2.2e-3;
constexpr double kMaxNmseQ6K = 5.3e-4;
constexpr double kMaxNmseF16 = 6.4e-8;
constexpr double kMaxNmseBF16 = 4.1e-6;
// ||matmul_ref - matmul_f32_ref|| / ||matmul_f32_ref|| on 37 x 512 N(0,1) weights, 3 tokens, seed 11
// (activation rounding to 8 bits per 32 or 256 values, docs/TESTING.md noise floor): measured 0.55-0.79 %
// for quantized types, 2.1e-3 for BF16 (activations rounded to bf16), 2.3e-4 for F16; bounds 1.5x.
constexpr double kMaxRelErrQuantAct = 0.012;
constexpr double kMaxRelErrHalfAct = 3.1e-3;

uint16_t f16(float v) { return fp32_to_fp16(v); }

template <class B>
std::vector<float> deq(DType t, const B& b, int64_t n) {
  std::vector<float> y((size_t)n);
  dequantize_row_ref(t, &b, y.data(), n);
  return y;
}

TEST(DequantRef, Q4_0Block) {
  BlockQ4_0 b{};
  b.d = f16(0.5f);
  b.qs[0] = 0x1F;
  b.qs[15] = 0x80;
  const auto y = deq(DType::Q4_0, b, 32);
  EXPECT_EQ(y[0], 3.5f);    // low nibble 15
  EXPECT_EQ(y[16], -3.5f);  // high nibble 1
  EXPECT_EQ(y[15], -4.f);
  EXPECT_EQ(y[31], 0.f);
  EXPECT_EQ(y[1], -4.f);  // nibble 0
}

TEST(DequantRef, Q4_1Block) {
  BlockQ4_1 b{};
  b.d = f16(0.5f);
  b.m = f16(-1.f);
  b.qs[0] = 0x2A;
  const auto y = deq(DType::Q4_1, b, 32);
  EXPECT_EQ(y[0], 4.f);
  EXPECT_EQ(y[16], 0.f);
  EXPECT_EQ(y[5], -1.f);
}

TEST(DequantRef, Q5_0Block) {
  BlockQ5_0 b{};
  b.d = f16(1.f);
  const uint32_t qh = (1u << 0) | (1u << 17);
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x32;
  b.qs[1] = 0x45;
  const auto y = deq(DType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 2.f);     // 2 + 16 - 16
  EXPECT_EQ(y[16], -13.f);  // 3 - 16
  EXPECT_EQ(y[1], -11.f);   // 5 - 16
  EXPECT_EQ(y[17], 4.f);    // 4 + 16 - 16
}

TEST(DequantRef, Q5_1Block) {
  BlockQ5_1 b{};
  b.d = f16(0.25f);
  b.m = f16(1.f);
  const uint32_t qh = 1u << 31;
  std::memcpy(b.qh, &qh, 4);
  b.qs[15] = 0xF3;
  const auto y = deq(DType::Q5_1, b, 32);
  EXPECT_EQ(y[15], 1.75f);  // 3 * 0.25 + 1
  EXPECT_EQ(y[31], 8.75f);  // 31 * 0.25 + 1
}

TEST(DequantRef, Q8_0Block) {
  BlockQ8_0 b{};
  b.d = f16(2.f);
  b.qs[3] = -5;
  b.qs[31] = 127;
  const auto y = deq(DType::Q8_0, b, 32);
  EXPECT_EQ(y[3], -10.f);
  EXPECT_EQ(y[31], 254.f);
}

// Q4_K scales: s[0]=2, s[4]=1 -> (sc0, m0) = (2, 1); s[1]=0x43 -> sc1 = 3 and top bits of sc5 = 01;
// s[5]=0x87 -> m1 = 7, top bits of m5 = 10; s[9]=0x2A -> sc5 = 0xA | 0x10 = 26, m5 = 2 | 0x20 = 34.
void fill_k_scales(uint8_t* s) {
  s[0] = 2;
  s[4] = 1;
  s[1] = 0x43;
  s[5] = 0x87;
  s[9] = 0x2A;
}

TEST(DequantRef, Q4_KBlock) {
  BlockQ4_K b{};
  b.d = f16(1.f);
  b.dmin = f16(0.5f);
  fill_k_scales(b.scales);
  b.qs[0] = 0x45;   // e0: j=0 low nibble 5; e32: j=1 high nibble 4
  b.qs[67] = 0x90;  // e163: j=5 -> qs[64 + 3] high nibble 9
  const auto y = deq(DType::Q4_K, b, 256);
  EXPECT_EQ(y[0], 9.5f);     // 1*2*5 - 0.5*1
  EXPECT_EQ(y[32], 8.5f);    // 1*3*4 - 0.5*7
  EXPECT_EQ(y[163], 217.f);  // 1*26*9 - 0.5*34
  EXPECT_EQ(y[160], -17.f);  // q = 0
}

TEST(DequantRef, Q5_KBlock) {
  BlockQ5_K b{};
  b.d = f16(1.f);
  b.dmin = f16(0.5f);
  fill_k_scales(b.scales);
  b.qs[67] = 0x90;
  b.qh[3] = 1 << 5;  // fifth bit of sub-block 5, l = 3
  const auto y = deq(DType::Q5_K, b, 256);
  EXPECT_EQ(y[163], 633.f);  // 26*25 - 17
  EXPECT_EQ(y[162], -17.f);  // sub-block 5, l = 2: q = 0, no fifth bit
  EXPECT_EQ(y[131], 0.f);    // sub-block 4: sc4 = m4 = 0
}

TEST(DequantRef, Q6_KBlock) {
  BlockQ6_K b{};
  b.d = f16(0.5f);  // the last field (bytes 208..209)
  b.scales[0] = 1;
  b.scales[12] = -3;
  b.ql[69] = 0xA0;  // e197: h=1, g=2, l=5 -> ql[64+5] high nibble = 10
  b.qh[37] = 0x20;  // qh[32+5] bits 4..5 = 2
  const auto y = deq(DType::Q6_K, b, 256);
  EXPECT_EQ(y[197], -15.f);  // 0.5 * -3 * (42 - 32)
  EXPECT_EQ(y[0], -16.f);    // 0.5 * 1 * (0 - 32)
  uint8_t raw[210];
  std::memcpy(raw, &b, 210);
  EXPECT_EQ(raw[208] | (raw[209] << 8), 0x3800);
}

TEST(DequantRef, Floats) {
  const uint16_t h[2] = {0x3C00, 0xC000}, bf[2] = {0x3F80, 0x4040};
  float y[2];
  dequantize_row_ref(DType::F16, h, y, 2);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -2.f);
  dequantize_row_ref(DType::BF16, bf, y, 2);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 3.f);
}

TEST(QuantizeRef, Q8_0RoundsHalfAwayFromZero) {
  float x[32] = {};
  x[0] = 127.f;  // d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  BlockQ8_0 b;
  quantize_row_q8_0_ref(x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  float z[32] = {};
  quantize_row_q8_0_ref(z, &b, 32);
  EXPECT_EQ(b.d, 0);
  EXPECT_EQ(b.qs[5], 0);
}

TEST(QuantizeRef, Q8_1Sum) {
  float x[32] = {};
  x[0] = 127.f;
  x[1] = -27.f;
  BlockQ8_1 b;
  quantize_row_q8_1_ref(x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.s), 100.f);
}

TEST(QuantizeRef, Q8_KHalfEvenAndSignedMax) {
  float x[256] = {};
  x[0] = -127.f;  // largest magnitude is negative: iscale = 1, d = 1
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[17] = -0.5f;
  BlockQ8_K b;
  quantize_row_q8_K_ref(x, &b, 256);
  EXPECT_EQ(b.d, 1.f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);  // half to even
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[17], 0);
  EXPECT_EQ(b.bsums[0], -127 + 2 + 4);
  x[0] = 127.f;  // positive max: iscale = -1, the max becomes -127 and d = -1
  quantize_row_q8_K_ref(x, &b, 256);
  EXPECT_EQ(b.d, -1.f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], -2);
}

struct RoundTripCase {
  DType type;
  double max_nmse;
};

TEST(QuantizeRef, RoundTrip) {
  const RoundTripCase cases[] = {{DType::Q8_0, kMaxNmseQ8_0}, {DType::Q4_0, kMaxNmseQ4_0}, {DType::Q4_1, kMaxNmseQ4_1},
                                 {DType::Q5_0, kMaxNmseQ5_0}, {DType::Q5_1, kMaxNmseQ5_1}, {DType::Q4_K, kMaxNmseQ4K},
                                 {DType::Q5_K, kMaxNmseQ5K},  {DType::Q6_K, kMaxNmseQ6K},  {DType::F16, kMaxNmseF16},
                                 {DType::BF16, kMaxNmseBF16}};
  for (const auto& c : cases) {
    Rng rng(7);
    double num = 0, den = 0;
    std::vector<uint8_t> q(row_bytes(c.type, 1024));
    std::vector<float> back(1024);
    for (int row = 0; row < 64; ++row) {
      const auto x = test::make_values(rng, 1024, test::Pattern::kRandom);
      quantize_row_ref(c.type, x.data(), q.data(), 1024);
      dequantize_row_ref(c.type, q.data(), back.data(), 1024);
      for (int i = 0; i < 1024; ++i) {
        num += (x[i] - back[i]) * (double)(x[i] - back[i]);
        den += (double)x[i] * x[i];
      }
    }
    EXPECT_LT(num / den, c.max_nmse) << dtype_name(c.type) << " nmse " << num / den;
    EXPECT_GT(num / den, c.max_nmse / 20) << dtype_name(c.type) << " suspiciously exact: " << num / den;
  }
}

TEST(QuantizeRef, ZeroAndConstantRowsRoundTrip) {
  for (DType t : test::all_weight_types()) {
    std::vector<float> x(256, 0.f), back(256);
    std::vector<uint8_t> q(row_bytes(t, 256));
    quantize_row_ref(t, x.data(), q.data(), 256);
    dequantize_row_ref(t, q.data(), back.data(), 256);
    for (float v : back) ASSERT_EQ(v, 0.f) << dtype_name(t);
    std::fill(x.begin(), x.end(), 0.75f);
    quantize_row_ref(t, x.data(), q.data(), 256);
    dequantize_row_ref(t, q.data(), back.data(), 256);
    for (float v : back) ASSERT_NEAR(v, 0.75f, 0.06f) << dtype_name(t);
  }
}

TEST(MatmulRef, CloseToF32Oracle) {
  for (DType t : test::all_weight_types()) {
    Rng rng(11);
    const int64_t rows = 37, cols = 512, ntok = 3;
    auto w = test::make_matrix(rng, t, rows, cols, test::Pattern::kRandom);
    const auto x = test::make_values(rng, cols * ntok, test::Pattern::kRandom);
    std::vector<float> yq((size_t)(rows * ntok)), yf(yq.size());
    matmul_ref(w.m, x.data(), ntok, yq.data(), rows);
    matmul_f32_ref(w.m, x.data(), ntok, yf.data(), rows);
    double num = 0, den = 0;
    for (size_t i = 0; i < yq.size(); ++i) {
      num += (yq[i] - yf[i]) * (double)(yq[i] - yf[i]);
      den += (double)yf[i] * yf[i];
    }
    const double rel = std::sqrt(num / den);
    const bool half = t == DType::F16 || t == DType::BF16 || t == DType::F32;
    EXPECT_LT(rel, half ? kMaxRelErrHalfAct : kMaxRelErrQuantAct) << dtype_name(t);
  }
}

}  // namespace
}  // namespace dspark::kernels
