// Serial (non-speculative) generation: prefill, then one token per forward, with sampling,
// stop tokens, stop strings and a token limit. Text is streamed through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace dspark::generate {

struct GenerateParams {
  int32_t max_tokens = 128;
  std::vector<std::string> stop;     // stop strings (not included in the output)
  bool ignore_eos = false;           // benchmarks: keep going past EOS / <end_of_turn>
  sample::SamplerConfig sampler;
  // Every logit computed even at temperature 0, instead of the model's exact greedy head
  // (model/argmax_head.h): the same tokens, for measuring what that head saves.
  bool full_lm_head = false;
};

enum class FinishReason { kLength, kStop, kEos };
const char* finish_reason_name(FinishReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;       // generated ids (stop tokens excluded)
  std::string text;
  FinishReason finish = FinishReason::kLength;
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;
  double decode_ms = 0;              // from the first sampled token to the end
  double prefill_tok_s() const { return prefill_ms > 0 ? prompt_tokens * 1e3 / prefill_ms : 0; }
  double decode_tok_s() const {
    return decode_ms > 0 && tokens.size() > 1 ? (double)(tokens.size() - 1) * 1e3 / decode_ms : 0;
  }
};

using TextCallback = std::function<void(std::string_view)>;

// Clears the session, then generates. Errors: empty prompt, prompt + max_tokens over n_ctx.
Result<GenerateResult> generate(const model::Model& model, model::Session& session,
                                const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                const GenerateParams& params, const TextCallback& on_text);

}  // namespace dspark::generate
