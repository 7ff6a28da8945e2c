#include <gtest/gtest.h>

#include "tools/args.h"
#include "runtime/registry.h"

namespace dspark::tools {
namespace {

Status parse(Args& a, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"dspark", "verb"});
  std::vector<char*> ptrs;
  for (auto& s : argv) ptrs.push_back(s.data());
  return a.parse((int)ptrs.size(), ptrs.data(), 2);
}

TEST(Args, ParsesValuesFlagsAndLists) {
  std::string model;
  int64_t n = 5;
  double t = 0;
  bool json = false;
  std::vector<std::string> stops;
  Args a("u", "s");
  a.add("--model,-m", &model, "m");
  a.add("-n", &n, "n", 1, 100);
  a.add("--temp", &t, "t", 0, 2);
  a.add_flag("--json", &json, "j");
  a.add_list("--stop", &stops, "s");
  ASSERT_TRUE(parse(a, {"-m", "x.gguf", "-n", "7", "--temp=0.5", "--json", "--stop", "a", "--stop", "b", "pos"}).is_ok());
  EXPECT_EQ(model, "x.gguf");
  EXPECT_EQ(n, 7);
  EXPECT_DOUBLE_EQ(t, 0.5);
  EXPECT_TRUE(json);
  EXPECT_EQ(stops, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"pos"}));
}

TEST(Args, HelpIndentsContinuationLines) {
  std::string v = "x";
  Args a("u", "s");
  a.add("--mode", &v, "first line\nsecond line");
  const std::string h = a.help();
  EXPECT_NE(h.find("  --mode V                  first line\n                            second line (default: x)\n"),
            std::string::npos)
      << h;
}

TEST(Args, BadValuesNameTheFlag) {
  int64_t n = 5;
  double t = 0;
  Args a("u", "s");
  a.add("-n", &n, "n", 1, 100);
  a.add("--temp", &t, "t", 0, 2);
  EXPECT_NE(parse(a, {"-n", "abc"}).message().find("-n"), std::string::npos);
  EXPECT_NE(parse(a, {"-n", "0"}).message().find("out of range"), std::string::npos);
  EXPECT_NE(parse(a, {"--temp", "nan"}).message().find("--temp"), std::string::npos);
  EXPECT_NE(parse(a, {"--temp"}).message().find("missing value"), std::string::npos);
  EXPECT_NE(parse(a, {"--bogus"}).message().find("unknown option"), std::string::npos);
}

TEST(Registry, ResolvesNamesAndPaths) {
  EXPECT_NE(runtime::find_model("gemma3-270m"), nullptr);
  auto missing = runtime::resolve_model_path("gemma3-270m", "/nonexistent-cache");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("dspark get gemma3-270m"), std::string::npos);
  auto bad = runtime::resolve_model_path("/no/such/file.gguf", "/tmp");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("no such file"), std::string::npos);
  EXPECT_EQ(runtime::resolve_cache_dir("/x"), "/x");
}

}  // namespace
}  // namespace dspark::tools
