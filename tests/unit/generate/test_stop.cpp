#include <gtest/gtest.h>

#include "generate/stop.h"

namespace dspark::generate {
namespace {

TEST(StopMatcher, HoldsBackPossiblePrefixes) {
  StopMatcher m({"</s>", "STOP"});
  std::string out;
  out += m.push("hello <");
  EXPECT_EQ(out, "hello ");  // "<" may start "</s>"
  out += m.push("b>");
  EXPECT_EQ(out, "hello <b>");
  out += m.push(" ST");
  out += m.push("OP and more");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "hello <b> ");
  EXPECT_EQ(m.push("x"), "");
}

TEST(StopMatcher, StopSplitAcrossManyPieces) {
  StopMatcher m({"\n\n"});
  std::string out = m.push("a\n");
  EXPECT_EQ(out, "a");
  out += m.push("\nb");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "a");
}

TEST(StopMatcher, FlushReleasesTail) {
  StopMatcher m({"END"});
  std::string out = m.push("the E");
  out += m.flush();
  EXPECT_EQ(out, "the E");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
}

}  // namespace
}  // namespace dspark::generate
