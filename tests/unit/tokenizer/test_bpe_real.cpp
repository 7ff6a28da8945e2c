// RealBpeVocab: the SmolLM2-135M-Instruct GGUF tokenizer at $DSPARK_SMOLLM2_MODEL (skipped when
// unset) against tokenizations taken from llama.cpp (llama_tokenize of llama-cpp-python 0.3.36's
// libllama on the same file), its end-of-generation set (llama_vocab_is_eog) and round trips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dspark::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

class RealBpeVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("DSPARK_SMOLLM2_MODEL");
    if (path == nullptr || *path == '\0') {
      skip_reason_ = "DSPARK_SMOLLM2_MODEL is not set (path to the SmolLM2-135M-Instruct GGUF)";
      return;
    }
    Result<formats::GgufFile> file = formats::GgufFile::open(path);
    if (!file) {
      load_error_ = file.message();
      return;
    }
    Result<BpeTokenizer> tok = load_bpe_tokenizer(*file);
    if (!tok) {
      load_error_ = tok.message();
      return;
    }
    tok_ = std::make_unique<BpeTokenizer>(std::move(tok).value());
  }
  static void TearDownTestSuite() { tok_.reset(); }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_NE(tok_, nullptr) << load_error_;
  }

  static std::unique_ptr<BpeTokenizer> tok_;
  static std::string skip_reason_;
  static std::string load_error_;
};

std::unique_ptr<BpeTokenizer> RealBpeVocab::tok_;
std::string RealBpeVocab::skip_reason_;
std::string RealBpeVocab::load_error_;

TEST_F(RealBpeVocab, SpecialIds) {
  EXPECT_EQ(tok_->n_vocab(), 49152);
  EXPECT_EQ(tok_->bos(), 1);
  EXPECT_EQ(tok_->eos(), 2);
  EXPECT_EQ(tok_->end_of_turn(), 2);  // <|im_end|>
  EXPECT_FALSE(tok_->add_bos());
  EXPECT_EQ(tok_->find_token("<|im_start|>"), 1);
  // llama_vocab_is_eog: <|endoftext|>, <|im_end|> and <reponame> (a FIM repository token).
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    EXPECT_EQ(tok_->is_stop(id), id == 0 || id == 2 || id == 4) << id;
  }
  for (int32_t id = 0; id <= 16; ++id) EXPECT_TRUE(tok_->is_control(id)) << id;
  EXPECT_FALSE(tok_->is_control(17));
}

TEST_F(RealBpeVocab, MatchesLlamaCpp) {
  // Digits one by one (the smollm pre-tokenizer), "'s" split off, " It" kept whole.
  EXPECT_EQ(tok_->encode("Hello world! It's 2024.", true, false),
            (Ids{19556, 905, 17, 657, 506, 216, 34, 32, 34, 36, 30}));
  EXPECT_EQ(tok_->encode("<|im_start|>user\nTest<|im_end|>\n<|im_start|>assistant\n", false, true),
            (Ids{1, 4093, 198, 6310, 2, 198, 1, 520, 9531, 198}));
  EXPECT_EQ(tok_->encode("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                         "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                         "<|im_start|>assistant\n",
                         false, true),
            (Ids{1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018,
                 411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198,
                 1, 520, 9531, 198}));
  EXPECT_EQ(tok_->encode("def f(x):\n    return x ** 2\n", true, false),
            (Ids{1604, 275, 24, 104, 727, 472, 1003, 1792, 1903, 216, 34, 198}));
  EXPECT_EQ(tok_->encode("Gr\xC3\xBC\xC3\x9F" "e \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!", true, false),
            (Ids{27302, 7170, 34878, 85, 216, 18645, 250, 48392, 138, 40303, 218, 17}));
  EXPECT_EQ(tok_->encode("  I'm   here\n\n", true, false), (Ids{216, 339, 5248, 256, 1535, 1116}));
  // User text cannot inject control tokens.
  EXPECT_EQ(tok_->encode("<|im_start|>user\n", false, false), (Ids{44, 108, 306, 79, 3738, 108, 46, 4093, 198}));
}

TEST_F(RealBpeVocab, RoundTripMultilingual) {
  const Tokenizer wrapped(*tok_);
  const std::string samples[] = {
      "Hello, world! How are you today?",
      "  leading and trailing spaces  ",
      "Tabs\tand\nnewlines\n\n\nand    runs of spaces",
      "Gr\xC3\xBC\xC3\x9F" "e aus M\xC3\xBCnchen, \xC3\xA7" "a va? \xC2\xBFQu\xC3\xA9 tal?",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81",  // 你好，世界！
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80",   // Привет мир
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\xA6\x84 emoji",     // 😀👍🏽 🦄
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",   // नमस्ते
      "code: `for (int i = 0; i < 10; ++i) { x[i] += 1234567; }`",
      "I'm sure they'll say it's 'quoted' -- we've WE'RE",
  };
  for (const std::string& s : samples) {
    const Ids ids = tok_->encode(s, false, false);
    EXPECT_EQ(tok_->decode(ids), s);
    StreamDecoder stream(wrapped);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, s);
  }
}

TEST_F(RealBpeVocab, DecodeHidesControlsUnlessRendered) {
  const Ids ids = tok_->encode("<|im_start|>user\nHi<|im_end|>\n", true, true);
  EXPECT_EQ(tok_->decode(ids), "user\nHi\n");
  EXPECT_EQ(tok_->decode(ids, true), "<|im_start|>user\nHi<|im_end|>\n");
}

}  // namespace
}  // namespace dspark::tokenizer
