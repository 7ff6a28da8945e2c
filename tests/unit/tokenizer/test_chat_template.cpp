// Gemma 3 chat template (src/tokenizer/chat_template.h): exact strings and role errors.
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

// SmolLM2-135M-Instruct's tokenizer.chat_template, verbatim from its GGUF.
const std::string kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplates, DetectsChatMLWithItsDefaultSystemTurn) {
  auto t = detect_chat_template(kSmolLM2Template);
  ASSERT_TRUE(t.is_ok()) << t.message();
  EXPECT_EQ(t->family, ChatFamily::kChatML);
  EXPECT_EQ(t->default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  std::vector<std::pair<size_t, size_t>> spans;
  auto r = render_chat(*t, {{"user", " Hi there \n"}}, true, false, &spans);
  ASSERT_TRUE(r.is_ok());
  // What jinja2 renders for this template (the content is not trimmed).
  EXPECT_EQ(*r,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\n Hi there \n<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(r->substr(spans[0].first, spans[0].second - spans[0].first), " Hi there \n");
  // A system message replaces the default one.
  r = render_chat(*t, {{"system", "Be brief."}, {"user", "Q"}, {"assistant", "A"}, {"user", "Q2"}}, false, false);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA"
                "<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n");
}

TEST(ChatTemplates, Llama3AndGemmaAndUnknown) {
  auto l3 = detect_chat_template("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
                                 "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}");
  ASSERT_TRUE(l3.is_ok());
  EXPECT_EQ(l3->family, ChatFamily::kLlama3);
  auto r = render_chat(*l3, {{"user", "  Hello "}}, true, false);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant"
                "<|end_header_id|>\n\n");
  auto g = detect_chat_template("{{ bos_token }}<start_of_turn>...");
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->family, ChatFamily::kGemma);
  r = render_chat(*g, {{"user", "Hello"}}, true, false);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");

  auto unknown = detect_chat_template("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.message().find("--chat-template"), std::string::npos);
  EXPECT_FALSE(chat_template_by_name("vicuna").is_ok());
  ASSERT_TRUE(chat_template_by_name("chatml").is_ok());
  EXPECT_EQ(chat_template_by_name("chatml")->default_system, "");
  // Roles outside system/user/assistant are refused by the ChatML and Llama 3 renderers.
  EXPECT_FALSE(render_chat(*l3, {{"tool", "x"}}, true, false).is_ok());
  EXPECT_FALSE(render_chat(*chat_template_by_name("chatml"), {}, true, false).is_ok());
}

}  // namespace dspark::tokenizer
