// Request parsing and response shapes of the OpenAI API layer: valid bodies, every kind of bad
// input (each an error naming its field, never an exception), SSE framing, usage, API key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/openai_api.h"

namespace dspark::serve {
namespace {

using nlohmann::json;

GenRequest ok_chat(const std::string& body) {
  auto r = parse_request(Endpoint::kChat, body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->message;
  return std::get_if<GenRequest>(&r) ? std::get<GenRequest>(r) : GenRequest{};
}

ApiError bad(Endpoint ep, const std::string& body) {
  auto r = parse_request(ep, body);
  if (std::get_if<GenRequest>(&r)) {
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(OpenAiApi, ParsesAChatRequest) {
  const GenRequest r = ok_chat(R"({"model": "m", "messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": "hello", "name": "bot"},
      {"role": "user", "content": "again"}],
    "stream": true, "temperature": 0, "top_p": 0.5, "max_completion_tokens": 7, "seed": -3,
    "stop": ["\n\n", "END"], "speculative": {"enabled": false, "num_draft_tokens": 3},
    "user": "u1", "n": 1, "presence_penalty": 0, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "hi there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(*r.seed, (uint64_t)(int64_t)-3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.speculative.enabled, false);
  EXPECT_EQ(r.speculative.num_draft_tokens, 3);
}

TEST(OpenAiApi, Defaults) {
  const GenRequest r = ok_chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.temperature, 1.0f);
  EXPECT_EQ(r.top_p, 1.0f);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_FALSE(r.seed);
  EXPECT_FALSE(r.speculative.enabled);
  EXPECT_TRUE(r.stop.empty());
  const GenRequest n = ok_chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "max_tokens": null, "temperature": null, "stop": null, "seed": null})");
  EXPECT_FALSE(n.max_tokens);
  EXPECT_EQ(n.temperature, 1.0f);
}

TEST(OpenAiApi, CompletionPrompts) {
  auto one = parse_request(Endpoint::kCompletion, R"({"model": "m", "prompt": "abc", "stop": "x"})");
  ASSERT_TRUE(std::get_if<GenRequest>(&one));
  EXPECT_EQ(std::get<GenRequest>(one).prompt, "abc");
  EXPECT_EQ(std::get<GenRequest>(one).stop, std::vector<std::string>{"x"});
  auto arr = parse_request(Endpoint::kCompletion, R"({"model": "m", "prompt": ["abc"]})");
  EXPECT_EQ(std::get<GenRequest>(arr).prompt, "abc");
  auto ids = parse_request(Endpoint::kCompletion, R"({"model": "m", "prompt": [2, 5, 9]})");
  EXPECT_EQ(std::get<GenRequest>(ids).prompt_tokens, (std::vector<int32_t>{2, 5, 9}));
}

struct BadCase {
  Endpoint ep;
  std::string body;
  std::string param;  // expected param ("" = null)
};

TEST(OpenAiApi, RefusesBadInputNamingTheField) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  const std::vector<BadCase> cases = {
      {Endpoint::kChat, "", ""},
      {Endpoint::kChat, "{", ""},
      {Endpoint::kChat, "[1, 2]", ""},
      {Endpoint::kChat, "null", ""},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}]})", "model"},
      {Endpoint::kChat, R"({"model": 3, )" + msgs.substr(0) + "}", "model"},
      {Endpoint::kChat, R"({"model": "m"})", "messages"},
      {Endpoint::kChat, R"({"model": "m", "messages": []})", "messages"},
      {Endpoint::kChat, R"({"model": "m", "messages": "hi"})", "messages"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type"},
      {Endpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": -1, )" + msgs + "}", "max_tokens"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": 0, )" + msgs + "}", "max_tokens"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": 2.5, )" + msgs + "}", "max_tokens"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": "10", )" + msgs + "}", "max_tokens"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": 99999999999999999999, )" + msgs + "}", "max_tokens"},
      {Endpoint::kChat, R"({"model": "m", "max_tokens": 5, "max_completion_tokens": 6, )" + msgs + "}",
       "max_tokens"},  // keys are visited in sorted order: the second one names the clash
      {Endpoint::kChat, R"({"model": "m", "temperature": -0.1, )" + msgs + "}", "temperature"},
      {Endpoint::kChat, R"({"model": "m", "temperature": 2.5, )" + msgs + "}", "temperature"},
      {Endpoint::kChat, R"({"model": "m", "temperature": "hot", )" + msgs + "}", "temperature"},
      {Endpoint::kChat, R"({"model": "m", "top_p": 0, )" + msgs + "}", "top_p"},
      {Endpoint::kChat, R"({"model": "m", "top_p": 1.01, )" + msgs + "}", "top_p"},
      {Endpoint::kChat, R"({"model": "m", "top_k": -1, )" + msgs + "}", "top_k"},
      {Endpoint::kChat, R"({"model": "m", "stream": "yes", )" + msgs + "}", "stream"},
      {Endpoint::kChat, R"({"model": "m", "seed": 1.5, )" + msgs + "}", "seed"},
      {Endpoint::kChat, R"({"model": "m", "stop": 3, )" + msgs + "}", "stop"},
      {Endpoint::kChat, R"({"model": "m", "stop": [""], )" + msgs + "}", "stop"},
      {Endpoint::kChat, R"({"model": "m", "stop": ["a","b","c","d","e"], )" + msgs + "}", "stop"},
      {Endpoint::kChat, R"({"model": "m", "stop": ["a", 1], )" + msgs + "}", "stop[1]"},
      {Endpoint::kChat, R"({"model": "m", "n": 2, )" + msgs + "}", "n"},
      {Endpoint::kChat, R"({"model": "m", "logprobs": true, )" + msgs + "}", "logprobs"},
      {Endpoint::kChat, R"({"model": "m", "frequency_penalty": 0.5, )" + msgs + "}", "frequency_penalty"},
      {Endpoint::kChat, R"({"model": "m", "tools": [{"type": "function"}], )" + msgs + "}", "tools"},
      {Endpoint::kChat, R"({"model": "m", "bogus": 1, )" + msgs + "}", "bogus"},
      {Endpoint::kChat, R"({"model": "m", "prompt": "x", )" + msgs + "}", "prompt"},
      {Endpoint::kChat, R"({"model": "m", "speculative": true, )" + msgs + "}", "speculative"},
      {Endpoint::kChat, R"({"model": "m", "speculative": {"enabled": 1}, )" + msgs + "}", "speculative.enabled"},
      {Endpoint::kChat, R"({"model": "m", "speculative": {"num_draft_tokens": -1}, )" + msgs + "}",
       "speculative.num_draft_tokens"},
      {Endpoint::kChat, R"({"model": "m", "speculative": {"num_draft_tokens": 65}, )" + msgs + "}",
       "speculative.num_draft_tokens"},
      {Endpoint::kChat, R"({"model": "m", "speculative": {"gamma": 3}, )" + msgs + "}", "speculative.gamma"},
      {Endpoint::kCompletion, R"({"model": "m"})", "prompt"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": ""})", "prompt"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": [1, -2]})", "prompt[1]"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": {"a": 1}})", "prompt"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": "x", "messages": []})", "messages"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of"},
      {Endpoint::kCompletion, R"({"model": "m", "prompt": "x", "max_completion_tokens": 3})", "max_completion_tokens"},
  };
  for (const BadCase& c : cases) {
    const ApiError e = bad(c.ep, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
    EXPECT_EQ(e.type, "invalid_request_error");
  }
}

TEST(OpenAiApi, InvalidUtf8IsAJsonError) {
  const std::string body = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"\xC3\x28\"}]}";
  const ApiError e = bad(Endpoint::kChat, body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos) << e.message;
}

TEST(OpenAiApi, DeepNestingAndNulBytesDoNotCrash) {
  std::string deep(100000, '[');
  EXPECT_EQ(bad(Endpoint::kChat, deep).status, 400);
  std::string deep_obj = R"({"model": "m", "metadata": )" + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_EQ(bad(Endpoint::kChat, deep_obj).param, "messages");
  EXPECT_EQ(bad(Endpoint::kChat, std::string("{\"model\"\0:1}", 12)).status, 400);
}

TEST(OpenAiApi, ErrorBodyShape) {
  const json j = error_body(bad_request("max_tokens: bad", "max_tokens", "invalid_value"));
  EXPECT_EQ(j["error"]["message"], "max_tokens: bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  const json n = error_body(server_error("boom"));
  EXPECT_TRUE(n["error"]["param"].is_null());
  EXPECT_TRUE(n["error"]["code"].is_null());
  EXPECT_EQ(n["error"]["type"], "server_error");
}

TEST(OpenAiApi, UsageCarriesSpeculationOnlyWhenADrafterRan) {
  speculative::SpecStats st;
  st.resize(3);
  st.add_round(3, 2);
  st.add_round(3, 0);
  st.target_calls = 3;
  st.generated = 4;
  Usage u{.prompt_tokens = 10, .completion_tokens = 4, .cached_tokens = 6};
  json j = usage_json(u);
  EXPECT_EQ(j["total_tokens"], 14);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 6);
  EXPECT_FALSE(j.contains("speculation"));
  u.spec = &st;
  j = usage_json(u);
  EXPECT_EQ(j["speculation"]["drafted"], 6);
  EXPECT_EQ(j["speculation"]["accepted"], 2);
  EXPECT_EQ(j["speculation"]["rounds"], 2);
  EXPECT_EQ(j["speculation"]["target_calls"], 3);
  EXPECT_DOUBLE_EQ(j["speculation"]["tau"].get<double>(), 2.0);
  EXPECT_EQ(j["speculation"]["accepted_by_pos"], json({1, 1, 0}));
}

TEST(OpenAiApi, ResponsesAndSse) {
  const ResponseMeta m{"chatcmpl-1", 123, "gemma"};
  const Usage u{.prompt_tokens = 2, .completion_tokens = 1};
  const json r = chat_response(m, "hi", "stop", u);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["completion_tokens"], 1);
  const json c = chat_chunk(m, "h", true);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(chat_chunk(m, "h", false)["choices"][0]["delta"].contains("role"));
  const json f = chat_final_chunk(m, "length", u);
  EXPECT_EQ(f["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(f.contains("usage"));  // OpenAI: usage only in its own chunk, only when asked
  const json uc = usage_chunk(m, true, u);
  EXPECT_EQ(uc["object"], "chat.completion.chunk");
  EXPECT_TRUE(uc["choices"].is_array() && uc["choices"].empty());
  EXPECT_EQ(uc["usage"]["completion_tokens"], 1);
  EXPECT_EQ(usage_chunk(m, false, u)["object"], "text_completion");
  EXPECT_EQ(completion_response(m, "x", "stop", u)["choices"][0]["text"], "x");
  EXPECT_EQ(completion_chunk(m, "y")["object"], "text_completion");
  const std::string ev = sse_event({{"a", "\xFF"}});
  EXPECT_EQ(ev.rfind("data: {", 0), 0u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  EXPECT_EQ(ev.find('\n'), ev.size() - 2);  // one line: no raw newline inside the JSON
  EXPECT_NE(ev.find("\xEF\xBF\xBD"), std::string::npos);  // invalid UTF-8 replaced by U+FFFD, not thrown
}

TEST(OpenAiApi, ApiKey) {
  EXPECT_TRUE(authorized("", ""));
  EXPECT_TRUE(authorized("anything", ""));
  EXPECT_TRUE(authorized("Bearer sk-1", "sk-1"));
  EXPECT_FALSE(authorized("Bearer sk-2", "sk-1"));
  EXPECT_FALSE(authorized("sk-1", "sk-1"));
  EXPECT_FALSE(authorized("", "sk-1"));
  EXPECT_FALSE(authorized("Bearer sk-11", "sk-1"));
  EXPECT_TRUE(authorized("bearer sk-1", "sk-1"));  // the scheme is case-insensitive, the key is not
  EXPECT_TRUE(authorized("BEARER sk-1", "sk-1"));
  EXPECT_FALSE(authorized("Bearer SK-1", "sk-1"));
  EXPECT_FALSE(authorized("Basic  sk-1", "sk-1"));
}

TEST(OpenAiApi, StreamOptions) {
  auto parse = [](const std::string& body) { return parse_request(Endpoint::kChat, body); };
  const std::string msgs = R"("model": "m", "messages": [{"role": "user", "content": "x"}])";
  auto a = parse("{" + msgs + R"(, "stream": true})");
  ASSERT_TRUE(std::holds_alternative<GenRequest>(a));
  EXPECT_FALSE(std::get<GenRequest>(a).include_usage);
  auto b = parse("{" + msgs + R"(, "stream": true, "stream_options": {"include_usage": false}})");
  ASSERT_TRUE(std::holds_alternative<GenRequest>(b));
  EXPECT_FALSE(std::get<GenRequest>(b).include_usage);
  // Without stream: true the options mean nothing, and OpenAI refuses them.
  for (const char* stream : {"", R"(, "stream": false)"}) {
    auto e = parse("{" + msgs + stream + R"(, "stream_options": {"include_usage": true}})");
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << stream;
    EXPECT_EQ(std::get<ApiError>(e).status, 400);
    EXPECT_EQ(std::get<ApiError>(e).param, "stream_options");
  }
  auto n = parse("{" + msgs + R"(, "stream_options": null})");
  EXPECT_TRUE(std::holds_alternative<GenRequest>(n));
  auto c = parse("{" + msgs + R"(, "stream_options": {"include_usage": 1}})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(c));
  EXPECT_NE(std::get<ApiError>(c).param.find("include_usage"), std::string::npos);
  auto d = parse("{" + msgs + R"(, "stream_options": {"bogus": true}})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(d));
  EXPECT_EQ(std::get<ApiError>(d).param, "stream_options.bogus");
}

TEST(OpenAiApi, NumberOverflowAndNonObjectBodiesHaveCodes) {
  // A number too large for a double is a JSON error (nlohmann throws out_of_range, not parse_error).
  ApiError e = bad(Endpoint::kCompletion, R"({"model": "m", "prompt": "a", "max_tokens": 1e999999})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  for (const char* body : {"[]", "1", "\"x\"", "null"}) {
    e = bad(Endpoint::kChat, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.code, "invalid_type") << body;
  }
}

}  // namespace
}  // namespace dspark::serve
