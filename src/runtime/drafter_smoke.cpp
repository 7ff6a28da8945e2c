#include "runtime/drafter_smoke.h"

#include <chrono>
#include <cmath>

#include "kernels/ops.h"
#include "runtime/drafter_factory.h"

namespace dspark::runtime {

Result<SmokeResult> smoke_check_drafter(const std::string& dir, const model::Model& target, ThreadPool* pool) {
  auto d = open_dspark_probe(dir, target, DSparkProbe{.n_ctx = 64}, pool);
  if (!d) return d.status();
  speculative::DSparkDrafter& drafter = *d.value();
  const int64_t V = target.config().n_vocab;
  std::vector<int32_t> prompt(8);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = (int32_t)((i == 0 ? 2 : 100 + 37 * (int64_t)i) % V);
  model::Session s(target, model::SessionOptions{.n_ctx = 64, .max_batch = 64}, pool);
  const std::vector<int> taps = drafter.required_taps();
  DSPARK_RETURN_IF_ERROR(target.forward(s, prompt, model::ForwardOptions{model::LogitsMode::kLast, taps}));
  speculative::TapRows rows;
  rows.n_rows = (int64_t)prompt.size();
  rows.n_embd = target.config().n_embd;
  for (size_t i = 0; i < taps.size(); ++i) rows.taps.push_back(s.tap(i).data());
  DSPARK_RETURN_IF_ERROR(drafter.begin(prompt, rows));
  speculative::DraftRequest req;
  req.pending = (int32_t)kernels::argmax(s.logits(), V);
  req.pos = (int64_t)prompt.size();
  req.max_n = drafter.gamma();
  speculative::DraftResult out;
  const auto t0 = std::chrono::steady_clock::now();
  DSPARK_RETURN_IF_ERROR(drafter.draft(req, &out));
  SmokeResult r;
  r.draft_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.tokens = out.tokens;
  r.draft_vocab = drafter.model().draft_vocab();
  r.quantized = drafter.model().quantized();
  if (out.tokens.empty()) return Status::error(dir + ": the smoke draft produced no tokens");
  for (int32_t t : out.tokens)
    if (t < 0 || t >= V) return Status::error(dir + ": the smoke draft produced token " + std::to_string(t) + " outside the vocabulary");
  const float* u = drafter.last_base_logits();
  for (int64_t i = 0; i < (int64_t)out.tokens.size() * r.draft_vocab; ++i)
    if (!std::isfinite(u[i])) return Status::error(dir + ": the smoke draft produced a non-finite logit");
  return r;
}

}  // namespace dspark::runtime
