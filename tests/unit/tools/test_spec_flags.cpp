// Which drafter a decoding verb mounts when none is named: the target's shipped one (found by the
// registry file name: drafters/gemma3-270m, drafters/smollm2-135m) with the start-up cost schedule,
// else n-gram lookup where the verb falls back to it, else none.
#include <gtest/gtest.h>

#include <filesystem>

#include "tools/spec_flags.h"

namespace dspark::tools {
namespace {

TEST(SpecFlags, EachRegisteredTargetMountsItsShippedDrafter) {
  for (const char* name : {"gemma3-270m", "smollm2-135m"}) {
    const std::string file = name == std::string("gemma3-270m") ? "gemma-3-270m-q4_k_m.gguf" : "SmolLM2-135M-Instruct.Q4_1.gguf";
    SpecFlags f;
    const auto c = effective_spec(f, "/any/folder/" + file, /*fallback_ngram=*/true);
    ASSERT_TRUE(c.has_value()) << name;
    EXPECT_EQ(c->kind, "dspark") << name;
    EXPECT_EQ(std::filesystem::path(c->model).filename().string(), name);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(c->model) / "config.json")) << c->model;
    EXPECT_EQ(c->schedule, "cost-static") << name;
  }
}

TEST(SpecFlags, UnknownTargetFallsBackToNgramOrNothing) {
  SpecFlags f;
  const auto with = effective_spec(f, "/any/folder/other-model.gguf", /*fallback_ngram=*/true);
  ASSERT_TRUE(with.has_value());
  EXPECT_EQ(with->kind, "ngram");
  EXPECT_FALSE(effective_spec(f, "/any/folder/other-model.gguf", /*fallback_ngram=*/false).has_value());
  f.no_spec = true;
  EXPECT_FALSE(effective_spec(f, "/any/folder/gemma-3-270m-q4_k_m.gguf", true).has_value());
}

}  // namespace
}  // namespace dspark::tools
