#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>

#include "core/dtype.h"
#include "core/f16.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "core/threadpool.h"

namespace dspark {
namespace {

TEST(Sha256, KnownVectors) {
  Sha256 a;
  EXPECT_EQ(a.hex_digest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 b;
  b.update("abc", 3);
  EXPECT_EQ(b.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Streaming in odd pieces equals one update (crosses the 64-byte block boundary).
  const std::string msg(1000, 'x');
  Sha256 c, d;
  c.update(msg.data(), msg.size());
  for (size_t i = 0; i < msg.size(); i += 7) d.update(msg.data() + i, std::min<size_t>(7, msg.size() - i));
  EXPECT_EQ(c.hex_digest(), d.hex_digest());
}

TEST(F16, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32((uint16_t)h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), (uint16_t)h) << h;  // every half converts back exactly
  }
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);            // rounds to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + 1.0f / 2048), 0x3C00);  // tie to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3.0f / 2048), 0x3C02);
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(3.0f)), 3.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f + 1.0f / 256), 0x3F80);  // tie to even
}

TEST(DType, BlockGeometry) {
  EXPECT_EQ(row_bytes(DType::Q8_0, 640), 680u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 1024), 576u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 2048), 1680u);
  EXPECT_EQ(dtype_info(4), nullptr);  // removed layout
  EXPECT_EQ(dtype_info(20), nullptr);
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (auto& h : hits) h = 0;
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i], 1);
    }
    std::atomic<int> runs{0};
    for (int rep = 0; rep < 1000; ++rep) pool.run([&](int, int) { runs++; });
    EXPECT_EQ(runs, 1000 * threads);
  }
}

TEST(Rng, DeterministicAndUniform) {
  Rng a(7), b(7);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.uniform();
    EXPECT_EQ(u, b.uniform());
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace dspark
