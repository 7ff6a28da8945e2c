// `dspark quantize-drafter` at the command-line boundary: bad inputs give exit code 2 and one error
// line naming the tensor / field / directory, and leave nothing behind (no output, no staging
// folder); a good run writes a checkpoint that reloads and drafts against the target.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../model/tiny_gemma3.h"
#include "tiny_drafter.h"
#include "tools/verbs.h"

namespace dspark::quant {
namespace {

namespace fs = std::filesystem;

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("dspark_qcli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    // The tiny Gemma 3 target (6 layers, H 32, V 96) and a drafter paired with it.
    const testing::TinyGemma3 target(3);
    target_ = (tmp_ / "target.gguf").string();
    ASSERT_TRUE(target.write(target_).is_ok());
    const testing::TinyDrafterShape s = testing::paired_tiny_shape(target.n_embd, target.n_vocab, target.n_layer);
    drafter_ = (tmp_ / "drafter").string();
    ASSERT_TRUE(testing::write_tiny_drafter(drafter_, s, 8).is_ok());
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Runs the verb; returns the exit code, stderr in *err.
  int run(std::vector<std::string> args, std::string* err = nullptr) {
    args.insert(args.begin(), {"dspark", "quantize-drafter"});
    args.insert(args.end(), {"--model", target_, "--threads", "1"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    const int rc = tools::verb_quantize_drafter((int)argv.size(), argv.data());
    const std::string e = ::testing::internal::GetCapturedStderr();
    ::testing::internal::GetCapturedStdout();
    if (err) *err = e;
    return rc;
  }
  std::string recipe(const std::string& text) {
    const std::string p = (tmp_ / "recipe.json").string();
    std::ofstream(p) << text;
    return p;
  }
  // Nothing but the inputs (and pre-existing folders) in tmp_.
  void expect_nothing_written(const std::set<std::string>& allowed = {}) {
    for (const auto& e : fs::directory_iterator(tmp_)) {
      const std::string f = e.path().filename().string();
      EXPECT_TRUE(f == "target.gguf" || f == "drafter" || f == "recipe.json" || allowed.count(f)) << "left behind: " << f;
    }
  }

  fs::path tmp_;
  std::string target_, drafter_;
};

#define EXPECT_MENTIONS(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << (msg)

TEST_F(QuantizeCli, GoodRunReloadsAndDrafts) {
  std::string err;
  ASSERT_EQ(run({drafter_, "--group", "32"}, &err), 0) << err;
  const std::string out = drafter_ + "-affine4g32";
  ASSERT_TRUE(fs::exists(out + "/config.json"));
  EXPECT_MENTIONS(err, "reloading");
  std::ifstream in(out + "/config.json");
  const auto cfg = nlohmann::json::parse(in);
  EXPECT_EQ(cfg["quantization"]["lm_head"]["bits"], 4);
  expect_nothing_written({"drafter-affine4g32"});
  // The same with turbo at 4.5 bpw into a named folder.
  ASSERT_EQ(run({drafter_, "--method", "turbo", "--bits", "4", "--group", "32", "--out", (tmp_ / "t").string()}, &err), 0)
      << err;
}

TEST_F(QuantizeCli, RefusesExistingOutput) {
  fs::create_directories(tmp_ / "taken");
  std::string err;
  EXPECT_EQ(run({drafter_, "--group", "32", "--out", (tmp_ / "taken").string()}, &err), 2);
  EXPECT_MENTIONS(err, "taken");
  EXPECT_MENTIONS(err, "exists");
  EXPECT_TRUE(fs::is_empty(tmp_ / "taken"));
  expect_nothing_written({"taken"});
}

TEST_F(QuantizeCli, RefusesAlreadyQuantized) {
  ASSERT_EQ(run({drafter_, "--group", "32", "--out", (tmp_ / "q").string()}), 0);
  std::string err;
  EXPECT_EQ(run({(tmp_ / "q").string(), "--group", "32", "--out", (tmp_ / "qq").string()}, &err), 2);
  EXPECT_MENTIONS(err, "already quantized");
  expect_nothing_written({"q"});
}

TEST_F(QuantizeCli, RefusesGroupThatDoesNotDivide) {
  std::string err;
  EXPECT_EQ(run({drafter_, "--group", "64"}, &err), 2);  // H = 32 input columns
  EXPECT_MENTIONS(err, "tensor '");
  EXPECT_MENTIONS(err, "group_size 64");
  expect_nothing_written();
  EXPECT_EQ(run({drafter_, "--method", "turbo", "--bits", "5", "--group", "32"}, &err), 2);
  EXPECT_MENTIONS(err, "turbo bits = 5");
  EXPECT_EQ(run({drafter_, "--bits", "7", "--group", "32"}, &err), 2);
  EXPECT_MENTIONS(err, "affine bits = 7");
  EXPECT_EQ(run({drafter_, "--method", "nf4", "--group", "32"}, &err), 2);
  EXPECT_MENTIONS(err, "--method");
  expect_nothing_written();
}

TEST_F(QuantizeCli, RefusesBadRecipes) {
  std::string err;
  EXPECT_EQ(run({drafter_, "--group", "32", "--recipe", recipe(R"({"layers.7.mlp.up_proj": false})")}, &err), 2);
  EXPECT_MENTIONS(err, "layers.7.mlp.up_proj");
  EXPECT_MENTIONS(err, "not a weight matrix");
  EXPECT_EQ(run({drafter_, "--group", "32", "--recipe", recipe(R"({"norm.weight": {"bits": 8}})")}, &err), 2);
  EXPECT_MENTIONS(err, "norm.weight");
  EXPECT_EQ(run({drafter_, "--group", "32", "--recipe", recipe(R"({"fc": {"bits": 4, "scale": 2}})")}, &err), 2);
  EXPECT_MENTIONS(err, "'scale'");
  EXPECT_EQ(run({drafter_, "--group", "32", "--recipe", recipe(R"({"fc": {"group_size": 48}})")}, &err), 2);
  EXPECT_MENTIONS(err, "group_size = 48");
  EXPECT_EQ(run({drafter_, "--group", "32", "--recipe", recipe("[1, 2")}, &err), 2);
  EXPECT_MENTIONS(err, "recipe.json");
  expect_nothing_written();
}

TEST_F(QuantizeCli, HelpAndMissingArguments) {
  std::string err;
  EXPECT_EQ(run({}, &err), 2);
  EXPECT_MENTIONS(err, "checkpoint directory");
  EXPECT_EQ(run({(tmp_ / "nope").string(), "--group", "32"}, &err), 2);
  EXPECT_MENTIONS(err, "nope");
  expect_nothing_written();
}

}  // namespace
}  // namespace dspark::quant
