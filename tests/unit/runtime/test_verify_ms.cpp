// measure_verify_ms (the cost-aware schedule's verify-time table) on a target whose vocabulary is
// small: its synthetic context must stay inside the vocabulary (with ids past it every forward
// failed and the KV roll-back aborted: SmolLM2's 49,152 tokens, `dspark ab ... draft-schedule=cost`).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "../model/tiny_llama.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "runtime/drafter_factory.h"

namespace dspark::runtime {
namespace {

TEST(VerifyMs, SmallVocabularyTargetGivesANonDecreasingTable) {
  testing::TinyLlama tiny(3);  // 80 tokens
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dspark_verify_ms_" + std::to_string(getpid()) + ".gguf")).string();
  ASSERT_TRUE(tiny.write(path).is_ok());
  auto m = model::load_model(path);
  ASSERT_TRUE(m.is_ok()) << m.message();
  ThreadPool pool(1);
  const std::vector<double> v = measure_verify_ms(**m, 5, &pool);
  ASSERT_EQ(v.size(), 6u);
  for (int n = 1; n <= 5; ++n) {
    EXPECT_GT(v[(size_t)n], 0.0) << n;
    if (n > 1) {
      EXPECT_GE(v[(size_t)n], v[(size_t)n - 1]) << n;
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dspark::runtime
