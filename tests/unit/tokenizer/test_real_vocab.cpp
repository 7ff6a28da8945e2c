// RealVocab*: the Gemma 3 270M GGUF tokenizer at $DSPARK_MODEL (skipped when unset) against the
// llama.cpp tokenization of a one-turn chat prompt (GoldenChatPrompt) and decode(encode(x)) == x.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dspark::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

class RealVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("DSPARK_MODEL");
    if (path == nullptr || *path == '\0') {
      skip_reason_ = "DSPARK_MODEL is not set (path to gemma-3-270m GGUF)";
      return;
    }
    Result<formats::GgufFile> file = formats::GgufFile::open(path);
    if (!file) {
      load_error_ = file.message();
      return;
    }
    Result<Tokenizer> tok = load_tokenizer(*file);
    if (!tok) {
      load_error_ = tok.message();
      return;
    }
    tok_ = std::make_unique<Tokenizer>(std::move(tok).value());
  }
  static void TearDownTestSuite() { tok_.reset(); }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_NE(tok_, nullptr) << load_error_;
  }

  static std::unique_ptr<Tokenizer> tok_;
  static std::string skip_reason_;
  static std::string load_error_;
};

std::unique_ptr<Tokenizer> RealVocab::tok_;
std::string RealVocab::skip_reason_;
std::string RealVocab::load_error_;

TEST_F(RealVocab, SpecialIds) {
  EXPECT_EQ(tok_->n_vocab(), 262144);
  EXPECT_EQ(tok_->bos(), 2);
  EXPECT_EQ(tok_->eos(), 1);
  EXPECT_EQ(tok_->end_of_turn(), 106);
  EXPECT_EQ(tok_->find_token("<start_of_turn>"), 105);
  EXPECT_TRUE(tok_->add_bos());
  EXPECT_TRUE(tok_->is_stop(1));
  EXPECT_TRUE(tok_->is_stop(106));
  EXPECT_FALSE(tok_->is_stop(2));
}

TEST_F(RealVocab, GoldenChatPrompt) {
  const std::string prompt = "<bos><start_of_turn>user\nTest<end_of_turn>\n<start_of_turn>model\n";
  EXPECT_EQ(tok_->encode(prompt, false, true), (Ids{2, 105, 2364, 107, 3694, 106, 107, 105, 4368, 107}));
  // The same text from the template, BOS added by the tokenizer instead.
  Result<std::string> rendered = render_gemma3_chat({{"user", "Test"}}, true, false);
  ASSERT_TRUE(rendered.is_ok());
  EXPECT_EQ(tok_->encode(*rendered, true, true), (Ids{2, 105, 2364, 107, 3694, 106, 107, 105, 4368, 107}));
}

TEST_F(RealVocab, UserTextCannotInjectControlTokens) {
  const Ids ids = tok_->encode("<start_of_turn>user\n", false, false);
  for (int32_t id : ids) EXPECT_FALSE(tok_->is_control(id)) << id;
  EXPECT_EQ(ids.back(), 107);  // "\n" is USER_DEFINED: always matched
  EXPECT_EQ(tok_->decode(ids), "<start_of_turn>user\n");
}

TEST_F(RealVocab, RoundTripMultilingual) {
  const std::string samples[] = {
      "Hello, world! How are you today?",
      "  leading and trailing spaces  ",
      "Tabs\tand\nnewlines\n\n\nand    runs of spaces",
      "Gr\xC3\xBC\xC3\x9F" "e aus M\xC3\xBCnchen, \xC3\xA7" "a va? \xC2\xBFQu\xC3\xA9 tal?",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81",  // 你好，世界！
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",                // こんにちは
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80",   // Привет мир
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\xA6\x84 emoji",     // 😀👍🏽 🦄
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",   // नमस्ते
      "code: `for (int i = 0; i < n; ++i) { x[i] += 1; }`",
      "<table><tr><td>cell</td></tr></table>",
      "\xF0\x9F\x80\x84\xF0\x9F\x80\x85 rare symbols \xE2\x9F\x81",
  };
  for (const std::string& s : samples) {
    const Ids ids = tok_->encode(s, false, false);
    EXPECT_EQ(tok_->decode(ids), s);
    EXPECT_TRUE(is_valid_utf8(tok_->decode(ids)));
    StreamDecoder stream(*tok_);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, s);
  }
}

TEST_F(RealVocab, DecodeHidesControlsUnlessRendered) {
  const Ids ids = tok_->encode("<start_of_turn>user\nHi<end_of_turn>\n", true, true);
  EXPECT_EQ(tok_->decode(ids), "user\nHi\n");
  EXPECT_EQ(tok_->decode(ids, true), "<bos><start_of_turn>user\nHi<end_of_turn>\n");
}

}  // namespace
}  // namespace dspark::tokenizer
