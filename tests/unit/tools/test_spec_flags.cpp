// Which drafter a decoding verb mounts when none is named: the target's shipped one (found by the
// registry file name: drafters/gemma3-270m, drafters/smollm2-135m) with the start-up cost schedule,
// else n-gram lookup where the verb falls back to it, else none.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/registry.h"
#include "tools/spec_flags.h"

namespace dspark::tools {
namespace {

TEST(SpecFlags, EachRegisteredTargetMountsItsShippedDrafter) {
  int shipped = 0;
  for (const runtime::RegistryEntry& e : runtime::model_registry()) {
    if (e.drafter.empty()) continue;
    ++shipped;
    SpecFlags f;
    const auto c = effective_spec(f, "/any/folder/" + e.file_name, /*fallback_ngram=*/true);
    ASSERT_TRUE(c.has_value()) << e.name;
    EXPECT_EQ(c->kind, "dspark") << e.name;
    EXPECT_EQ(std::filesystem::path(c->model).filename().string(), e.drafter);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(c->model) / "config.json")) << c->model;
    EXPECT_EQ(c->schedule, speculative::DraftSchedule::kCostStatic) << e.name;
  }
  EXPECT_EQ(shipped, 2);  // gemma3-270m and smollm2-135m
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
