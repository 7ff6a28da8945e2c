// load_vocab / load_bpe_tokenizer on small "gpt2" GGUF files built with GgufWriter: llama.cpp's
// BPE defaults, the keys that override them, and errors naming the file and key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_bpe_tiny.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace dspark::tokenizer {
namespace {

using formats::GgufFile;
using formats::GgufWriter;

struct BpeFixture {
  std::string model = "gpt2";
  std::string pre = "smollm";
  bool with_pre = true, with_merges = true, with_ids = false, with_types = true;
  bool add_bos_key = false, add_bos = false;
  Vocab vocab = testing::make_tiny_bpe_vocab({"ab"}, {{"a", "b"}});

  std::vector<uint8_t> build() const {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", model);
    if (with_pre) w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
    if (with_types) w.add_i32_array("tokenizer.ggml.token_type", vocab.types);
    if (with_merges) w.add_string_array("tokenizer.ggml.merges", vocab.merges);
    if (with_ids) {
      w.add_u32("tokenizer.ggml.bos_token_id", 1);
      w.add_u32("tokenizer.ggml.eos_token_id", 2);
      w.add_u32("tokenizer.ggml.unknown_token_id", 0);
      w.add_u32("tokenizer.ggml.padding_token_id", 2);
    }
    if (add_bos_key) w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
    return w.build();
  }
};

struct Loaded {
  std::vector<uint8_t> bytes;  // outlives the parse; load_vocab copies what it keeps
  Result<Vocab> vocab = Status::error("not loaded");
  Result<BpeTokenizer> tok = Status::error("not loaded");
};

Loaded load(const BpeFixture& f) {
  Loaded out;
  out.bytes = f.build();
  Result<GgufFile> file = GgufFile::parse(out.bytes.data(), out.bytes.size(), "bpe.gguf");
  if (!file) {
    out.vocab = file.status();
    out.tok = file.status();
    return out;
  }
  out.vocab = load_vocab(*file);
  out.tok = load_bpe_tokenizer(*file);
  return out;
}

TEST(BpeLoad, LlamaCppDefaults) {
  Loaded l = load(BpeFixture{});
  ASSERT_TRUE(l.vocab.is_ok()) << l.vocab.message();
  const Vocab& v = *l.vocab;
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "smollm");
  EXPECT_EQ(v.merges.size(), 1u);
  EXPECT_EQ(v.bos, 11);  // llama.cpp's BPE defaults, inside this 263-token vocabulary
  EXPECT_EQ(v.eos, 11);
  EXPECT_EQ(v.unk, -1);
  EXPECT_EQ(v.pad, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(v.scores, std::vector<float>(v.tokens.size(), 0.0f));
  ASSERT_TRUE(l.tok.is_ok()) << l.tok.message();
  EXPECT_EQ(l.tok->encode("ab", true, false), std::vector<int32_t>{l.tok->find_token("ab")});
  EXPECT_TRUE(l.tok->is_stop(11));
}

TEST(BpeLoad, KeysOverrideDefaults) {
  BpeFixture f;
  f.with_ids = true;
  f.add_bos_key = true;
  f.add_bos = true;
  Loaded l = load(f);
  ASSERT_TRUE(l.vocab.is_ok()) << l.vocab.message();
  EXPECT_EQ(l.vocab->bos, 1);
  EXPECT_EQ(l.vocab->eos, 2);
  EXPECT_EQ(l.vocab->unk, 0);
  EXPECT_EQ(l.vocab->pad, 2);
  EXPECT_TRUE(l.vocab->add_bos);
  ASSERT_TRUE(l.tok.is_ok()) << l.tok.message();
  EXPECT_EQ(l.tok->encode("ab", true, false), (std::vector<int32_t>{1, l.tok->find_token("ab")}));
}

TEST(BpeLoad, PreTokenizerDefaults) {
  BpeFixture no_pre;
  no_pre.with_pre = false;  // llama.cpp: missing pre-tokenizer -> "default"
  Loaded l = load(no_pre);
  ASSERT_TRUE(l.vocab.is_ok()) << l.vocab.message();
  EXPECT_EQ(l.vocab->pre, "default");

  BpeFixture llama3;
  llama3.pre = "llama-bpe";  // llama3 family: add_bos defaults on
  Loaded l3 = load(llama3);
  ASSERT_TRUE(l3.vocab.is_ok()) << l3.vocab.message();
  EXPECT_TRUE(l3.vocab->add_bos);
  llama3.add_bos_key = true;
  llama3.add_bos = false;
  Loaded l3off = load(llama3);
  ASSERT_TRUE(l3off.vocab.is_ok()) << l3off.vocab.message();
  EXPECT_FALSE(l3off.vocab->add_bos);
}

TEST(BpeLoad, DefaultIdsOutsideASmallVocabularyAreDisabled) {
  BpeFixture f;
  f.vocab.tokens = {"a", "b", "c"};
  f.vocab.types = {1, 1, 1};
  f.vocab.merges = {"a b"};
  Loaded l = load(f);
  ASSERT_TRUE(l.vocab.is_ok()) << l.vocab.message();
  EXPECT_EQ(l.vocab->bos, -1);
  EXPECT_EQ(l.vocab->eos, -1);
  ASSERT_TRUE(l.tok.is_ok()) << l.tok.message();
  EXPECT_EQ(l.tok->encode("abc", true, false), (std::vector<int32_t>{0, 1, 2}));  // "ab" is no token
}

void expect_error(const BpeFixture& f, const std::string& needle) {
  Loaded l = load(f);
  ASSERT_FALSE(l.tok.is_ok()) << "expected an error containing " << needle;
  EXPECT_EQ(l.tok.message().rfind("bpe.gguf: ", 0), 0u) << l.tok.message();
  EXPECT_NE(l.tok.message().find(needle), std::string::npos) << l.tok.message();
}

TEST(BpeLoad, ErrorsNameTheKey) {
  BpeFixture bad_pre;
  bad_pre.pre = "no-such-pre";
  expect_error(bad_pre, "tokenizer.ggml.pre");

  BpeFixture no_merges;
  no_merges.with_merges = false;
  expect_error(no_merges, "tokenizer.ggml.merges");

  BpeFixture bad_merge;
  bad_merge.vocab.merges.push_back("a zz");
  expect_error(bad_merge, "tokenizer.ggml.merges");

  BpeFixture bert;
  bert.model = "bert";
  expect_error(bert, "tokenizer.ggml.model");

  BpeFixture llama;
  llama.model = "llama";  // a SentencePiece vocabulary is no BPE one
  expect_error(llama, "model");
}

}  // namespace
}  // namespace dspark::tokenizer
