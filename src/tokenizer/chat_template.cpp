#include "tokenizer/chat_template.h"

#include <cstdint>
#include <string_view>

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

}  // namespace dspark::tokenizer
