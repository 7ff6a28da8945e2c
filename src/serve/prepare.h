// From a parsed request to a generation job: model name check, chat template, tokenization,
// context limits, sampler and speculation settings. Needs the tokenizer, not the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serve/openai_api.h"
#include "speculative/spec_decode.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {

// What the server serves, as requests see it.
struct ServedModel {
  std::string id;                     // the name GET /v1/models lists
  std::vector<std::string> aliases;   // other accepted names (the GGUF path, its file name)
  int64_t n_ctx = 4096;
  int64_t default_max_tokens = 512;   // when a request names no limit (capped by the context)
  bool has_drafter = false;
  int default_gamma = 5;
  int max_gamma = 16;  // what the drafter can draft: larger speculative.num_draft_tokens are clamped
  speculative::GovernorConfig governor = {};  // each generation's draft-length governor (speculative/governor.h)
  tokenizer::ChatTemplate chat;       // how /v1/chat/completions renders messages
};

struct Prepared {
  std::vector<int32_t> prompt;
  speculative::SpecParams params;
  bool use_drafter = false;
};

// The chat prompt's token ids: template text with control tokens parsed, message contents without
// (a user typing "<start_of_turn>" or "<|im_start|>" gets text, not a turn marker); BOS first when
// the vocabulary asks for it. `content_spans` as tokenizer::render_chat gives them.
std::vector<int32_t> encode_chat(const tokenizer::Tokenizer& tok, const std::string& text,
                                 const std::vector<std::pair<size_t, size_t>>& content_spans);

// Errors: unknown model (404 model_not_found), template errors (400, param "messages"), token
// ids out of range, prompt over the context (400 context_length_exceeded), speculation asked for
// without a drafter. `fallback_seed` seeds requests that give none.
ApiResult<Prepared> prepare(const GenRequest& r, const tokenizer::Tokenizer& tok, const ServedModel& m,
                            uint64_t fallback_seed);

}  // namespace dspark::serve
