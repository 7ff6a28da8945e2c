#include "generate/generate.h"

#include <chrono>

#include "generate/stop.h"
#include "tokenizer/utf8.h"

namespace dspark::generate {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kEos: return "eos";
  }
  return "?";
}

Result<GenerateResult> generate(const model::Model& model, model::Session& session,
                                const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                const GenerateParams& params, const TextCallback& on_text) {
  if (prompt.empty()) return Status::error("the prompt is empty");
  DSPARK_RETURN_IF_ERROR(sample::validate(params.sampler));
  if (params.max_tokens < 1) return Status::error("max tokens must be >= 1");
  const int64_t n_ctx = session.kv().n_ctx();
  if ((int64_t)prompt.size() + params.max_tokens > n_ctx)
    return Status::error("prompt of " + std::to_string(prompt.size()) + " tokens + " +
                         std::to_string(params.max_tokens) + " new tokens exceeds the context size " +
                         std::to_string(n_ctx));
  session.kv().clear();
  GenerateResult res;
  res.prompt_tokens = (int64_t)prompt.size();
  sample::Sampler sampler(params.sampler, session.pool());
  tokenizer::StreamDecoder decoder(tok);
  StopMatcher stops(params.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    res.text += text;
    if (on_text) on_text(text);
  };

  const model::ForwardOptions opt{model::LogitsMode::kLast, {}, sampler.greedy() && !params.full_lm_head};
  const int64_t n_vocab = model.config().n_vocab;
  auto t0 = std::chrono::steady_clock::now();
  DSPARK_RETURN_IF_ERROR(model.forward(session, prompt, opt));
  res.prefill_ms = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (;;) {
    const int32_t id = sampler.sample(session.logits(), n_vocab);
    if (!params.ignore_eos && tok.is_stop(id)) {
      res.finish = FinishReason::kEos;
      break;
    }
    res.tokens.push_back(id);
    emit(stops.push(decoder.push(id)));
    if (stops.stopped()) {
      res.finish = FinishReason::kStop;
      break;
    }
    if ((int32_t)res.tokens.size() >= params.max_tokens) {
      res.finish = FinishReason::kLength;
      break;
    }
    DSPARK_RETURN_IF_ERROR(model.forward(session, std::span<const int32_t>(&id, 1), opt));
  }
  if (!stops.stopped()) emit(stops.push(decoder.flush()) + stops.flush());
  res.decode_ms = ms_since(t0);
  return res;
}

}  // namespace dspark::generate
