#include "speculative/spec_decode.h"

#include "speculative/spec_stepper.h"

namespace dspark::speculative {

Result<SpecResult> generate_spec(const model::Model& model, model::Session& session,
                                 const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                 const SpecParams& params, Drafter& drafter, const generate::TextCallback& on_text) {
  auto stepper = SpecStepper::create(model, session, tok, prompt, params, &drafter, /*history=*/nullptr, on_text);
  if (!stepper) return stepper.status();
  while (!(*stepper)->done()) DSPARK_RETURN_IF_ERROR((*stepper)->step());
  return (*stepper)->take_result();
}

}  // namespace dspark::speculative
