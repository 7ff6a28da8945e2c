// The CUDA matmul's block arithmetic (kernels/cuda/qblock.h), run on the host: its activation rows and
// dot products must be the canonical scalar kernels' bytes and bits (cpu/canonical_scalar.cpp), so the
// device matmul gives the CPU's results. Runs on every machine, with or without CUDA.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/f16.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/qblock.h"
#include "kernels/ref/ref.h"

namespace dspark::kernels {
namespace {

constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::F32,  DType::F16,  DType::BF16};

std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> x((size_t)n);
  for (float& v : x) v = nd(rng);
  return x;
}

TEST(CudaQBlock, HalfConversionsAreCoreF16s) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32((uint16_t)h);
    const float g = cuda::half_float((uint16_t)h);
    ASSERT_EQ(std::memcmp(&f, &g, 4), 0) << h;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(fp32_to_fp16(f), cuda::float_half(f)) << u;
  }
}

// Every type's activation row and dot product against the canonical scalar kernels, bit for bit, over
// rows of one block up to many (n = 256 .. 2048) and activations of small and large magnitude, with a
// zero block and a block of ties (values exactly halfway between two quantization steps).
TEST(CudaQBlock, RowDotIsTheCanonicalScalarDot) {
  std::mt19937 rng(2026);
  for (DType t : kTypes) {
    for (int64_t n : {256, 576, 640, 1536, 2048}) {
      if (n % 256 != 0 && cuda::act_row(t) == cuda::ActRow::kQ8_K) continue;
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<float> wf = random_row(rng, n, 0.05f);
        std::vector<uint8_t> w(row_bytes(t, n));
        quantize_row_ref(t, wf.data(), w.data(), n);
        std::vector<float> x = random_row(rng, n, trial % 2 ? 40.f : 0.7f);
        if (trial == 2) std::fill(x.begin(), x.begin() + 32, 0.f);
        if (trial == 3)
          for (int i = 0; i < 32; ++i) x[(size_t)i] = 0.5f * (float)(i - 16);  // amax 8: steps of 8/127
        const size_t bytes = cuda::act_row_bytes(t, n);
        ASSERT_EQ(bytes, cpu::scalar_act_bytes(t, n)) << dtype_name(t);
        std::vector<uint8_t> a_dev(bytes), a_cpu(bytes);
        cuda::quantize_row(t, x.data(), a_dev.data(), n);
        cpu::scalar_quantize(t, x.data(), a_cpu.data(), n);
        ASSERT_EQ(std::memcmp(a_dev.data(), a_cpu.data(), bytes), 0) << dtype_name(t) << " n " << n;
        const float got = cuda::row_dot(t, n, w.data(), a_dev.data());
        const float want = cpu::scalar_dot(t, n, w.data(), a_cpu.data());
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
            << dtype_name(t) << " n " << n << " trial " << trial << ": " << got << " vs " << want;
      }
    }
  }
}

// The device's embedding gather dequantizes element by element: each must be the reference's bits.
TEST(CudaQBlock, DequantAtIsTheReferenceDequantizer) {
  std::mt19937 rng(31);
  for (DType t : kTypes) {
    const int64_t n = 512;
    std::vector<float> wf = random_row(rng, n, 0.3f);
    std::vector<uint8_t> w(row_bytes(t, n));
    quantize_row_ref(t, wf.data(), w.data(), n);
    std::vector<float> want((size_t)n);
    dequantize_row_ref(t, w.data(), want.data(), n);
    for (int64_t e = 0; e < n; ++e) {
      const float got = cuda::dequant_at(t, w.data(), e);
      ASSERT_EQ(std::memcmp(&got, &want[(size_t)e], 4), 0) << dtype_name(t) << " element " << e;
    }
  }
}

TEST(CudaQBlock, SupportsTheWeightTypesOfBothTargets) {
  for (DType t : kTypes) EXPECT_TRUE(cuda::supported(t)) << dtype_name(t);
  EXPECT_FALSE(cuda::supported(DType::Q2_K));
  EXPECT_FALSE(cuda::supported(DType::Q8_K));  // an activation format, not a weight type
}

}  // namespace
}  // namespace dspark::kernels
