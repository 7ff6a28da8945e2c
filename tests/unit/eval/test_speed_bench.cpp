// eval::run_speed_bench on a tiny random model: what --profile reports (decode, then prefill apart).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../model/tiny_gemma3.h"
#include "../tokenizer/tiny_vocab.h"
#include "eval/speed_bench.h"
#include "kernels/profiling_backend.h"

namespace dspark {
namespace {

TEST(SpeedBench, ProfileSplitsDecodeAndPrefill) {
  testing::TinyGemma3 tiny(5, 300);  // a vocabulary the tiny tokenizer's ids fit in
  const std::string path =
      (std::filesystem::temp_directory_path() / ("speed_bench_" + std::to_string(getpid()) + ".gguf")).string();
  ASSERT_TRUE(tiny.write(path).is_ok());
  const kernels::ProfilingBackend prof(kernels::default_backend());
  runtime::LoadedModel lm;
  lm.path = path;
  auto m = model::load_model(path, &prof);
  ASSERT_TRUE(m.is_ok()) << m.message();
  lm.model = std::move(m).value();
  lm.tok = tokenizer::testing::make_padded_tiny_tokenizer(tiny.n_vocab);
  eval::SpeedBenchOptions opt;
  opt.n_prompt = 40;
  opt.n_gen = 8;
  opt.repeats = 2;
  auto j = eval::run_speed_bench(opt, lm, &prof, {});
  std::filesystem::remove(path);
  ASSERT_TRUE(j.is_ok()) << j.message();
  ASSERT_TRUE(j->contains("profile"));
  ASSERT_TRUE(j->contains("prefill_profile"));
  const auto& pp = (*j)["prefill_profile"];
  EXPECT_EQ(pp["prefill_tokens"].get<int64_t>(), 40);
  EXPECT_EQ(pp["tokens"].get<int64_t>(), 2);  // forwards
  // A prefill forward of 40 rows calls each layer's matmuls once; decode's profile counts per token.
  bool matmul = false;
  for (const auto& op : pp["ops"])
    if (op["op"].get<std::string>().rfind("matmul", 0) == 0) {
      matmul = true;
      EXPECT_GT(op["ms_per_token"].get<double>(), 0.0);
    }
  EXPECT_TRUE(matmul);
  EXPECT_EQ((*j)["profile"]["tokens"].get<int64_t>(), 2 * 8);  // decoded tokens: the prefills are not in it
  const std::string text = eval::format_speed_bench(*j);
  EXPECT_NE(text.find("where a prefill of 40 tokens goes"), std::string::npos) << text;
  EXPECT_NE(text.find("where a decoded token's time goes"), std::string::npos) << text;
}

}  // namespace
}  // namespace dspark
