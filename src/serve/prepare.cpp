#include "serve/prepare.h"

#include <algorithm>

#include "tokenizer/chat_template.h"

namespace dspark::serve {

std::vector<int32_t> encode_chat(const tokenizer::Tokenizer& tok, const std::string& text,
                                 const std::vector<std::pair<size_t, size_t>>& content_spans) {
  std::vector<int32_t> ids;
  if (tok.add_bos()) ids.push_back(tok.bos());
  auto add = [&](size_t begin, size_t end, bool parse_special) {
    if (end <= begin) return;
    const auto part = tok.encode(std::string_view(text).substr(begin, end - begin), /*add_special=*/false, parse_special);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  size_t at = 0;
  for (const auto& [begin, end] : content_spans) {
    add(at, begin, /*parse_special=*/true);   // template text: <start_of_turn>user\n, <|im_start|>user\n ...
    add(begin, end, /*parse_special=*/false);  // what the client wrote
    at = end;
  }
  add(at, text.size(), true);
  return ids;
}

ApiResult<Prepared> prepare(const GenRequest& r, const tokenizer::Tokenizer& tok, const ServedModel& m,
                            uint64_t fallback_seed) {
  if (r.model != m.id && std::find(m.aliases.begin(), m.aliases.end(), r.model) == m.aliases.end())
    return ApiError{404, "The model '" + r.model + "' does not exist (this server serves '" + m.id + "')",
                    "invalid_request_error", "model", "model_not_found"};
  Prepared p;
  if (r.endpoint == Endpoint::kChat) {
    std::vector<std::pair<size_t, size_t>> spans;
    auto text = tokenizer::render_chat(m.chat, r.messages, /*add_generation_prompt=*/true, /*include_bos=*/false,
                                       &spans);
    if (!text) return bad_request(text.message(), "messages", "invalid_value");
    p.prompt = encode_chat(tok, *text, spans);
  } else if (!r.prompt_tokens.empty()) {
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i)
      if (r.prompt_tokens[i] >= tok.n_vocab())
        return bad_request("prompt[" + std::to_string(i) + "]: token id " + std::to_string(r.prompt_tokens[i]) +
                               " is outside the vocabulary of " + std::to_string(tok.n_vocab()),
                           "prompt", "invalid_value");
    p.prompt = r.prompt_tokens;
  } else {
    p.prompt = tok.encode(r.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  const int64_t n_prompt = (int64_t)p.prompt.size();
  if (n_prompt == 0) return bad_request("the prompt is empty after tokenization", "prompt", "invalid_value");
  if (n_prompt >= m.n_ctx)
    return bad_request("This model's maximum context length is " + std::to_string(m.n_ctx) +
                           " tokens, but the prompt has " + std::to_string(n_prompt) + " tokens",
                       r.endpoint == Endpoint::kChat ? "messages" : "prompt", "context_length_exceeded");
  const int64_t room = m.n_ctx - n_prompt;
  int64_t max_tokens = std::min(m.default_max_tokens, room);
  if (r.max_tokens) {
    if (*r.max_tokens > room)
      return bad_request("This model's maximum context length is " + std::to_string(m.n_ctx) + " tokens; the prompt has " +
                             std::to_string(n_prompt) + " tokens and max_tokens asks for " +
                             std::to_string(*r.max_tokens) + " more (at most " + std::to_string(room) + ")",
                         "max_tokens", "context_length_exceeded");
    max_tokens = *r.max_tokens;
  }
  p.params.gen.max_tokens = (int32_t)max_tokens;
  p.params.gen.stop = r.stop;
  p.params.gen.sampler = {.temperature = r.temperature, .top_k = r.top_k, .top_p = r.top_p, .min_p = r.min_p,
                          .seed = r.seed ? *r.seed : fallback_seed};

  const bool want_spec = r.speculative.enabled.value_or(m.has_drafter);
  if (want_spec && !m.has_drafter)
    return bad_request("speculative.enabled: this server runs without a drafter (started with --no-spec)",
                       "speculative.enabled", "unsupported_value");
  p.params.gamma = std::min(r.speculative.num_draft_tokens.value_or(m.default_gamma), m.max_gamma);
  if (r.speculative.num_draft_tokens) p.params.sure_gamma = p.params.gamma;  // no round drafts more than asked
  p.params.governor = m.governor;
  p.use_drafter = want_spec && p.params.gamma > 0;
  if (!p.use_drafter) p.params.gamma = 0;
  return p;
}

}  // namespace dspark::serve
