// BpeTokenizer on a hand-built byte-level vocabulary (test_bpe_tiny.h): merge order and ties,
// merges whose result is no token (llama.cpp's fallback), word boundaries, special partition,
// BOS/EOS flags, per-type decoding, round trips, streaming of partial UTF-8, end-of-generation
// tokens, thread safety and the errors of bad vocabularies.
#include <gtest/gtest.h>

#include <thread>

#include "test_bpe_tiny.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dspark::tokenizer {
namespace {

using testing::enc;
using testing::make_tiny_bpe_vocab;
using testing::tiny_bpe_byte;
using Ids = std::vector<int32_t>;
using Merges = std::vector<std::pair<std::string, std::string>>;

BpeTokenizer make(Vocab v) {
  Result<BpeTokenizer> t = BpeTokenizer::create(std::move(v));
  DSPARK_CHECK(t.is_ok());
  return std::move(t).value();
}

// A vocabulary with " the", "in", "ing", "abc" and friends.
BpeTokenizer make_default() {
  return make(make_tiny_bpe_vocab({" t", " th", " the", "in", "ing", "ab", "bc", "abc", "aa"},
                                  {{" ", "t"}, {" t", "h"}, {" th", "e"}, {"i", "n"}, {"in", "g"},
                                   {"b", "c"}, {"a", "b"}, {"a", "bc"}, {"a", "a"}}));
}

class BpeTiny : public ::testing::Test {
 protected:
  BpeTokenizer tok = make_default();
  int32_t id(std::string_view raw) const {
    const int32_t i = tok.find_token(enc(raw));
    EXPECT_GE(i, 0) << "missing token " << raw;
    return i;
  }
};

TEST_F(BpeTiny, MergesLowestRankFirst) {
  // "b c" (rank 5) beats "a b" (rank 6); then "a bc" (rank 7) gives "abc".
  EXPECT_EQ(tok.encode("abc", false, false), Ids{id("abc")});
  EXPECT_EQ(tok.encode(" the", false, false), Ids{id(" the")});
  EXPECT_EQ(tok.encode("thing", false, false), (Ids{id("t"), id("h"), id("ing")}));
  // The same tokens with the ranks of "a b" and "b c" swapped: ab + c, as no "ab c" merge exists.
  BpeTokenizer t2 = make(make_tiny_bpe_vocab({"ab", "bc", "abc"}, {{"a", "b"}, {"b", "c"}, {"a", "bc"}}));
  EXPECT_EQ(t2.encode("abc", false, false), (Ids{t2.find_token("ab"), t2.find_token("c")}));
}

TEST_F(BpeTiny, EqualRanksMergeLeftmostFirst) {
  EXPECT_EQ(tok.encode("aaa", false, false), (Ids{id("aa"), id("a")}));
  EXPECT_EQ(tok.encode("aaaaa", false, false), (Ids{id("aa"), id("aa"), id("a")}));
}

TEST_F(BpeTiny, MergesStopAtWordBoundaries) {
  // gpt2 words: "the", " the", " thing" -> no merge crosses a space that starts a word.
  EXPECT_EQ(tok.encode("the the thing", false, false),
            (Ids{id("t"), id("h"), id("e"), id(" the"), id(" th"), id("ing")}));
  EXPECT_EQ(tok.encode("  the", false, false), (Ids{id(" "), id(" the")}));
}

TEST(BpeFallback, MergeResultThatIsNoTokenFallsBackToSingleBytes) {
  // "x y" merges to "xy", which is no token: llama.cpp emits the one-byte tokens of the
  // symbol's alphabet text, "x" and "y".
  BpeTokenizer t = make(make_tiny_bpe_vocab({}, {{"x", "y"}}));
  EXPECT_EQ(t.encode("xy", false, false), (Ids{tiny_bpe_byte('x'), tiny_bpe_byte('y')}));
  // For "é" (C3 A9, alphabet U+00C3 U+00A9) the alphabet text's bytes are no tokens: llama.cpp
  // drops the character entirely, and so does this tokenizer.
  BpeTokenizer drop = make(make_tiny_bpe_vocab({}, {{"\xC3", "\xA9"}}));
  EXPECT_EQ(drop.encode("caf\xC3\xA9", false, false),
            (Ids{tiny_bpe_byte('c'), tiny_bpe_byte('a'), tiny_bpe_byte('f')}));
  BpeTokenizer keep = make(make_tiny_bpe_vocab({}, {}));
  EXPECT_EQ(keep.encode("\xC3\xA9", false, false), (Ids{tiny_bpe_byte(0xC3), tiny_bpe_byte(0xA9)}));
}

TEST_F(BpeTiny, SpecialTokensPartitionFirst) {
  const Ids chat = tok.encode("<|im_start|>ab<|im_end|>\n", false, true);
  EXPECT_EQ(chat, (Ids{testing::kBpeImStart, id("ab"), testing::kBpeImEnd, tiny_bpe_byte('\n')}));
  // Without parse_special, CONTROL texts are plain text (split by the pre-tokenizer).
  const Ids plain = tok.encode("<|im_start|>", false, false);
  for (int32_t i : plain) EXPECT_FALSE(tok.is_control(i)) << i;
  EXPECT_EQ(plain.front(), tiny_bpe_byte('<'));
  EXPECT_EQ(tok.decode(plain), "<|im_start|>");
  // USER_DEFINED is matched either way; forced CONTROL ("<reponame>", "</s>") only with parsing.
  EXPECT_EQ(tok.encode("a<tool>b", false, false), (Ids{id("a"), testing::kBpeTool, id("b")}));
  EXPECT_EQ(tok.encode("</s><reponame>", false, true), (Ids{testing::kBpeSlashS, testing::kBpeRepoName}));
  EXPECT_NE(tok.encode("</s>", false, false), Ids{testing::kBpeSlashS});
}

TEST_F(BpeTiny, BosAndEosFollowFlags) {
  EXPECT_EQ(tok.encode("ab", true, false), Ids{id("ab")});  // add_bos off (SmolLM2 style)
  EXPECT_EQ(tok.encode("", true, false), Ids{});
  Vocab v = make_tiny_bpe_vocab({"ab"}, {{"a", "b"}});
  v.add_bos = true;
  v.add_eos = true;
  BpeTokenizer t = make(std::move(v));
  EXPECT_EQ(t.encode("ab", true, false), (Ids{testing::kBpeImStart, t.find_token("ab"), testing::kBpeImEnd}));
  EXPECT_EQ(t.encode("ab", false, false), Ids{t.find_token("ab")});
  EXPECT_EQ(t.encode("", true, false), (Ids{testing::kBpeImStart, testing::kBpeImEnd}));
  EXPECT_TRUE(t.add_bos());
}

TEST_F(BpeTiny, DecodeEachTokenType) {
  EXPECT_EQ(tok.token_to_piece(id(" the")), " the");                 // NORMAL: alphabet -> bytes
  EXPECT_EQ(tok.token_to_piece(tiny_bpe_byte('\n')), "\n");
  EXPECT_EQ(tok.token_to_piece(tiny_bpe_byte(0xE4)), std::string(1, '\xE4'));
  EXPECT_EQ(tok.token_to_piece(testing::kBpeImEnd), "");              // CONTROL
  EXPECT_EQ(tok.token_to_piece(testing::kBpeImEnd, true), "<|im_end|>");
  EXPECT_EQ(tok.token_to_piece(testing::kBpeTool), "<tool>");         // USER_DEFINED
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(tok.n_vocab()), "");
  EXPECT_EQ(tok.decode({testing::kBpeImStart, id("ab"), testing::kBpeImEnd}), "ab");
  EXPECT_EQ(tok.decode({testing::kBpeImStart, id("ab")}, true), "<|im_start|>ab");

  // A NORMAL text outside the alphabet decodes like llama_decode_text; BYTE and UNUSED types.
  Vocab v = make_tiny_bpe_vocab({}, {});
  v.tokens.push_back("x\xE4\xBD\xA0");  // "x你": 你 is no alphabet character
  v.tokens.push_back("<0x41>");
  v.tokens.push_back("<unused0>");
  v.scores.resize(v.tokens.size(), 0);
  v.types.push_back(static_cast<int32_t>(TokenType::kNormal));
  v.types.push_back(static_cast<int32_t>(TokenType::kByte));
  v.types.push_back(static_cast<int32_t>(TokenType::kUnused));
  BpeTokenizer t = make(std::move(v));
  EXPECT_EQ(t.token_to_piece(t.n_vocab() - 3), "x[UNK_BYTE_0xe4bda0x\xE4\xBD\xA0]");
  EXPECT_EQ(t.token_to_piece(t.n_vocab() - 2), "A");
  EXPECT_EQ(t.token_to_piece(t.n_vocab() - 1, true), "");
}

TEST_F(BpeTiny, RoundTrip) {
  for (std::string_view s : {"the thing in abc", "  lead and trail  ", "x\n\n  y\r\n\tz",
                             "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
                             "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok!", "Gr\xC3\xBC\xC3\x9F" "e 1234",
                             "it's 'quoted' we'D", "<|im_end|> not special", "\x01\x7F\xC2\x85"}) {
    const Ids ids = tok.encode(s, false, false);
    EXPECT_EQ(tok.decode(ids), s);
  }
  // Invalid UTF-8 becomes U+FFFD before the byte mapping (llama.cpp's unicode_cpts_from_utf8).
  EXPECT_EQ(tok.decode(tok.encode("a\xFF" "b", false, false)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(tok.decode(tok.encode("\xC0\x80", false, false)), std::string(1, '\0'));  // overlong
}

TEST_F(BpeTiny, StreamingHoldsBackPartialCharacters) {
  // "😀" is four byte tokens here; the stream yields nothing until the character is complete.
  const Ids ids = tok.encode("a\xF0\x9F\x98\x80", false, false);
  ASSERT_EQ(ids.size(), 5u);
  const Tokenizer wrapped(tok);
  StreamDecoder stream(wrapped);
  std::vector<std::string> out;
  for (int32_t i : ids) out.push_back(stream.push(i));
  EXPECT_EQ(out, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(stream.flush(), "");
  // A truncated tail is flushed as one U+FFFD.
  StreamDecoder cut(wrapped);
  EXPECT_EQ(cut.push(ids[1]), "");
  EXPECT_EQ(cut.push(ids[2]), "");
  EXPECT_EQ(cut.flush(), kReplacementChar);
}

TEST_F(BpeTiny, EndOfGenerationAndTurn) {
  EXPECT_EQ(tok.bos(), testing::kBpeImStart);
  EXPECT_EQ(tok.eos(), testing::kBpeImEnd);
  EXPECT_EQ(tok.end_of_turn(), testing::kBpeImEnd);
  EXPECT_TRUE(tok.is_stop(testing::kBpeImEnd));
  EXPECT_TRUE(tok.is_stop(testing::kBpeEndOfText));
  EXPECT_TRUE(tok.is_stop(testing::kBpeRepoName));  // FIM repo token, as llama.cpp
  EXPECT_TRUE(tok.is_stop(testing::kBpeSlashS));
  EXPECT_FALSE(tok.is_stop(testing::kBpeImStart));
  EXPECT_FALSE(tok.is_stop(testing::kBpeTool));
  EXPECT_FALSE(tok.is_stop(-1));
  EXPECT_FALSE(tok.is_stop(tok.n_vocab()));
  EXPECT_TRUE(tok.is_control(testing::kBpeRepoName));  // stored NORMAL, forced CONTROL
  EXPECT_FALSE(tok.is_control(testing::kBpeTool));
  EXPECT_FLOAT_EQ(tok.token_score(id("ab")), 0.0f);
  EXPECT_EQ(tok.token_text(id(" the")), "\xC4\xA0the");

  // eos is a stop token whatever its text; no turn-end text -> end_of_turn() == -1.
  Vocab v = make_tiny_bpe_vocab({"ab"}, {{"a", "b"}});
  v.tokens[testing::kBpeImEnd] = "<|eos_x|>";
  v.eos = testing::kBpeFirstByte + 'z';
  BpeTokenizer t = make(std::move(v));
  EXPECT_EQ(t.end_of_turn(), -1);
  EXPECT_TRUE(t.is_stop(testing::kBpeFirstByte + 'z'));
  EXPECT_FALSE(t.is_stop(testing::kBpeImEnd));
}

TEST(BpeIgnoreMerges, Llama3FamilyEmitsWholeWordTokens) {
  // "hello", "'S" and "123" are tokens no merge builds: llama3 emits a word that is a token whole.
  BpeTokenizer llama3 = make(make_tiny_bpe_vocab({"hello", "'S", "123"}, {}, "llama3"));
  BpeTokenizer gpt2 = make(make_tiny_bpe_vocab({"hello", "'S", "123"}, {}, "gpt2"));
  EXPECT_EQ(llama3.encode("hello", false, false), Ids{llama3.find_token("hello")});
  EXPECT_EQ(gpt2.encode("hello", false, false).size(), 5u);
  // llama3 words: "IT", "'S" (case-insensitive contraction), " ", "123", "45".
  EXPECT_EQ(llama3.encode("IT'S 12345", false, false),
            (Ids{tiny_bpe_byte('I'), tiny_bpe_byte('T'), llama3.find_token("'S"), tiny_bpe_byte(' '),
                 llama3.find_token("123"), tiny_bpe_byte('4'), tiny_bpe_byte('5')}));
  EXPECT_TRUE(llama3.add_bos() == false);  // the vocabulary's flag wins over the family default
}

TEST_F(BpeTiny, ConcurrentEncodeIsDeterministic) {
  const std::string text = "the thing in abc, aaaaa \xF0\x9F\x98\x80 <|im_end|>";
  const Ids expected = tok.encode(text, false, true);
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  const BpeTokenizer copy = tok;  // copies share the tables
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) got[i] = copy.encode(text, false, true);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Ids& g : got) EXPECT_EQ(g, expected);
}

void expect_create_error(Vocab v, const std::string& needle) {
  Result<BpeTokenizer> t = BpeTokenizer::create(std::move(v));
  ASSERT_FALSE(t.is_ok()) << "expected an error containing " << needle;
  EXPECT_NE(t.message().find(needle), std::string::npos) << t.message();
}

TEST(BpeErrors, BadVocabulariesNameTheField) {
  Vocab unknown = make_tiny_bpe_vocab({}, {});
  unknown.merges.push_back(enc("a") + " " + enc("qq"));
  expect_create_error(unknown, "tokenizer.ggml.merges");
  expect_create_error(unknown, "\"qq\", which is no token");

  Vocab no_space = make_tiny_bpe_vocab({}, {});
  no_space.merges.push_back("ab");
  expect_create_error(no_space, "merges: entry 0");

  Vocab bad_pre = make_tiny_bpe_vocab({}, {}, "klingon");
  expect_create_error(bad_pre, "tokenizer.ggml.pre");

  Vocab spm = make_tiny_bpe_vocab({}, {});
  spm.model = "llama";
  expect_create_error(spm, "model");

  Vocab dup = make_tiny_bpe_vocab({"a"}, {});  // "a" is already a byte token
  expect_create_error(dup, "same text");

  Vocab bad_byte = make_tiny_bpe_vocab({}, {});
  bad_byte.types[testing::kBpeFirstByte] = static_cast<int32_t>(TokenType::kByte);
  expect_create_error(bad_byte, "<0xXX>");

  Vocab short_types = make_tiny_bpe_vocab({}, {});
  short_types.types.pop_back();
  expect_create_error(short_types, "types");

  Vocab no_bos = make_tiny_bpe_vocab({}, {});
  no_bos.bos = -1;
  no_bos.add_bos = true;
  expect_create_error(no_bos, "add_bos");
}

TEST(BpeErrors, DuplicateMergeKeepsTheFirstRank) {
  // llama.cpp's bpe_ranks.emplace keeps the first rank of a repeated pair.
  Vocab v = make_tiny_bpe_vocab({"ab", "bc"}, {{"a", "b"}, {"b", "c"}, {"a", "b"}});
  BpeTokenizer t = make(std::move(v));
  EXPECT_EQ(t.encode("abc", false, false), (Ids{t.find_token(enc("ab")), tiny_bpe_byte('c')}));
}

}  // namespace
}  // namespace dspark::tokenizer
