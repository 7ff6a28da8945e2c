#include "serve/openai_api.h"

#include <cctype>
#include <cmath>
#include <limits>

namespace dspark::serve {

using nlohmann::json;

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& field, const char* want, const json& v) {
  return bad_request(field + ": expected " + want + ", got " + type_name(v), field, "invalid_type");
}

ApiError out_of_range(const std::string& field, const std::string& rule) {
  return bad_request(field + ": " + rule, field, "invalid_value");
}

// Each reader returns an error or nothing.
using Check = std::optional<ApiError>;

Check read_number(const json& v, const std::string& field, double lo, double hi, bool lo_open, float* out) {
  if (!v.is_number()) return wrong_type(field, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "must be in %c%g, %g], got %g", lo_open ? '(' : '[', lo, hi, x);
    return out_of_range(field, buf);
  }
  *out = (float)x;
  return std::nullopt;
}

Check read_int(const json& v, const std::string& field, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return wrong_type(field, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)std::numeric_limits<int64_t>::max())
    return out_of_range(field, "must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    return out_of_range(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                   std::to_string(x));
  *out = x;
  return std::nullopt;
}

Check read_bool(const json& v, const std::string& field, bool* out) {
  if (!v.is_boolean()) return wrong_type(field, "a boolean", v);
  *out = v.get<bool>();
  return std::nullopt;
}

// "content": a string, or an array of {"type": "text", "text": "..."} parts (joined).
Check read_content(const json& v, const std::string& field, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return wrong_type(field, "a string or an array of text parts", v);
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object()) return wrong_type(f, "an object", part);
    if (!part.contains("type") || part["type"] != "text")
      return bad_request(f + ".type: only \"text\" content parts are supported", f + ".type", "unsupported_value");
    if (!part.contains("text") || !part["text"].is_string())
      return bad_request(f + ".text: expected a string", f + ".text", "invalid_type");
    for (const auto& [k, _] : part.items())
      if (k != "type" && k != "text") return bad_request(f + "." + k + ": unknown field", f + "." + k, "unknown_field");
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

Check read_messages(const json& v, std::vector<tokenizer::ChatMessage>* out) {
  if (!v.is_array()) return wrong_type("messages", "an array", v);
  if (v.empty()) return bad_request("messages: must contain at least one message", "messages", "invalid_value");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return wrong_type(f, "an object", m);
    tokenizer::ChatMessage msg;
    if (!m.contains("role")) return bad_request(f + ".role: missing", f + ".role", "missing_field");
    if (!m["role"].is_string()) return wrong_type(f + ".role", "a string", m["role"]);
    msg.role = m["role"].get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      return bad_request(f + ".role: \"" + msg.role + "\" is not supported (system, developer, user, assistant)",
                         f + ".role", "invalid_value");
    if (!m.contains("content")) return bad_request(f + ".content: missing", f + ".content", "missing_field");
    if (Check c = read_content(m["content"], f + ".content", &msg.content)) return c;
    for (const auto& [k, _] : m.items())
      if (k != "role" && k != "content" && k != "name")
        return bad_request(f + "." + k + ": not supported", f + "." + k, "unknown_field");
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

Check read_prompt(const json& v, GenRequest* r) {
  if (v.is_string()) {
    r->prompt = v.get<std::string>();
  } else if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    r->prompt = v[0].get<std::string>();
  } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t id = 0;
      if (Check c = read_int(v[i], "prompt[" + std::to_string(i) + "]", 0, std::numeric_limits<int32_t>::max(), &id))
        return c;
      r->prompt_tokens.push_back((int32_t)id);
    }
  } else if (v.is_array() && v.size() > 1 && v[0].is_string()) {
    return bad_request("prompt: only one prompt per request is supported", "prompt", "unsupported_value");
  } else {
    return wrong_type("prompt", "a string, [string] or an array of token ids", v);
  }
  if (r->prompt.empty() && r->prompt_tokens.empty())
    return bad_request("prompt: must not be empty", "prompt", "invalid_value");
  return std::nullopt;
}

Check read_stop(const json& v, std::vector<std::string>* out) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > 4) return out_of_range("stop", "at most 4 stop sequences");
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return wrong_type("stop[" + std::to_string(i) + "]", "a string", v[i]);
      out->push_back(v[i].get<std::string>());
    }
  } else {
    return wrong_type("stop", "a string or an array of strings", v);
  }
  for (const std::string& s : *out)
    if (s.empty()) return out_of_range("stop", "stop sequences must not be empty");
  return std::nullopt;
}

Check read_speculative(const json& v, SpecOverride* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return wrong_type("speculative", "an object", v);
  for (const auto& [k, val] : v.items()) {
    if (k == "enabled") {
      bool b = false;
      if (Check c = read_bool(val, "speculative.enabled", &b)) return c;
      out->enabled = b;
    } else if (k == "num_draft_tokens") {
      int64_t n = 0;
      if (Check c = read_int(val, "speculative.num_draft_tokens", 0, kMaxDraftTokens, &n)) return c;
      out->num_draft_tokens = (int)n;
    } else {
      return bad_request("speculative." + k + ": unknown field (enabled, num_draft_tokens)", "speculative." + k,
                         "unknown_field");
    }
  }
  return std::nullopt;
}

// OpenAI fields we do not implement: accepted only at their neutral value.
Check read_neutral(const std::string& k, const json& v) {
  auto unsupported = [&](const std::string& what) {
    return bad_request(k + ": " + what + " is not supported by this server", k, "unsupported_value");
  };
  if (k == "n" || k == "best_of") {
    if (!v.is_null() && !(v.is_number_integer() && v.get<int64_t>() == 1)) return unsupported("a value other than 1");
  } else if (k == "frequency_penalty" || k == "presence_penalty") {
    if (!v.is_null() && !(v.is_number() && v.get<double>() == 0.0)) return unsupported("a non-zero penalty");
  } else if (k == "logprobs" || k == "echo") {
    if (!v.is_null() && !(v.is_boolean() && !v.get<bool>())) return unsupported(k == "echo" ? "echo" : "logprobs");
  } else if (k == "top_logprobs") {
    if (!v.is_null()) return unsupported("top_logprobs");
  } else if (k == "logit_bias") {
    if (!v.is_null() && !(v.is_object() && v.empty())) return unsupported("logit_bias");
  } else if (k == "suffix") {
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty())) return unsupported("suffix");
  } else if (k == "tools" || k == "functions") {
    if (!v.is_null() && !(v.is_array() && v.empty())) return unsupported("tool calling");
  } else if (k == "tool_choice" || k == "function_call") {
    if (!v.is_null() && !(v.is_string() && (v == "none" || v == "auto"))) return unsupported("tool calling");
  } else if (k == "response_format") {
    if (!v.is_null() && !(v.is_object() && v.contains("type") && v["type"] == "text")) return unsupported("a non-text response_format");
  } else if (k == "user" || k == "metadata" || k == "store" || k == "service_tier" || k == "parallel_tool_calls") {
    // Accepted and ignored: they change no output.
  } else {
    return bad_request("Unrecognized request argument supplied: " + k, k, "unknown_field");
  }
  return std::nullopt;
}

Check read_field(Endpoint ep, const std::string& k, const json& v, GenRequest* r) {
  const bool chat = ep == Endpoint::kChat;
  if (k == "model") {
    if (!v.is_string()) return wrong_type(k, "a string", v);
    r->model = v.get<std::string>();
  } else if (chat && k == "messages") {
    return read_messages(v, &r->messages);
  } else if (!chat && k == "prompt") {
    return read_prompt(v, r);
  } else if (k == "stream") {
    if (!v.is_null()) return read_bool(v, k, &r->stream);
  } else if (k == "stream_options") {
    if (v.is_null()) return std::nullopt;
    if (!v.is_object()) return wrong_type(k, "an object", v);
    for (const auto& [sk, sv] : v.items()) {
      if (sk != "include_usage")
        return bad_request("stream_options." + sk + ": unknown field (include_usage)", "stream_options." + sk,
                           "unknown_field");
      if (!sv.is_null())
        if (Check c = read_bool(sv, "stream_options.include_usage", &r->include_usage)) return c;
    }
  } else if (k == "max_tokens" || (chat && k == "max_completion_tokens")) {
    if (v.is_null()) return std::nullopt;
    int64_t n = 0;
    if (Check c = read_int(v, k, 1, std::numeric_limits<int32_t>::max(), &n)) return c;
    if (r->max_tokens && *r->max_tokens != n)
      return bad_request(k + ": max_tokens and max_completion_tokens disagree", k, "invalid_value");
    r->max_tokens = n;
  } else if (k == "temperature") {
    if (!v.is_null()) return read_number(v, k, 0.0, 2.0, false, &r->temperature);
  } else if (k == "top_p") {
    if (!v.is_null()) return read_number(v, k, 0.0, 1.0, true, &r->top_p);
  } else if (k == "min_p") {
    if (!v.is_null()) return read_number(v, k, 0.0, 1.0, false, &r->min_p);
  } else if (k == "top_k") {
    if (v.is_null()) return std::nullopt;
    int64_t n = 0;
    if (Check c = read_int(v, k, 0, std::numeric_limits<int32_t>::max(), &n)) return c;
    r->top_k = (int32_t)n;
  } else if (k == "seed") {
    if (v.is_null()) return std::nullopt;
    int64_t s = 0;
    if (Check c = read_int(v, k, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &s))
      return c;
    r->seed = (uint64_t)s;
  } else if (k == "stop") {
    return read_stop(v, &r->stop);
  } else if (k == "speculative") {
    return read_speculative(v, &r->speculative);
  } else {
    return read_neutral(k, v);
  }
  return std::nullopt;
}

std::string strip_json_exception_prefix(std::string msg) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "parse error at ..."
  if (!msg.empty() && msg[0] == '[') {
    const size_t e = msg.find("] ");
    if (e != std::string::npos) msg = msg.substr(e + 2);
  }
  return msg;
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string error_json(const ApiError& e) { return dump(error_body(e)); }

ApiError bad_request(std::string message, std::string param, std::string code) {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}
ApiError not_found(std::string message, std::string code) {
  return {404, std::move(message), "invalid_request_error", "", std::move(code)};
}
ApiError server_error(std::string message) { return {500, std::move(message), "server_error", "", ""}; }

ApiResult<GenRequest> parse_request(Endpoint ep, std::string_view body) {
  try {
    json j;
    try {
      j = json::parse(body.begin(), body.end());
    } catch (const json::exception& e) {  // syntax errors, and numbers too large for a double (out_of_range)
      return bad_request("invalid JSON body: " + strip_json_exception_prefix(e.what()), "", "invalid_json");
    }
    if (!j.is_object())
      return bad_request(std::string("the body must be a JSON object, got ") + type_name(j), "", "invalid_type");
    GenRequest r;
    r.endpoint = ep;
    for (const auto& [k, v] : j.items())
      if (Check c = read_field(ep, k, v, &r)) return *c;
    if (!j.contains("model") || r.model.empty())
      return bad_request("model: missing (name the model, see GET /v1/models)", "model", "missing_field");
    if (ep == Endpoint::kChat && r.messages.empty())
      return bad_request("messages: missing", "messages", "missing_field");
    if (ep == Endpoint::kCompletion && r.prompt.empty() && r.prompt_tokens.empty())
      return bad_request("prompt: missing", "prompt", "missing_field");
    if (!r.stream && j.contains("stream_options") && !j["stream_options"].is_null())
      return bad_request("stream_options: only allowed when stream is true", "stream_options", "invalid_value");
    return r;
  } catch (const std::exception& e) {  // a JSON access we did not guard: still the request's fault
    return bad_request(std::string("invalid request: ") + strip_json_exception_prefix(e.what()), "", "invalid_value");
  }
}

json usage_json(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (u.spec) {
    const speculative::SpecStats& s = *u.spec;
    j["speculation"] = {{"drafted", s.drafted},
                        {"accepted", s.accepted},
                        {"rounds", s.rounds},
                        {"target_calls", s.target_calls},
                        {"tau", s.tau()},
                        {"acceptance_rate", s.acceptance_rate()},
                        {"accepted_by_pos", s.accepted_by_pos},
                        {"drafted_by_pos", s.drafted_by_pos}};
  }
  return j;
}

json timings_json(const Usage& u) {
  const double tok_s = u.decode_ms > 0 ? (double)u.completion_tokens * 1e3 / u.decode_ms : 0.0;
  return {{"prompt_ms", u.prefill_ms},
          {"predicted_ms", u.decode_ms},
          {"predicted_per_second", tok_s},
          {"queue_ms", u.queue_ms}};
}

namespace {
json base(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model},
          {"system_fingerprint", "dspark"}};
}
}  // namespace

json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason, const Usage& u) {
  json j = base(m, "chat.completion");
  j["choices"] = json::array({{{"index", 0},
                               {"message", {{"role", "assistant"}, {"content", text}}},
                               {"logprobs", nullptr},
                               {"finish_reason", finish_reason}}});
  j["usage"] = usage_json(u);
  j["timings"] = timings_json(u);
  return j;
}

json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                         const Usage& u) {
  json j = base(m, "text_completion");
  j["choices"] = json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}});
  j["usage"] = usage_json(u);
  j["timings"] = timings_json(u);
  return j;
}

json chat_chunk(const ResponseMeta& m, const std::string& delta, bool first) {
  json j = base(m, "chat.completion.chunk");
  json d = {{"content", delta}};
  if (first) d["role"] = "assistant";
  j["choices"] = json::array({{{"index", 0}, {"delta", d}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return j;
}

json chat_final_chunk(const ResponseMeta& m, const std::string& finish_reason, const Usage& u) {
  json j = base(m, "chat.completion.chunk");
  j["choices"] = json::array(
      {{{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}});
  j["timings"] = timings_json(u);
  return j;
}

json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u) {
  json j = base(m, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return j;
}

json completion_chunk(const ResponseMeta& m, const std::string& text) {
  json j = base(m, "text_completion");
  j["choices"] = json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return j;
}

json completion_final_chunk(const ResponseMeta& m, const std::string& finish_reason, const Usage& u) {
  json j = base(m, "text_completion");
  j["choices"] = json::array({{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}});
  j["timings"] = timings_json(u);
  return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

bool authorized(std::string_view header, std::string_view api_key) {
  if (api_key.empty()) return true;
  constexpr std::string_view kBearer = "bearer ";  // the scheme is case-insensitive (RFC 7235)
  if (header.size() != kBearer.size() + api_key.size()) return false;
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower((unsigned char)header[i]) != kBearer[i]) return false;
  // Constant-time comparison of the key part.
  unsigned char diff = 0;
  for (size_t i = 0; i < api_key.size(); ++i) diff |= (unsigned char)(header[kBearer.size() + i] ^ api_key[i]);
  return diff == 0;
}

}  // namespace dspark::serve
