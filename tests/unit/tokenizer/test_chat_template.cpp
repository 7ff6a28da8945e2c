// Gemma 3 chat template (GEMMA3-GGUF.md section 8): exact strings and role errors.
#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"

namespace dspark::tokenizer {
namespace {

TEST(ChatTemplate, SingleUserTurn) {
  Result<std::string> r = render_gemma3_chat({{"user", "Hello"}}, true, true);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(*r, "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");

  r = render_gemma3_chat({{"user", "Hello"}}, true, false);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");

  r = render_gemma3_chat({{"user", "Hello"}}, false, true);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "<bos><start_of_turn>user\nHello<end_of_turn>\n");
}

TEST(ChatTemplate, SystemAndMultiTurn) {
  Result<std::string> r = render_gemma3_chat(
      {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}, true, true);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(*r,
            "<bos><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
            "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, ContentsTrimmedSystemNot) {
  Result<std::string> r =
      render_gemma3_chat({{"system", "  be brief \n"}, {"user", "\n  hi there\t \n"},
                          {"assistant", " ok\xC2\xA0"}, {"user", "\xE3\x80\x80x y\xE3\x80\x80"}},
                         false, false);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(*r,
            "<start_of_turn>user\n  be brief \n\n\nhi there<end_of_turn>\n"
            "<start_of_turn>model\nok<end_of_turn>\n<start_of_turn>user\nx y<end_of_turn>\n");
}

TEST(ChatTemplate, TrimMatchesPythonStrip) {
  EXPECT_EQ(trim_python_whitespace(""), "");
  EXPECT_EQ(trim_python_whitespace(" \t\n\r\v\f"), "");
  EXPECT_EQ(trim_python_whitespace("\x1c" "a\x1f"), "a");
  EXPECT_EQ(trim_python_whitespace("\xC2\x85" "a b\xE2\x80\x83"), "a b");   // U+0085, U+2003
  EXPECT_EQ(trim_python_whitespace("\xE2\x80\x8B" "a"), "\xE2\x80\x8B" "a");  // U+200B is not space
  EXPECT_EQ(trim_python_whitespace("a\xE4\xBD\xA0 "), "a\xE4\xBD\xA0");
  EXPECT_EQ(trim_python_whitespace(" \xFF "), "\xFF");
}

TEST(ChatTemplate, RoleErrorsNameTheMessage) {
  Result<std::string> r = render_gemma3_chat({{"user", "a"}, {"user", "b"}}, true, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("messages[1]"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("\"user\""), std::string::npos) << r.message();

  r = render_gemma3_chat({{"assistant", "a"}}, true, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("messages[0]"), std::string::npos) << r.message();

  r = render_gemma3_chat({{"system", "s"}, {"assistant", "a"}}, true, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("messages[1]"), std::string::npos) << r.message();

  r = render_gemma3_chat({{"user", "a"}, {"system", "s"}}, true, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("messages[1]: role \"system\""), std::string::npos) << r.message();

  r = render_gemma3_chat({{"user", "a"}, {"tool", "t"}}, true, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("not supported"), std::string::npos) << r.message();

  EXPECT_FALSE(render_gemma3_chat({}, true, true).is_ok());
  EXPECT_FALSE(render_gemma3_chat({{"system", "s"}}, true, true).is_ok());
}

}  // namespace
}  // namespace dspark::tokenizer
