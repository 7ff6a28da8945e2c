// Token-tree shapes and acceptance (speculative/token_tree.h), without a model.
#include <gtest/gtest.h>

#include "speculative/token_tree.h"

namespace dspark::speculative {
namespace {

// Chain 10 11 12 (estimates .5 .3 .2), branch 20 21 (.3 .2), branch 30 (.1).
DraftResult tree() {
  DraftResult d;
  d.tokens = {10, 11, 12, 20, 21, 30};
  d.parent = {-1, 0, 1, -1, 3, -1};
  d.confidence = {0.5f, 0.3f, 0.2f, 0.3f, 0.2f, 0.1f};
  d.chain = 3;
  return d;
}

TEST(TokenTree, FlatWindowsKeepBranchesSteepOnesKeepTheChain) {
  const std::vector<double> flat = {0, 5, 5.05, 5.1, 5.15, 5.2, 5.25, 5.3, 5.35};
  DraftResult d = tree();
  EXPECT_EQ(prune_tree(&d, flat, 16).branches, 2);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 30}));
  EXPECT_EQ(window_parents(d), (std::vector<int32_t>{-1, 0, 1, 2, 0, 4, 0}));

  // The round gives 2 tokens / 8 ms (0.25 a ms); a row past it costs 1.2 ms: 20 21 gives 0.5 for 2.4, 30 0.1 for 1.2.
  const std::vector<double> steep = {0, 5, 6, 7, 8, 9.2, 10.4, 11.6, 12.8};
  d = tree();
  EXPECT_EQ(prune_tree(&d, steep, 16).branches, 0);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_TRUE(d.parent.empty()) << "a chain after all";

  // Between: the first branch pays (0.5 tokens for 0.2 ms against 2 for 8.0), the second does not
  // (0.1 for 2 ms against 2.5 for 8.2).
  const std::vector<double> mixed = {0, 5, 6, 7, 8, 8.1, 8.2, 10.2, 11};
  d = tree();
  EXPECT_EQ(prune_tree(&d, mixed, 16).branches, 1);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21}));

  // No table, or too short a one: a chain; a token budget cuts the chain and drops branches past it.
  d = tree();
  EXPECT_EQ(prune_tree(&d, std::vector<double>{}, 16).branches, 0);
  EXPECT_EQ(d.tokens.size(), 3u);
  d = tree();
  EXPECT_EQ(prune_tree(&d, flat, 4).branches, 1);  // the two-token branch does not fit; the one-token one does
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12, 30}));
  d = tree();
  EXPECT_EQ(prune_tree(&d, flat, 2).branches, 0);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11}));
}

// Branches that deliver less than their estimates count for less: the flat table's branches go
// once the calibration has seen them deliver nothing for a while.
TEST(TokenTree, CalibrationScalesTheBranchesEstimates) {
  const std::vector<double> mixed = {0, 5, 6, 7, 8, 8.1, 8.2, 10.2, 11};
  DraftResult d = tree();
  const TreePrune p = prune_tree(&d, mixed, 16);
  EXPECT_EQ(p.branches, 1);
  EXPECT_NEAR(p.expected, 0.5, 1e-6);
  TreeCalibration cal;
  EXPECT_DOUBLE_EQ(cal.scale(), 1.0);
  for (int i = 0; i < 40; ++i) cal.observe(0.5, 0.0);
  EXPECT_LT(cal.scale(), 0.1);
  d = tree();
  EXPECT_EQ(prune_tree(&d, mixed, 16, cal.scale()).branches, 0);
  for (int i = 0; i < 60; ++i) cal.observe(0.5, 0.5);  // they deliver again: back near 1
  EXPECT_GT(cal.scale(), 0.9);
}

TEST(TokenTree, AcceptFollowsTheTargetsArgmaxThroughTheTree) {
  DraftResult d = tree();
  const std::vector<int32_t> parent = window_parents(d);
  std::vector<int32_t> window = {7};
  window.insert(window.end(), d.tokens.begin(), d.tokens.end());
  // Rows: 0 pending, 1-3 chain, 4-5 branch 20 21, 6 branch 30. The target says 20, then 21, then 99.
  std::vector<int32_t> argmax = {20, 0, 0, 0, 21, 99, 0};
  TreePath p = accept_tree(argmax, window, parent);
  EXPECT_EQ(p.rows, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.next, 99);
  // The chain all the way, then the bonus token.
  argmax = {10, 11, 12, 13, 0, 0, 0};
  p = accept_tree(argmax, window, parent);
  EXPECT_EQ(p.rows, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(p.next, 13);
  // Nothing matches at the root.
  argmax = {5, 0, 0, 0, 0, 0, 0};
  p = accept_tree(argmax, window, parent);
  EXPECT_TRUE(p.rows.empty());
  EXPECT_EQ(p.next, 5);
}

}  // namespace
}  // namespace dspark::speculative
