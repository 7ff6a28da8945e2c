// Gemma 3 chat template (GEMMA3-GGUF.md section 8): the HF `chat_template` of every Gemma 3 -it
// model, re-implemented without a Jinja engine.
//
//   [<bos>] per turn: <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
//   [<start_of_turn>model\n] with add_generation_prompt
//
// A leading "system" message gets no turn: its content (untrimmed) + "\n\n" prefixes the content of
// the first user turn. The rest must alternate user, assistant, user, ... starting with user;
// "assistant" is rendered as "model". Trimming strips what Python's str.strip() strips (Jinja's
// `trim` filter): ASCII whitespace, 0x1C..0x1F and Unicode White_Space such as U+00A0 and U+3000.
//
// One BOS: render with include_bos = false and encode with add_special = true, or render with
// include_bos = true and encode with add_special = false. Encode the result with parse_special so
// <start_of_turn> becomes its id; note that this also parses control-token texts typed inside
// message contents.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace dspark::tokenizer {

struct ChatMessage {
  std::string role;  // "system" (first message only), "user" or "assistant"
  std::string content;
};

// Errors (a request error, HTTP 400): no messages, no message after the system message, a role
// out of turn or unknown; they name the message index and role, e.g.
// "messages[2]: role \"user\" out of order: expected \"assistant\" (roles must alternate ...)".
// `content_spans` (optional) receives the [begin, end) byte ranges of the result that come from
// message contents (a system message's text and its "\n\n" included), in order: a server encodes
// those with parse_special = false and the rest with parse_special = true, so control-token texts
// typed by a user stay text (the split falls on special-token boundaries, so benign contents
// encode exactly as the whole string does).
Result<std::string> render_gemma3_chat(const std::vector<ChatMessage>& msgs,
                                       bool add_generation_prompt, bool include_bos,
                                       std::vector<std::pair<size_t, size_t>>* content_spans = nullptr);

// Python str.strip() on UTF-8 text (invalid bytes are kept as they are).
std::string trim_python_whitespace(const std::string& s);

}  // namespace dspark::tokenizer
