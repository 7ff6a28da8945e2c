// The greedy bit allocator on hand-built sensitivity tables.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/knapsack.h"

namespace dspark::quant {
namespace {

std::vector<TensorSensitivity> two_tensors() {
  return {{"a", 100, {{"affine", 2, 64, 2.5, 1.0}, {"affine", 4, 64, 4.5, 0.1}, {"affine", 8, 64, 8.5, 0.01}}},
          {"b", 100, {{"affine", 2, 64, 2.5, 0.05}, {"affine", 4, 64, 4.5, 0.04}}}};
}

TEST(Knapsack, BestKlPerByteFirstWithinTheBudget) {
  // Budget 3.5 bpw = 700 bits; start 500. a: 2->4 saves 0.9 for 200 bits (best), then nothing fits.
  auto r = allocate_bits(two_tensors(), 3.5);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->choice, (std::vector<size_t>{1, 0}));
  EXPECT_DOUBLE_EQ(r->bpw, 3.5);
  EXPECT_NEAR(r->total_kl, 0.15, 1e-12);
  EXPECT_EQ(r->upgrades, 1);
}

TEST(Knapsack, SkipsUpgradesThatDoNotFitButTakesSmallerOnes) {
  // 4.5 bpw = 900 bits: a 2->4 (200), then a 4->8 (400, too big) is skipped and b 2->4 (200) taken.
  auto r = allocate_bits(two_tensors(), 4.5);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->choice, (std::vector<size_t>{1, 1}));
  EXPECT_DOUBLE_EQ(r->bpw, 4.5);
  // A generous budget takes every useful upgrade.
  r = allocate_bits(two_tensors(), 16);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->choice, (std::vector<size_t>{2, 1}));
  EXPECT_DOUBLE_EQ(r->bpw, 6.5);
}

TEST(Knapsack, WeightsByParameterCountAndTreatsNanAsMaximal) {
  std::vector<TensorSensitivity> t = {
      {"big", 1000, {{"affine", 2, 64, 2.5, 0.5}, {"affine", 4, 64, 4.5, 0.0}}},
      {"small", 10, {{"turbo", 2, 32, 2.5, std::numeric_limits<double>::quiet_NaN()}, {"turbo", 4, 32, 4.5, 0.3}}}};
  // Budget for only one upgrade beyond 2.5: small's (20 bits, from "maximal" KL) is far more efficient.
  auto r = allocate_bits(t, 2.6);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->choice, (std::vector<size_t>{0, 1}));
}

TEST(Knapsack, MethodSwitchAtEqualBitsIsNotAnUpgradeButLowerKlAtHigherCostIs) {
  std::vector<TensorSensitivity> t = {
      {"w", 64, {{"affine", 4, 64, 4.5, 0.2}, {"turbo", 4, 32, 4.5, 0.1}, {"affine", 8, 64, 8.5, 0.15}}}};
  // The cheapest start breaks the bpw tie by KL: turbo-4. affine-8 has a higher KL than that: never taken.
  auto r = allocate_bits(t, 16);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->choice, (std::vector<size_t>{1}));
}

TEST(Knapsack, BadTables) {
  EXPECT_FALSE(allocate_bits({}, 4).is_ok());
  EXPECT_FALSE(allocate_bits({{"x", 10, {}}}, 4).is_ok());
  EXPECT_FALSE(allocate_bits({{"x", 0, {{"affine", 4, 64, 4.5, 0}}}}, 4).is_ok());
  const auto r = allocate_bits(two_tensors(), 2.0);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("below the cheapest mix"), std::string::npos);
}

}  // namespace
}  // namespace dspark::quant
