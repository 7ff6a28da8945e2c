#include "tokenizer/chat_template.h"

#include <cstdint>
#include <string_view>

#include "formats/gguf.h"

namespace dspark::tokenizer {
namespace {

constexpr std::string_view kBos = "<bos>";
constexpr std::string_view kStartOfTurn = "<start_of_turn>";
constexpr std::string_view kEndOfTurn = "<end_of_turn>";

// Py_UNICODE_ISSPACE: bidirectional class WS, B or S, or general category Zs.
bool is_python_space(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// Decodes the code point at s[i] if it is a well-formed sequence; *len gets its length.
// Returns UINT32_MAX (never whitespace) for an invalid byte, with *len = 1.
uint32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  *len = 1;
  if (b0 < 0x80) return b0;
  int n = 0;
  uint32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) { n = 2; cp = b0 & 0x1F; }
  else if (b0 >= 0xE0 && b0 <= 0xEF) { n = 3; cp = b0 & 0x0F; }
  else if (b0 >= 0xF0 && b0 <= 0xF4) { n = 4; cp = b0 & 0x07; }
  else return UINT32_MAX;
  if (i + n > s.size()) return UINT32_MAX;
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return UINT32_MAX;
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = static_cast<size_t>(n);
  return cp;
}

// Byte length of the trailing whitespace code point ending at s[end - 1], or 0.
size_t trailing_space_len(std::string_view s, size_t begin, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end - begin; ++n) {
    const auto b = static_cast<unsigned char>(s[end - n]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: the lead is further left
    size_t len = 0;
    const uint32_t cp = decode_at(s, end - n, &len);
    return len == n && is_python_space(cp) ? n : 0;
  }
  return 0;
}

}  // namespace

std::string trim_python_whitespace(const std::string& str) {
  const std::string_view s = str;
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len = 0;
    if (!is_python_space(decode_at(s, begin, &len))) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    const size_t len = trailing_space_len(s, begin, end);
    if (len == 0) break;
    end -= len;
  }
  return std::string(s.substr(begin, end - begin));
}

Result<std::string> render_gemma3_chat(const std::vector<ChatMessage>& msgs,
                                       bool add_generation_prompt, bool include_bos,
                                       std::vector<std::pair<size_t, size_t>>* content_spans) {
  if (content_spans) content_spans->clear();
  if (msgs.empty()) return Status::error("messages: empty conversation");
  size_t first = 0;
  std::string prefix;
  if (msgs[0].role == "system") {
    prefix = msgs[0].content + "\n\n";
    first = 1;
    if (msgs.size() == 1) return Status::error("messages: a system message needs a user message after it");
  }

  std::string out;
  if (include_bos) out += kBos;
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    const bool want_user = (i - first) % 2 == 0;
    const char* expected = want_user ? "user" : "assistant";
    if (m.role != expected) {
      const bool known = m.role == "user" || m.role == "assistant" || m.role == "system";
      return Status::error("messages[" + std::to_string(i) + "]: role \"" + m.role + "\" " +
                           (known ? "out of order" : "not supported") + ": expected \"" + expected +
                           "\" (after an optional leading system message, roles must alternate "
                           "user/assistant starting with user)");
    }
    out += kStartOfTurn;
    out += want_user ? "user" : "model";
    out += '\n';
    const size_t begin = out.size();
    if (i == first) out += prefix;
    out += trim_python_whitespace(m.content);
    if (content_spans && out.size() > begin) content_spans->emplace_back(begin, out.size());
    out += kEndOfTurn;
    out += '\n';
  }
  if (add_generation_prompt) {
    out += kStartOfTurn;
    out += "model\n";
  }
  return out;
}

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::kGemma: return "gemma";
    case ChatFamily::kChatML: return "chatml";
    case ChatFamily::kLlama3: return "llama3";
  }
  return "?";
}

Result<ChatTemplate> chat_template_by_name(const std::string& name) {
  for (ChatFamily f : {ChatFamily::kGemma, ChatFamily::kChatML, ChatFamily::kLlama3})
    if (name == chat_family_name(f)) return ChatTemplate{f, ""};
  return Status::error("--chat-template: unknown template '" + name + "' (known: gemma, chatml, llama3)");
}

Result<ChatTemplate> detect_chat_template(const std::string& jinja) {
  if (jinja.find("<start_of_turn>") != std::string::npos) return ChatTemplate{ChatFamily::kGemma, ""};
  if (jinja.find("<|start_header_id|>") != std::string::npos) return ChatTemplate{ChatFamily::kLlama3, ""};
  if (jinja.find("<|im_start|>") != std::string::npos) {
    ChatTemplate t{ChatFamily::kChatML, ""};
    // A default system turn written as a literal: '<|im_start|>system\n{text}<|im_end|>' inside a
    // branch taken when the first message is not a system message.
    const std::string open = "<|im_start|>system\n";
    const size_t cond = jinja.find("!= 'system'");
    const size_t at = jinja.find(open);
    if (cond != std::string::npos && at != std::string::npos && at > cond) {
      const size_t begin = at + open.size(), end = jinja.find("<|im_end|>", begin);
      const std::string text = end == std::string::npos ? "" : jinja.substr(begin, end - begin);
      if (end != std::string::npos && text.find_first_of("{}'\"") == std::string::npos) t.default_system = text;
    }
    return t;
  }
  return Status::error("tokenizer.chat_template: unrecognised chat template (known families: gemma, chatml, "
                       "llama3); pass --chat-template NAME to choose one");
}

Result<ChatTemplate> resolve_chat_template(const formats::GgufFile& file, const std::string& override_name) {
  if (!override_name.empty()) return chat_template_by_name(override_name);
  if (file.has("tokenizer.chat_template")) {
    auto jinja = file.get_string("tokenizer.chat_template");
    if (!jinja) return Status::error(jinja.message());
    auto t = detect_chat_template(*jinja);
    if (!t) return Status::error(file.path() + ": " + t.message());
    return t;
  }
  auto arch = file.get_string("general.architecture");
  if (arch && *arch == "gemma3") return ChatTemplate{ChatFamily::kGemma, ""};
  return Status::error(file.path() + ": no tokenizer.chat_template in the file; pass --chat-template NAME "
                       "(gemma, chatml, llama3)");
}

namespace {

// ChatML and Llama 3: any order of system / user / assistant.
Status check_roles(const std::vector<ChatMessage>& msgs) {
  if (msgs.empty()) return Status::error("messages: empty conversation");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string& r = msgs[i].role;
    if (r != "system" && r != "user" && r != "assistant")
      return Status::error("messages[" + std::to_string(i) + "]: role \"" + r +
                           "\" not supported (system, user or assistant)");
  }
  return Status::ok();
}

}  // namespace

Result<std::string> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, bool include_bos,
                                std::vector<std::pair<size_t, size_t>>* content_spans) {
  if (t.family == ChatFamily::kGemma) return render_gemma3_chat(msgs, add_generation_prompt, include_bos, content_spans);
  if (content_spans) content_spans->clear();
  DSPARK_RETURN_IF_ERROR(check_roles(msgs));
  std::string out;
  auto content = [&](const std::string& text) {
    const size_t begin = out.size();
    out += text;
    if (content_spans && out.size() > begin) content_spans->emplace_back(begin, out.size());
  };
  if (t.family == ChatFamily::kChatML) {
    if (msgs[0].role != "system" && !t.default_system.empty())
      out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
    for (const ChatMessage& m : msgs) {
      out += "<|im_start|>" + m.role + "\n";
      content(m.content);
      out += "<|im_end|>\n";
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
  for (const ChatMessage& m : msgs) {  // Llama 3
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    content(trim_python_whitespace(m.content));
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace dspark::tokenizer
