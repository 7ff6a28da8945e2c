#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sample/sampler.h"

namespace dspark::sample {
namespace {

TEST(Sampler, GreedyTakesFirstMax) {
  Sampler s({.temperature = 0.0f});
  const float logits[] = {1.0f, 3.0f, 3.0f, -2.0f};
  EXPECT_EQ(s.sample(logits, 4), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  Sampler s({.temperature = 1.0f, .top_k = 1, .seed = 3});
  const float logits[] = {0.5f, 0.1f, 2.0f, 1.9f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits, 4), 2);
}

TEST(Sampler, DistributionMatchesSoftmaxAndDrawsFollowIt) {
  const float logits[] = {0.0f, 1.0f, 2.0f, -1.0f};
  Sampler s({.temperature = 0.7f, .seed = 11});
  const auto dist = s.distribution(logits, 4);
  ASSERT_EQ(dist.size(), 4u);
  double z = 0;
  for (float l : logits) z += std::exp(l / 0.7);
  std::map<int, double> want;
  for (int i = 0; i < 4; ++i) want[i] = std::exp(logits[i] / 0.7) / z;
  for (const auto& tp : dist) EXPECT_NEAR(tp.p, want[tp.id], 1e-6);
  // Chi-square over 20000 draws; 3 degrees of freedom, p = 0.001 critical value 16.27.
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.sample(logits, 4)]++;
  double chi2 = 0;
  for (int i = 0; i < 4; ++i) chi2 += std::pow(counts[i] - n * want[i], 2) / (n * want[i]);
  EXPECT_LT(chi2, 16.27);
}

TEST(Sampler, TopPAndMinPTrim) {
  const float logits[] = {3.0f, 2.0f, 1.0f, 0.0f, -5.0f};
  Sampler p({.temperature = 1.0f, .top_p = 0.7f});
  // softmax: 0.6364, 0.2341, 0.0861, 0.0317, 0.0002 -> top-p 0.7 keeps the first two
  EXPECT_EQ(p.distribution(logits, 5).size(), 2u);
  Sampler m({.temperature = 1.0f, .min_p = 0.1f});
  // min-p 0.1 * 0.6364 = 0.0636 -> keeps 3.0, 2.0, 1.0
  EXPECT_EQ(m.distribution(logits, 5).size(), 3u);
}

TEST(Sampler, SeedReproduces) {
  const float logits[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  Sampler a({.temperature = 1.0f, .seed = 5}), b({.temperature = 1.0f, .seed = 5});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(logits, 5), b.sample(logits, 5));
}

TEST(Sampler, ValidateNamesTheField) {
  EXPECT_NE(validate({.temperature = -1.0f}).message().find("temperature"), std::string::npos);
  EXPECT_NE(validate({.top_p = 0.0f}).message().find("top_p"), std::string::npos);
  EXPECT_NE(validate({.min_p = 2.0f}).message().find("min_p"), std::string::npos);
  EXPECT_TRUE(validate({}).is_ok());
}

}  // namespace
}  // namespace dspark::sample
