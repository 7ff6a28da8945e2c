// load_vocab on small GGUF files built with GgufWriter: values, defaults and errors naming the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

namespace dspark::tokenizer {
namespace {

using formats::GgufFile;
using formats::GgufWriter;

struct Fixture {
  std::string model = "llama";
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "a", "b", "ab", "\xE2\x96\x81"};
  std::vector<float> scores = {-1000, -1000, -1000, -1000, -1, -1, -0.5f, -2};
  std::vector<int32_t> types = {3, 3, 3, 3, 1, 1, 1, 1};
  bool with_scores = true, with_types = true, with_ids = true;
  int32_t bos = 2;

  std::vector<uint8_t> build() const {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", model);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    if (with_scores) w.add_f32_array("tokenizer.ggml.scores", scores);
    if (with_types) w.add_i32_array("tokenizer.ggml.token_type", types);
    if (with_ids) {
      w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
      w.add_u32("tokenizer.ggml.eos_token_id", 1);
      w.add_u32("tokenizer.ggml.unknown_token_id", 3);
      w.add_u32("tokenizer.ggml.padding_token_id", 0);
      w.add_bool("tokenizer.ggml.add_bos_token", true);
      w.add_bool("tokenizer.ggml.add_eos_token", false);
      w.add_bool("tokenizer.ggml.add_space_prefix", false);
    }
    return w.build();
  }
};

Result<Vocab> load(const Fixture& f) {
  const std::vector<uint8_t> bytes = f.build();  // outlives `file`; load_vocab copies what it keeps
  Result<GgufFile> file = GgufFile::parse(bytes.data(), bytes.size(), "tok.gguf");
  if (!file) return file.status();
  return load_vocab(*file);
}

TEST(LoadVocab, ReadsAllKeys) {
  Result<Vocab> v = load(Fixture{});
  ASSERT_TRUE(v.is_ok()) << v.message();
  EXPECT_EQ(v->n_vocab(), 8);
  EXPECT_EQ(v->tokens[6], "ab");
  EXPECT_FLOAT_EQ(v->scores[6], -0.5f);
  EXPECT_EQ(v->types[0], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(v->bos, 2);
  EXPECT_EQ(v->eos, 1);
  EXPECT_EQ(v->unk, 3);
  EXPECT_EQ(v->pad, 0);
  EXPECT_TRUE(v->add_bos);
  EXPECT_FALSE(v->add_eos);
  EXPECT_FALSE(v->add_space_prefix);

  Result<SpmTokenizer> tok = SpmTokenizer::create(std::move(*v));
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok->encode("ab a", true, false), (std::vector<int32_t>{2, 6, 7, 4}));
}

TEST(LoadVocab, DefaultsWhenOptionalKeysAreAbsent) {
  Fixture f;
  f.with_scores = false;
  f.with_types = false;
  f.with_ids = false;
  Result<Vocab> v = load(f);
  ASSERT_TRUE(v.is_ok()) << v.message();
  EXPECT_EQ(v->scores, std::vector<float>(8, 0.0f));
  EXPECT_EQ(v->types, std::vector<int32_t>(8, 1));
  EXPECT_EQ(v->bos, 1);  // llama.cpp SPM defaults
  EXPECT_EQ(v->eos, 2);
  EXPECT_EQ(v->unk, 0);
  EXPECT_EQ(v->pad, -1);
  EXPECT_TRUE(v->add_bos);
  EXPECT_TRUE(v->add_space_prefix);
}

void expect_error(const Fixture& f, const std::string& needle) {
  Result<Vocab> v = load(f);
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.message().find(needle), std::string::npos) << v.message();
}

TEST(LoadVocab, ErrorsNameTheKey) {
  Fixture gpt2;
  gpt2.model = "gpt2";
  expect_error(gpt2, "tokenizer.ggml.model");

  Fixture short_scores;
  short_scores.scores.pop_back();
  expect_error(short_scores, "tokenizer.ggml.scores");

  Fixture short_types;
  short_types.types.pop_back();
  expect_error(short_types, "tokenizer.ggml.token_type");

  Fixture bad_bos;
  bad_bos.bos = 8;
  expect_error(bad_bos, "tokenizer.ggml.bos_token_id");

  Fixture empty;
  empty.tokens.clear();
  empty.scores.clear();
  empty.types.clear();
  expect_error(empty, "tokenizer.ggml.tokens");
}

TEST(LoadVocab, MissingTokensKey) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  std::vector<uint8_t> bytes = w.build();
  Result<GgufFile> file = GgufFile::parse(bytes.data(), bytes.size(), "tok.gguf");
  ASSERT_TRUE(file.is_ok()) << file.message();
  Result<Vocab> v = load_vocab(*file);
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.message().find("tokenizer.ggml.tokens"), std::string::npos) << v.message();
}

}  // namespace
}  // namespace dspark::tokenizer
