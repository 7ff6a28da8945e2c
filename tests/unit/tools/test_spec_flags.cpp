// Which drafter a decoding verb mounts when none is named: the target's shipped default (found by
// the registry file name: drafters/gemma3-270m, its DSpark checkpoint with the start-up cost schedule;
// drafters/smollm2-135m, the suffix drafter its default_spec.json names, over an index built from the
// shipped ids), with the keys the command line gave on top; else n-gram lookup where the verb falls
// back to it, else none.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/registry.h"
#include "tools/spec_flags.h"

namespace dspark::tools {
namespace {

namespace fs = std::filesystem;

const runtime::RegistryEntry& entry(const std::string& name) {
  for (const runtime::RegistryEntry& e : runtime::model_registry())
    if (e.name == name) return e;
  throw std::runtime_error("no registry entry " + name);
}

TEST(SpecFlags, GemmaMountsItsShippedDSparkDrafter) {
  const runtime::RegistryEntry& e = entry("gemma3-270m");
  SpecFlags f;
  auto ch = choose_spec(f, "/any/folder/" + e.file_name, "/cache", /*fallback_ngram=*/true);
  ASSERT_TRUE(ch) << ch.message();
  ASSERT_TRUE(ch->spec.has_value());
  EXPECT_EQ(ch->spec->kind, "dspark");
  EXPECT_EQ(fs::path(ch->spec->model).filename().string(), e.drafter);
  EXPECT_TRUE(fs::exists(fs::path(ch->spec->model) / "config.json")) << ch->spec->model;
  EXPECT_EQ(ch->spec->schedule, speculative::DraftSchedule::kCostStatic);
  ASSERT_TRUE(ch->shipped.has_value());
  EXPECT_TRUE(ch->shipped->index_ids.empty());
}

TEST(SpecFlags, SmolLM2MountsTheSuffixDrafterItsDefaultSpecNames) {
  const runtime::RegistryEntry& e = entry("smollm2-135m");
  SpecFlags f;
  auto ch = choose_spec(f, "/any/folder/" + e.file_name, "/cache", /*fallback_ngram=*/true);
  ASSERT_TRUE(ch) << ch.message();
  ASSERT_TRUE(ch->spec.has_value());
  EXPECT_EQ(ch->spec->kind, "suffix");
  EXPECT_EQ(ch->spec->gamma, 4);
  EXPECT_TRUE(ch->spec->model.empty());
  // The index is built into the cache from the two shipped id files, named by its expected hash.
  EXPECT_EQ(ch->spec->suffix_index, "/cache/indexes/smollm2-135m-f102c98bcffe94df.sfx");
  ASSERT_TRUE(ch->shipped.has_value());
  ASSERT_EQ(ch->shipped->index_ids.size(), 2u);
  for (const std::string& p : ch->shipped->index_ids) EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_EQ(ch->shipped->index_sha256.substr(0, 8), "f102c98b");
}

TEST(SpecFlags, CommandLineKeysOverrideTheShippedDefault) {
  SpecFlags f;
  f.config.gamma = 2;
  f.given.insert("num-draft-tokens");
  auto ch = choose_spec(f, "/any/folder/" + entry("smollm2-135m").file_name, "/cache", true);
  ASSERT_TRUE(ch && ch->spec) << ch.message();
  EXPECT_EQ(ch->spec->kind, "suffix");
  EXPECT_EQ(ch->spec->gamma, 2);
  f.config.schedule = speculative::DraftSchedule::kFixed;
  f.given.insert("draft-schedule");
  auto g = choose_spec(f, "/any/folder/" + entry("gemma3-270m").file_name, "/cache", true);
  ASSERT_TRUE(g && g->spec) << g.message();
  EXPECT_EQ(g->spec->kind, "dspark");
  EXPECT_EQ(g->spec->schedule, speculative::DraftSchedule::kFixed);
  EXPECT_EQ(g->spec->gamma, 2);
}

TEST(SpecFlags, UnknownTargetFallsBackToNgramOrNothing) {
  SpecFlags f;
  auto with = choose_spec(f, "/any/folder/other-model.gguf", "/cache", /*fallback_ngram=*/true);
  ASSERT_TRUE(with && with->spec);
  EXPECT_EQ(with->spec->kind, "ngram");
  auto without = choose_spec(f, "/any/folder/other-model.gguf", "/cache", /*fallback_ngram=*/false);
  ASSERT_TRUE(without);
  EXPECT_FALSE(without->spec.has_value());
  f.no_spec = true;
  auto none = choose_spec(f, "/any/folder/gemma-3-270m-q4_k_m.gguf", "/cache", true);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->spec.has_value());
}

}  // namespace
}  // namespace dspark::tools
