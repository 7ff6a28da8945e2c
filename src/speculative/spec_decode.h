// The speculative decoding loop (round protocol: drafter.h): draft -> one target forward over
// [pending, drafts] -> accept -> roll back the target KV -> commit to the drafter.
#pragma once

#include "generate/generate.h"
#include "speculative/drafter.h"
#include "speculative/governor.h"
#include "speculative/telemetry.h"

namespace dspark::speculative {

struct SpecParams {
  generate::GenerateParams gen;  // max tokens, stop strings, sampler (temperature 0 = greedy)
  int gamma = 5;                 // proposal length cap per round
  GovernorConfig governor = {};  // per-round draft length (speculative/governor.h); off: always up to gamma
  // The cap of a sure draft (Drafter::sure_drafts), which may run past gamma when gamma is the
  // drafter's default; a caller that sets gamma explicitly (a request's num_draft_tokens) sets this
  // to gamma too, so no round drafts more than asked.
  int sure_gamma = Drafter::kMaxSureGamma;
};

struct SpecResult {
  generate::GenerateResult out;  // tokens, text, finish reason, prefill/decode timing
  SpecStats stats;
};

// Clears the session, prefills prompt[0, L-1) (the last prompt token heads the first verify
// window), then runs rounds until a stop. At temperature 0 the output equals serial greedy
// decoding; at temperature > 0 it is distributed as the target's samples.
Result<SpecResult> generate_spec(const model::Model& model, model::Session& session,
                                 const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                 const SpecParams& params, Drafter& drafter, const generate::TextCallback& on_text);

}  // namespace dspark::speculative
