// libFuzzer target: the OpenAI request parser on arbitrary bytes, for both endpoints. It must
// never throw, crash or abort; every refusal is a 4xx with a message, and an accepted request
// satisfies the ranges parse_request promises. Accepted requests are rendered back through
// the response builders and SSE framing (which must not throw on any text either). The same bytes
// also go through speculative::parse_spec, the `dspark ab` arm / speculative-config parser: a refusal has
// a message, an accepted config is within the key table's ranges.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "serve/openai_api.h"
#include "speculative/spec_config.h"

using namespace dspark::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto c = dspark::speculative::parse_spec(std::string(body)); c) {
    DSPARK_CHECK(c->gamma >= 0 && c->gamma <= dspark::speculative::kMaxGamma);
    DSPARK_CHECK(c->threshold >= 0.0 && c->threshold <= 1.0);
    DSPARK_CHECK(c->schedule == "fixed" || c->cost_schedule());
    DSPARK_CHECK(c->quant == "auto" || c->quant == "none" || c->quant == "int8" || c->quant == "int4");
    DSPARK_CHECK(!c->kind.empty() && !c->copy.empty());
  } else {
    DSPARK_CHECK(!c.message().empty());
  }
  for (Endpoint ep : {Endpoint::kChat, Endpoint::kCompletion}) {
    auto r = parse_request(ep, body);
    if (auto* e = std::get_if<ApiError>(&r)) {
      DSPARK_CHECK(e->status >= 400 && e->status < 500);
      DSPARK_CHECK(!e->message.empty());
      DSPARK_CHECK(!error_json(*e).empty());
      continue;
    }
    const GenRequest& g = std::get<GenRequest>(r);
    DSPARK_CHECK(!g.model.empty());
    DSPARK_CHECK(g.temperature >= 0.0f && g.temperature <= 2.0f);
    DSPARK_CHECK(g.top_p > 0.0f && g.top_p <= 1.0f);
    DSPARK_CHECK(g.min_p >= 0.0f && g.min_p <= 1.0f);
    DSPARK_CHECK(g.top_k >= 0);
    DSPARK_CHECK(!g.max_tokens || *g.max_tokens >= 1);
    DSPARK_CHECK(g.stop.size() <= 4);
    for (const auto& s : g.stop) DSPARK_CHECK(!s.empty());
    DSPARK_CHECK(!g.speculative.num_draft_tokens ||
                 (*g.speculative.num_draft_tokens >= 0 && *g.speculative.num_draft_tokens <= kMaxDraftTokens));
    if (ep == Endpoint::kChat) DSPARK_CHECK(!g.messages.empty());
    else DSPARK_CHECK(!g.prompt.empty() || !g.prompt_tokens.empty());
    const std::string text = ep == Endpoint::kChat ? g.messages.back().content : g.prompt;
    const ResponseMeta m{"id", 0, g.model};
    const Usage u{.prompt_tokens = 1, .completion_tokens = 1};
    DSPARK_CHECK(!sse_event(chat_chunk(m, text, true)).empty());
    DSPARK_CHECK(!dump(completion_response(m, text, "stop", u)).empty());
  }
  return 0;
}
