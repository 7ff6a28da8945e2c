// UTF-8 validation and the streaming detokenizer: characters split across byte tokens are emitted
// only when complete; invalid bytes become U+FFFD (utf8.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tiny_vocab.h"
#include "tokenizer/utf8.h"

namespace dspark::tokenizer {
namespace {

using testing::tiny_byte;

const std::string kFffd(kReplacementChar);

TEST(Utf8, Validity) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("abc"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80"));
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));        // U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));               // overlong NUL
  EXPECT_FALSE(is_valid_utf8("\xE0\x80\x80"));           // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));           // surrogate D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));       // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE4\xBD"));               // truncated
  EXPECT_FALSE(is_valid_utf8("\x80"));
  EXPECT_FALSE(is_valid_utf8("\xFF"));
}

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  EXPECT_EQ(sanitize_utf8("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(sanitize_utf8("\xE4\xBD" "a"), kFffd + "a");      // one U+FFFD for the 2-byte prefix
  EXPECT_EQ(sanitize_utf8("\xE4\xBD"), kFffd);
  EXPECT_EQ(sanitize_utf8("\x80\x80"), kFffd + kFffd);
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // Python errors="replace" agrees
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(sanitize_utf8("ok \xF0\x9F\x98\x80"), "ok \xF0\x9F\x98\x80");
}

class StreamTiny : public ::testing::Test {
 protected:
  Tokenizer tok = testing::make_tiny_tokenizer();
};

TEST_F(StreamTiny, TwoThreeAndFourByteCharactersSplitAcrossTokens) {
  StreamDecoder d(tok);
  EXPECT_EQ(d.push(tok.find_token("a")), "a");
  EXPECT_EQ(d.push(tiny_byte(0xC3)), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(tiny_byte(0xBC)), "\xC3\xBC");  // ü
  EXPECT_EQ(d.push(tiny_byte(0xE4)), "");
  EXPECT_EQ(d.push(tiny_byte(0xBD)), "");
  EXPECT_EQ(d.push(tiny_byte(0xA0)), "\xE4\xBD\xA0");  // 你
  EXPECT_EQ(d.push(tiny_byte(0xF0)), "");
  EXPECT_EQ(d.push(tiny_byte(0x9F)), "");
  EXPECT_EQ(d.push(tiny_byte(0x98)), "");
  EXPECT_EQ(d.push(tiny_byte(0x80)), "\xF0\x9F\x98\x80");  // 😀
  EXPECT_EQ(d.push(tok.find_token("\xE2\x96\x81" "b")), " b");
  EXPECT_EQ(d.flush(), "");
}

TEST_F(StreamTiny, ControlTokensFollowRenderFlag) {
  StreamDecoder hidden(tok);
  EXPECT_EQ(hidden.push(testing::kTinyEndOfTurn), "");
  StreamDecoder shown(tok, /*render_special=*/true);
  EXPECT_EQ(shown.push(testing::kTinyEndOfTurn), "<end_of_turn>");
}

TEST_F(StreamTiny, InvalidBytesBecomeReplacementCharacters) {
  StreamDecoder d(tok);
  EXPECT_EQ(d.push(tiny_byte(0xFF)), kFffd);  // can never start a character: emitted at once
  EXPECT_EQ(d.push(tiny_byte(0xE4)), "");
  EXPECT_EQ(d.push(tok.find_token("a")), kFffd + "a");  // broken sequence, then the letter
  EXPECT_EQ(d.push(tiny_byte(0x80)), kFffd);            // stray continuation byte
  EXPECT_EQ(d.push(tiny_byte(0xF0)), "");
  EXPECT_EQ(d.push(tiny_byte(0x9F)), "");
  EXPECT_EQ(d.flush(), kFffd);  // truncated at the end of the stream
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.flush(), "");
}

TEST_F(StreamTiny, PiecesJoinToSanitizedWhole) {
  // Deterministic pseudo-random byte streams cut into random chunks: the stream output always
  // equals sanitize_utf8 of the whole, and every chunk is valid UTF-8 on its own.
  uint32_t state = 12345;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  const std::string alphabet[] = {"a", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\xFF",
                                  "\x80", "\xED\xA0\x80", "\xE0\x80", "\xF4\x90", " "};
  for (int trial = 0; trial < 300; ++trial) {
    std::string whole;
    const int n_parts = 1 + static_cast<int>(next() % 12);
    for (int i = 0; i < n_parts; ++i) whole += alphabet[next() % std::size(alphabet)];
    StreamDecoder d(tok);
    std::string streamed;
    for (size_t i = 0; i < whole.size();) {
      const size_t len = std::min<size_t>(1 + next() % 3, whole.size() - i);
      const std::string out = d.push_bytes(std::string_view(whole).substr(i, len));
      EXPECT_TRUE(is_valid_utf8(out));
      streamed += out;
      i += len;
    }
    const std::string tail = d.flush();
    EXPECT_TRUE(is_valid_utf8(tail));
    streamed += tail;
    EXPECT_EQ(streamed, sanitize_utf8(whole)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace dspark::tokenizer
