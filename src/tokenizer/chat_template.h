// Chat templates, re-implemented without a Jinja engine. A GGUF's tokenizer.chat_template is
// matched to a family (detect_chat_template); each family renders like its reference template:
//
// Gemma (the HF chat_template of every Gemma 3 -it model):
//   [<bos>] per turn: <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
//   [<start_of_turn>model\n] with add_generation_prompt
//
// A leading "system" message gets no turn: its content (untrimmed) + "\n\n" prefixes the content of
// the first user turn. The rest must alternate user, assistant, user, ... starting with user;
// "assistant" is rendered as "model". Trimming strips what Python's str.strip() strips (Jinja's
// `trim` filter): ASCII whitespace, 0x1C..0x1F and Unicode White_Space such as U+00A0 and U+3000.
//
// ChatML (SmolLM2, Qwen 2, ...): per message <|im_start|>{role}\n{content}<|im_end|>\n, contents
// untrimmed, roles system / user / assistant in any order; [<|im_start|>assistant\n] with
// add_generation_prompt. A template that inserts a default system turn when the first message is
// not "system" (SmolLM2's does) gets it: ChatTemplate::default_system holds its text.
//
// Llama 3: <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|> per message,
// [<|start_header_id|>assistant<|end_header_id|>\n\n]; the BOS <|begin_of_text|> comes from the
// tokenizer (add_special).
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

namespace dspark::formats {
class GgufFile;
}

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

enum class ChatFamily { kGemma, kChatML, kLlama3 };

struct ChatTemplate {
  ChatFamily family = ChatFamily::kGemma;
  std::string default_system;  // ChatML: system text inserted when messages[0] is not "system"
};

// The names --chat-template accepts: "gemma", "chatml", "llama3".
const char* chat_family_name(ChatFamily f);
Result<ChatTemplate> chat_template_by_name(const std::string& name);
// Matches a Jinja chat template to a family by its marker tokens (<start_of_turn>, <|im_start|>,
// <|start_header_id|>); an unrecognised template is an error that says to pass --chat-template.
Result<ChatTemplate> detect_chat_template(const std::string& jinja);
// The template a model uses: `override_name` when given; else the GGUF's tokenizer.chat_template
// (detected); else the architecture's own (gemma3 -> Gemma); else an error naming the key.
Result<ChatTemplate> resolve_chat_template(const formats::GgufFile& file, const std::string& override_name);

// Renders with the family's rules (see above); errors and content_spans as render_gemma3_chat.
// include_bos: Gemma only ("<bos>" text); the other families take BOS from the tokenizer.
Result<std::string> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, bool include_bos,
                                std::vector<std::pair<size_t, size_t>>* content_spans = nullptr);

// Python str.strip() on UTF-8 text (invalid bytes are kept as they are).
std::string trim_python_whitespace(const std::string& s);

}  // namespace dspark::tokenizer
