// OpenAI-compatible request parsing and response building for `dspark serve`: JSON in, plain
// structs out (and back), SSE framing. No model, no sockets: every function here is pure, so the
// unit tests and the libFuzzer target (tests/fuzz/fuzz_openai_api.cpp) drive it directly.
//
// Validation is strict at the boundary: malformed JSON, wrong types, out-of-range values,
// unknown fields and OpenAI features we do not implement (n > 1, logprobs, tools, penalties ...)
// are refused with an OpenAI-style error that names the field (`param`), never ignored silently.
// Fields that change nothing here (user, metadata, store, stream_options) are accepted.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "speculative/telemetry.h"
#include "tokenizer/chat_template.h"

namespace dspark::serve {

// An error answer: HTTP status + the OpenAI body {"error": {message, type, param, code}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
nlohmann::json error_body(const ApiError& e);
std::string error_json(const ApiError& e);

// Common error shapes.
ApiError bad_request(std::string message, std::string param = "", std::string code = "");
ApiError not_found(std::string message, std::string code = "");
ApiError server_error(std::string message);

template <class T>
using ApiResult = std::variant<T, ApiError>;

enum class Endpoint { kChat, kCompletion };

// Per-request speculation override: {"enabled": bool, "num_draft_tokens": n}.
struct SpecOverride {
  std::optional<bool> enabled;
  std::optional<int> num_draft_tokens;  // 0..kMaxDraftTokens
};
inline constexpr int kMaxDraftTokens = 64;

struct GenRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<tokenizer::ChatMessage> messages;  // chat
  std::string prompt;                            // completions: text prompt
  std::vector<int32_t> prompt_tokens;            // completions: a token-id prompt (then prompt is "")
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a usage chunk (choices: []) before [DONE]
  std::optional<int64_t> max_tokens;             // max_tokens / max_completion_tokens, >= 1
  float temperature = 1.0f;                      // OpenAI default; [0, 2]
  float top_p = 1.0f;                            // (0, 1]
  int32_t top_k = 0;                             // extension; 0 = off
  float min_p = 0.0f;                            // extension; [0, 1]
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;                 // up to 4 non-empty strings
  SpecOverride speculative;
};

// Parses a request body for `ep`. Errors are 400s naming the field.
ApiResult<GenRequest> parse_request(Endpoint ep, std::string_view body);

// Usage of one finished request.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;              // prompt tokens whose KV came from the prompt cache
  const speculative::SpecStats* spec = nullptr;  // set when a drafter ran
  double prefill_ms = 0, decode_ms = 0, queue_ms = 0;
};
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"},
//  "speculation": {"drafted", "accepted", "rounds", "target_calls", "tau", "accepted_by_pos", ...}}
nlohmann::json usage_json(const Usage& u);
// {"prompt_ms", "predicted_ms", "predicted_per_second", "queue_ms"} (llama.cpp's "timings" shape).
nlohmann::json timings_json(const Usage& u);

// Identity of one response: id ("chatcmpl-..." / "cmpl-..."), creation time, model id.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// Non-streamed bodies. finish_reason is "stop" or "length".
nlohmann::json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                             const Usage& u);
nlohmann::json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                                   const Usage& u);
// Stream chunks: a text delta (finish_reason null), the first chat chunk carries the role; the
// final chunk has an empty delta, the finish reason and our timings. As OpenAI does, usage comes
// only when the request asks (stream_options.include_usage), in a separate last chunk with
// `choices: []` (usage_chunk).
nlohmann::json chat_chunk(const ResponseMeta& m, const std::string& delta, bool first);
nlohmann::json chat_final_chunk(const ResponseMeta& m, const std::string& finish_reason, const Usage& u);
nlohmann::json completion_chunk(const ResponseMeta& m, const std::string& text);
nlohmann::json completion_final_chunk(const ResponseMeta& m, const std::string& finish_reason, const Usage& u);
nlohmann::json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u);

// "data: <json>\n\n" and "data: [DONE]\n\n". Invalid UTF-8 is replaced, never thrown.
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// JSON text of a body (invalid UTF-8 replaced).
std::string dump(const nlohmann::json& j);

// "Bearer KEY" check; empty `api_key` accepts everything.
bool authorized(std::string_view authorization_header, std::string_view api_key);

}  // namespace dspark::serve
