#include "spec/spec_decode.h"

#include <algorithm>
#include <chrono>

#include "generate/stop.h"
#include "kernels/ops.h"
#include "spec/verify.h"
#include "tokenizer/utf8.h"

namespace dspark::spec {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Tap rows [row0, row0 + n) of the session's last forward.
TapRows tap_rows(const model::Session& s, size_t n_taps, int64_t n_embd, int64_t row0, int64_t n) {
  TapRows r;
  r.n_rows = n;
  r.n_embd = n_embd;
  for (size_t i = 0; i < n_taps; ++i) r.taps.push_back(s.tap(i).data() + row0 * n_embd);
  return r;
}

}  // namespace

Result<SpecResult> generate_spec(const model::Gemma3Model& model, model::Session& session,
                                 const tokenizer::SpmTokenizer& tok, std::span<const int32_t> prompt,
                                 const SpecParams& params, Drafter& drafter, const generate::TextCallback& on_text) {
  const generate::GenerateParams& gp = params.gen;
  if (prompt.empty()) return Status::error("the prompt is empty");
  DSPARK_RETURN_IF_ERROR(sample::validate(gp.sampler));
  if (gp.max_tokens < 1) return Status::error("max tokens must be >= 1");
  if (params.gamma < 0) return Status::error("gamma must be >= 0");
  const int64_t n_ctx = session.kv().n_ctx(), n_vocab = model.config().n_vocab, n_embd = model.config().n_embd;
  if ((int64_t)prompt.size() + gp.max_tokens > n_ctx)
    return Status::error("prompt of " + std::to_string(prompt.size()) + " tokens + " + std::to_string(gp.max_tokens) +
                         " new tokens exceeds the context size " + std::to_string(n_ctx));

  SpecResult res;
  SpecStats& st = res.stats;
  st.resize(params.gamma);
  generate::GenerateResult& out = res.out;
  out.prompt_tokens = (int64_t)prompt.size();
  const bool greedy = gp.sampler.temperature <= 0.0f;
  sample::Sampler sampler(gp.sampler);
  tokenizer::StreamDecoder decoder(tok);
  generate::StopMatcher stops(gp.stop);
  const model::ForwardOptions fwd{model::LogitsMode::kAll, drafter.required_taps()};
  const size_t n_taps = fwd.taps.size();

  // Prefill all but the last prompt token (with taps for the drafter).
  session.kv().clear();
  auto t0 = Clock::now();
  const int64_t n_pre = (int64_t)prompt.size() - 1;
  if (n_pre > 0) {
    DSPARK_RETURN_IF_ERROR(model.forward(session, prompt.first(n_pre), {model::LogitsMode::kNone, fwd.taps}));
    ++st.target_calls;
  }
  DSPARK_RETURN_IF_ERROR(drafter.begin(prompt.first(n_pre), tap_rows(session, n_pre > 0 ? n_taps : 0, n_embd, 0, n_pre)));
  st.prefill_ms = out.prefill_ms = ms_since(t0);

  int32_t pending = prompt.back();
  int64_t pos = n_pre;
  DraftResult draft;
  std::vector<int32_t> window, argmax_rows;
  std::vector<std::vector<sample::TokenProb>> p_rows;
  bool done = false;
  const auto t_decode = Clock::now();

  // Emits one token; returns true when generation must stop.
  auto emit = [&](int32_t id) {
    if (!gp.ignore_eos && tok.is_stop(id)) {
      out.finish = generate::FinishReason::kEos;
      return true;
    }
    out.tokens.push_back(id);
    const std::string text = stops.push(decoder.push(id));
    if (!text.empty()) {
      out.text += text;
      if (on_text) on_text(text);
    }
    if (stops.stopped()) {
      out.finish = generate::FinishReason::kStop;
      return true;
    }
    if ((int32_t)out.tokens.size() >= gp.max_tokens) {
      out.finish = generate::FinishReason::kLength;
      return true;
    }
    return false;
  };

  while (!done) {
    // 1. Draft: never more than the tokens still allowed (the round also yields one target token).
    const int remaining = gp.max_tokens - (int)out.tokens.size();
    const int max_n = (int)std::max<int64_t>(0, std::min<int64_t>({params.gamma, remaining - 1, n_ctx - pos - 1}));
    t0 = Clock::now();
    DSPARK_RETURN_IF_ERROR(drafter.draft({pending, pos, max_n, gp.sampler.temperature, &sampler.rng()}, &draft));
    if ((int)draft.tokens.size() > max_n) draft.tokens.resize(max_n);
    const int d = (int)draft.tokens.size();
    st.draft_ms += ms_since(t0);

    // 2. One target forward over [pending, drafts...] with all-position logits and taps.
    t0 = Clock::now();
    window.assign(1, pending);
    window.insert(window.end(), draft.tokens.begin(), draft.tokens.end());
    DSPARK_RETURN_IF_ERROR(model.forward(session, window, fwd));
    ++st.target_calls;
    st.verify_ms += ms_since(t0);

    // 3. Accept.
    t0 = Clock::now();
    Acceptance acc;
    if (greedy) {
      argmax_rows.resize(d + 1);
      for (int i = 0; i <= d; ++i) argmax_rows[i] = (int32_t)kernels::argmax(session.logits() + (size_t)i * n_vocab, n_vocab);
      acc = accept_greedy(argmax_rows, draft.tokens);
    } else {
      p_rows.resize(d + 1);
      for (int i = 0; i <= d; ++i) p_rows[i] = sampler.distribution(session.logits() + (size_t)i * n_vocab, n_vocab);
      if ((int)draft.q.size() != d) return Status::error(drafter.kind() + " drafter gave no draft distribution at temperature > 0");
      acc = accept_rejection(std::span(p_rows.data(), d + 1), draft.tokens, std::span(draft.q.data(), d), sampler.rng());
    }
    st.add_round(d, acc.n_accept);
    st.accept_ms += ms_since(t0);

    // 4. Emit accepted drafts, then the correction/bonus; stop inside the run when needed.
    for (int i = 0; i < acc.n_accept && !done; ++i) done = emit(draft.tokens[i]);
    if (!done) done = emit(acc.next);

    // 5. Roll back rejected rows; commit pending + accepted drafts to the drafter.
    t0 = Clock::now();
    session.kv().trim(d - acc.n_accept);
    DSPARK_RETURN_IF_ERROR(drafter.commit(std::span<const int32_t>(window.data(), acc.n_accept + 1), pos,
                                          tap_rows(session, n_taps, n_embd, 0, acc.n_accept + 1)));
    pos += acc.n_accept + 1;
    pending = acc.next;
    DSPARK_CHECK(session.kv().length() == pos);  // target KV == committed tokens (pending excluded)
    st.commit_ms += ms_since(t0);
  }
  if (!stops.stopped()) {
    const std::string tail = stops.push(decoder.flush()) + stops.flush();
    if (!tail.empty()) {
      out.text += tail;
      if (on_text) on_text(tail);
    }
  }
  out.decode_ms = ms_since(t_decode);
  st.generated = (int64_t)out.tokens.size();
  return res;
}

}  // namespace dspark::spec
