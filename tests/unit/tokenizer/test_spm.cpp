// SpmTokenizer on a hand-built vocabulary: merge order, ties, byte fallback, special partition,
// BOS/EOS flags and per-type decoding (llama.cpp's SPM path, src/tokenizer/spm.h).
#include <gtest/gtest.h>

#include "tiny_vocab.h"
#include "tokenizer/spm.h"

namespace dspark::tokenizer {
namespace {

using testing::make_tiny_tokenizer;
using testing::make_tiny_vocab;
using testing::tiny_byte;
using testing::TinyPiece;
using Ids = std::vector<int32_t>;

class SpmTiny : public ::testing::Test {
 protected:
  SpmTokenizer tok = make_tiny_tokenizer();
  int32_t id(std::string_view text) const {
    const int32_t i = tok.find_token(text);
    EXPECT_GE(i, 0) << "missing token " << text;
    return i;
  }
};

TEST_F(SpmTiny, HighestScoreMergesFirst) {
  // bc (-2) beats ab (-3); then a + bc forms abc.
  EXPECT_EQ(tok.encode("abc", false, false), Ids{id("abc")});
  // Without "abc" the text stays a + bc.
  std::vector<TinyPiece> pieces = {{"a", -1, TokenType::kNormal}, {"b", -1, TokenType::kNormal},
                                   {"c", -1, TokenType::kNormal}, {"ab", -3, TokenType::kNormal},
                                   {"bc", -2, TokenType::kNormal}};
  SpmTokenizer t2 = make_tiny_tokenizer(make_tiny_vocab(pieces));
  EXPECT_EQ(t2.encode("abc", false, false), (Ids{t2.find_token("a"), t2.find_token("bc")}));
}

TEST_F(SpmTiny, MergeDoesNotNeedIntermediatePiecesToBeBest) {
  // "abcd": bc (-2) first, then a+bc (abc, -4) vs bc+d (no token) -> abc, d.
  EXPECT_EQ(tok.encode("abcd", false, false), (Ids{id("abc"), id("d")}));
  // "bcd": bc (-2) beats cd (-3).
  EXPECT_EQ(tok.encode("bcd", false, false), (Ids{id("bc"), id("d")}));
}

TEST(SpmTies, EqualScoresMergeLeftmostFirst) {
  std::vector<TinyPiece> pieces = {{"a", -1, TokenType::kNormal}, {"b", -1, TokenType::kNormal},
                                   {"c", -1, TokenType::kNormal}, {"ab", -2, TokenType::kNormal},
                                   {"bc", -2, TokenType::kNormal}, {"aa", -2, TokenType::kNormal}};
  SpmTokenizer t = make_tiny_tokenizer(make_tiny_vocab(pieces));
  EXPECT_EQ(t.encode("abc", false, false), (Ids{t.find_token("ab"), t.find_token("c")}));
  EXPECT_EQ(t.encode("aaa", false, false), (Ids{t.find_token("aa"), t.find_token("a")}));
  EXPECT_EQ(t.encode("aaaaa", false, false),
            (Ids{t.find_token("aa"), t.find_token("aa"), t.find_token("a")}));
}

TEST_F(SpmTiny, SpacesBecomeU2581WithoutPrefix) {
  EXPECT_EQ(tok.encode("a b", false, false), (Ids{id("a"), id("\xE2\x96\x81" "b")}));
  EXPECT_EQ(tok.encode(" ", false, false), Ids{id("\xE2\x96\x81")});
  EXPECT_EQ(tok.encode("a", false, false), Ids{id("a")});  // no dummy prefix
}

TEST(SpmSpacePrefix, PrefixBeforeEveryRawFragmentAfterSpecial) {
  Vocab v = make_tiny_vocab(testing::default_tiny_pieces());
  v.add_space_prefix = true;
  SpmTokenizer t = make_tiny_tokenizer(std::move(v));
  const int32_t sp_b = t.find_token("\xE2\x96\x81" "b");
  const int32_t sp = t.find_token("\xE2\x96\x81");
  EXPECT_EQ(t.encode("b", false, false), Ids{sp_b});
  EXPECT_EQ(t.encode("b<start_of_turn>b", false, true), (Ids{sp_b, testing::kTinyStartOfTurn, sp_b}));
  EXPECT_EQ(t.encode("a", false, false), (Ids{sp, t.find_token("a")}));
  // llama_detokenize drops one leading space of the first piece.
  EXPECT_EQ(t.decode({sp_b}), "b");
  EXPECT_EQ(t.decode({sp_b, sp_b}), "b b");
}

TEST_F(SpmTiny, ByteFallbackForUnknownCharacters) {
  // U+4F60 (E4 BD A0) is no token: one byte token per byte.
  EXPECT_EQ(tok.encode("\xE4\xBD\xA0", false, false),
            (Ids{tiny_byte(0xE4), tiny_byte(0xBD), tiny_byte(0xA0)}));
  // é is a token; ü (C3 BC) is not.
  EXPECT_EQ(tok.encode("a\xC3\xA9\xC3\xBC", false, false),
            (Ids{id("a"), id("\xC3\xA9"), tiny_byte(0xC3), tiny_byte(0xBC)}));
  // Invalid and truncated UTF-8 still maps to bytes. Symbol lengths come from the lead byte alone
  // (llama.cpp unicode_len_utf8), so 0xFF swallows up to 3 following bytes: "\xFF" "a" is one
  // symbol and its "a" falls back to a byte token too.
  EXPECT_EQ(tok.encode("a\xE4", false, false), (Ids{id("a"), tiny_byte(0xE4)}));
  EXPECT_EQ(tok.encode("\xFF" "a\xE4", false, false),
            (Ids{tiny_byte(0xFF), tiny_byte('a'), tiny_byte(0xE4)}));
  EXPECT_EQ(tok.encode("\xFF" "abcd", false, false),
            (Ids{tiny_byte(0xFF), tiny_byte('a'), tiny_byte('b'), tiny_byte('c'), id("d")}));
  EXPECT_EQ(tok.encode("\x01", false, false), Ids{tiny_byte(0x01)});
}

TEST_F(SpmTiny, ControlTokensOnlyWithParseSpecial) {
  EXPECT_EQ(tok.encode("<start_of_turn>ab<end_of_turn>", false, true),
            (Ids{testing::kTinyStartOfTurn, id("ab"), testing::kTinyEndOfTurn}));
  // Without parse_special the text is tokenized as ordinary characters.
  Ids plain = tok.encode("<start_of_turn>", false, false);
  EXPECT_EQ(plain.front(), id("<"));
  EXPECT_EQ(plain.back(), id(">"));
  for (int32_t i : plain) EXPECT_NE(i, testing::kTinyStartOfTurn);
  EXPECT_EQ(tok.decode(plain), "<start_of_turn>");
}

TEST_F(SpmTiny, UserDefinedAlwaysPartitioned) {
  EXPECT_EQ(tok.encode("a\nb", false, false), (Ids{id("a"), testing::kTinyNewline, id("b")}));
  EXPECT_EQ(tok.encode("<b>ab", false, false), (Ids{testing::kTinyBoldTag, id("ab")}));
  // Longest first: "\n\n\n" -> "\n\n", "\n".
  EXPECT_EQ(tok.encode("\n\n\n", false, false), (Ids{testing::kTinyNewline2, testing::kTinyNewline}));
  EXPECT_EQ(tok.encode("\n\n\n\n", false, true), (Ids{testing::kTinyNewline2, testing::kTinyNewline2}));
}

TEST_F(SpmTiny, EndOfGenerationTextsAreForcedControl) {
  // "</s>" is stored USER_DEFINED; llama.cpp makes it CONTROL, so it needs parse_special.
  EXPECT_EQ(tok.encode("</s>", false, true), Ids{testing::kTinyEndS});
  EXPECT_NE(tok.encode("</s>", false, false), Ids{testing::kTinyEndS});
  EXPECT_TRUE(tok.is_control(testing::kTinyEndS));
  EXPECT_EQ(tok.token_to_piece(testing::kTinyEndS), "");
  EXPECT_EQ(tok.token_to_piece(testing::kTinyEndS, true), "</s>");
}

TEST_F(SpmTiny, BosAndEosFollowFlags) {
  EXPECT_EQ(tok.encode("ab", true, false), (Ids{2, id("ab")}));
  EXPECT_EQ(tok.encode("", true, false), Ids{2});
  EXPECT_EQ(tok.encode("", false, false), Ids{});
  EXPECT_EQ(tok.encode("<bos>ab", true, true), (Ids{2, 2, id("ab")}));  // double BOS, as llama.cpp
  Vocab v = make_tiny_vocab(testing::default_tiny_pieces());
  v.add_bos = false;
  v.add_eos = true;
  SpmTokenizer t = make_tiny_tokenizer(std::move(v));
  EXPECT_EQ(t.encode("ab", true, false), (Ids{t.find_token("ab"), 1}));
  EXPECT_EQ(t.encode("ab", false, false), (Ids{t.find_token("ab")}));
}

TEST_F(SpmTiny, DecodeEachTokenType) {
  EXPECT_EQ(tok.token_to_piece(id("\xE2\x96\x81" "b")), " b");             // NORMAL
  EXPECT_EQ(tok.token_to_piece(tiny_byte(0x41)), "A");                      // BYTE
  EXPECT_EQ(tok.token_to_piece(tiny_byte(0xE4)), std::string(1, '\xE4'));
  EXPECT_EQ(tok.token_to_piece(testing::kTinyStartOfTurn), "");             // CONTROL
  EXPECT_EQ(tok.token_to_piece(testing::kTinyStartOfTurn, true), "<start_of_turn>");
  EXPECT_EQ(tok.token_to_piece(2), "");
  EXPECT_EQ(tok.token_to_piece(2, true), "<bos>");
  EXPECT_EQ(tok.token_to_piece(testing::kTinyNewline), "\n");               // USER_DEFINED
  EXPECT_EQ(tok.token_to_piece(testing::kTinyBoldTag), "<b>");
  EXPECT_EQ(tok.token_to_piece(testing::kTinyUnused), "");                  // UNUSED
  EXPECT_EQ(tok.token_to_piece(testing::kTinyUnused, true), "");
  EXPECT_EQ(tok.token_to_piece(-1), "");                                    // out of range
  EXPECT_EQ(tok.token_to_piece(tok.n_vocab()), "");
  EXPECT_EQ(tok.decode({2, testing::kTinyStartOfTurn, id("ab"), testing::kTinyNewline}), "ab\n");
  EXPECT_EQ(tok.decode({2, testing::kTinyStartOfTurn, id("ab")}, true), "<bos><start_of_turn>ab");
}

TEST_F(SpmTiny, RoundTripWithByteFallback) {
  for (std::string_view s : {"abc d", "  a  b ", "\xE4\xBD\xA0\xE5\xA5\xBD", "\xF0\x9F\x98\x80!",
                             "caf\xC3\xA9\n\n\nx", "<b>a</b>\t", "tab\there"}) {
    EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s);
  }
}

TEST_F(SpmTiny, LookupsAndStops) {
  EXPECT_EQ(tok.n_vocab(), 11 + 256 + 13);
  EXPECT_EQ(tok.bos(), 2);
  EXPECT_EQ(tok.eos(), 1);
  EXPECT_EQ(tok.end_of_turn(), testing::kTinyEndOfTurn);
  EXPECT_EQ(tok.find_token("zz"), -1);
  EXPECT_TRUE(tok.is_stop(1));
  EXPECT_TRUE(tok.is_stop(testing::kTinyEndOfTurn));
  EXPECT_FALSE(tok.is_stop(2));
  EXPECT_FALSE(tok.is_stop(-1));
}

TEST(SpmCreate, RejectsMalformedVocabularies) {
  Vocab dup = make_tiny_vocab({{"a", 0, TokenType::kNormal}, {"a", 0, TokenType::kNormal}});
  Result<SpmTokenizer> r = SpmTokenizer::create(dup);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("same text"), std::string::npos) << r.message();

  Vocab short_scores = make_tiny_vocab({});
  short_scores.scores.pop_back();
  r = SpmTokenizer::create(short_scores);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("scores"), std::string::npos) << r.message();

  Vocab bad_bos = make_tiny_vocab({});
  bad_bos.bos = bad_bos.n_vocab();
  r = SpmTokenizer::create(bad_bos);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("bos"), std::string::npos) << r.message();

  Vocab bad_byte = make_tiny_vocab({{"<0xZZ>", 0, TokenType::kByte}});
  r = SpmTokenizer::create(bad_byte);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("<0xXX>"), std::string::npos) << r.message();

  EXPECT_FALSE(SpmTokenizer::create(make_tiny_vocab({{"<0x4", 0, TokenType::kByte}})).is_ok());
  EXPECT_FALSE(SpmTokenizer::create(Vocab{}).is_ok());
}

TEST(SpmCreate, EmptyTextsGetPlaceholders) {
  Vocab v = make_tiny_vocab({{"", 0, TokenType::kNormal}});
  Result<SpmTokenizer> r = SpmTokenizer::create(v);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->token_text(r->n_vocab() - 1), "[EMPTY_" + std::to_string(r->n_vocab() - 1) + "]");
}

TEST_F(SpmTiny, LongInputIsLinearish) {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += (i % 7 == 0) ? "ab\n" : "abcd ";
  const Ids ids = tok.encode(s, true, false);
  EXPECT_GT(ids.size(), 20000u);
  EXPECT_EQ(tok.decode(ids), s);
}

}  // namespace
}  // namespace dspark::tokenizer
