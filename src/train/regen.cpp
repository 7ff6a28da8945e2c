#include "train/regen.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/f16.h"
#include "kernels/ops.h"
#include "core/rng.h"

namespace dspark::train {

void softmax_top_k(const float* logits, int64_t n_vocab, int32_t k, int32_t* ids, float* probs,
                   std::vector<float>& exps, std::vector<int32_t>& cand) {
  const float mx = logits[kernels::argmax(logits, n_vocab)];
  exps.resize(n_vocab);
  const double sum = kernels::exp_shift_sum(logits, n_vocab, mx, 1.0f, exps.data());
  // Top k by logit: a min-heap of k entries; most logits fail the first comparison.
  auto worse = [&](int32_t a, int32_t b) { return logits[a] < logits[b] || (logits[a] == logits[b] && a > b); };
  auto better = [&](int32_t a, int32_t b) { return worse(b, a); };
  cand.clear();
  for (int64_t i = 0; i < n_vocab; ++i) {
    if ((int32_t)cand.size() < k) {
      cand.push_back((int32_t)i);
      std::push_heap(cand.begin(), cand.end(), better);  // heap top = worst kept
    } else if (logits[i] > logits[cand.front()]) {
      std::pop_heap(cand.begin(), cand.end(), better);
      cand.back() = (int32_t)i;
      std::push_heap(cand.begin(), cand.end(), better);
    }
  }
  std::sort(cand.begin(), cand.end(), better);
  const size_t kk = cand.size();
  for (int32_t j = 0; j < k; ++j) {
    // Fewer than k candidates (tiny vocabularies): pad with probability 0 and the top id.
    ids[j] = j < (int32_t)kk ? cand[j] : cand[0];
    probs[j] = j < (int32_t)kk ? (float)(exps[cand[j]] / sum) : 0.0f;
  }
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Slot {
  std::unique_ptr<model::Session> session;
  std::unique_ptr<Rng> rng;
  std::vector<float> exps;   // [n_vocab]
  std::vector<int32_t> cand;
  RegenSeq seq;
  int32_t next = -1;        // the sampled token not yet fed to the target
  bool active = false;
  bool done = false;
};

// Greedy argmax (first on ties), or a draw from softmax(logits / temperature) by inverse CDF.
int32_t draw_token(const float* logits, int64_t n_vocab, float temperature, Rng& rng, std::vector<float>& exps) {
  const int64_t best = kernels::argmax(logits, n_vocab);
  if (temperature <= 0) return (int32_t)best;
  exps.resize(n_vocab);
  const double z = kernels::exp_shift_sum(logits, n_vocab, logits[best], 1.0f / temperature, exps.data());
  const double u = rng.uniform() * z;
  double acc = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    acc += exps[i];
    if (acc > u) return (int32_t)i;
  }
  return (int32_t)best;  // rounding: u landed past the accumulated total
}

// Appends the session's last-forward tap rows [r0, r0 + n) as bf16 rows to the sequence.
void append_taps(const model::Session& s, size_t n_taps, int64_t n_embd, int64_t r0, int64_t n, RegenSeq& seq) {
  const size_t base = seq.taps.size();
  seq.taps.resize(base + (size_t)(n * n_taps * n_embd));
  uint16_t* out = seq.taps.data() + base;
  for (int64_t r = 0; r < n; ++r)
    for (size_t t = 0; t < n_taps; ++t) {
      const float* src = s.tap(t).data() + (r0 + r) * n_embd;
      for (int64_t c = 0; c < n_embd; ++c) *out++ = fp32_to_bf16(src[c]);
    }
}

}  // namespace

Status regenerate(const model::Model& model, const tokenizer::Tokenizer& tok, const RegenConfig& cfg,
                  std::span<const RegenJob> jobs, ThreadPool* pool,
                  const std::function<Status(RegenSeq&&)>& on_done,
                  const std::function<void(const RegenCounters&)>& on_step) {
  const model::ModelConfig& mc = model.config();
  const int64_t n_embd = mc.n_embd, n_vocab = mc.n_vocab;
  const size_t n_taps = cfg.tap_ids.size();
  if (cfg.top_k < 1 || cfg.top_k > n_vocab) return Status::error("regen: top_k out of range");
  if (cfg.max_new < 1 || cfg.batch < 1) return Status::error("regen: max_new and batch must be >= 1");
  for (int id : cfg.tap_ids)
    if (id < model::kTapEmbedding || id >= mc.n_layer)
      return Status::error("regen: tap layer " + std::to_string(id) + " is out of range for a " +
                           std::to_string(mc.n_layer) + "-layer target");
  int64_t max_prompt = 1;
  for (const RegenJob& j : jobs) max_prompt = std::max<int64_t>(max_prompt, (int64_t)j.prompt.size());
  model::SessionOptions so;
  so.n_ctx = max_prompt + cfg.max_new + 1;
  so.max_batch = std::min<int64_t>(256, max_prompt);
  model::ForwardOptions prefill_opt{model::LogitsMode::kLast, cfg.tap_ids};
  const model::ForwardOptions step_opt = prefill_opt;
  model::ForwardScratch scratch(model.backend(), mc, cfg.batch, so.n_ctx, pool);

  std::vector<Slot> slots(std::min<size_t>(cfg.batch, jobs.size()));
  for (Slot& s : slots) s.session = std::make_unique<model::Session>(model, so, pool);
  size_t next_job = 0;
  RegenCounters counters;

  // Reads the next-token distribution and samples the next token from the session's last logits.
  auto after_forward = [&](Slot& s) {
    const float* logits = s.session->logits();
    const size_t base = s.seq.dist_ids.size();
    s.seq.dist_ids.resize(base + cfg.top_k);
    s.seq.dist_probs.resize(base + cfg.top_k);
    softmax_top_k(logits, n_vocab, cfg.top_k, s.seq.dist_ids.data() + base, s.seq.dist_probs.data() + base, s.exps, s.cand);
    s.next = draw_token(logits, n_vocab, s.seq.temperature, *s.rng, s.exps);
    s.seq.tokens.push_back(s.next);
    const int64_t resp = (int64_t)s.seq.tokens.size() - s.seq.prompt_len;
    s.done = tok.is_stop(s.next) || resp >= cfg.max_new;
  };

  auto start = [&](Slot& s, const RegenJob& j) -> Status {
    s.session->kv().clear();
    s.seq = RegenSeq{};
    s.seq.prompt_index = j.prompt_index;
    s.seq.prompt_len = (int32_t)j.prompt.size();
    s.seq.temperature = j.temperature;
    s.seq.tokens = j.prompt;
    s.rng = std::make_unique<Rng>(j.seed);
    const auto t0 = Clock::now();
    for (size_t p = 0; p < j.prompt.size(); p += so.max_batch) {
      const size_t n = std::min<size_t>(so.max_batch, j.prompt.size() - p);
      DSPARK_RETURN_IF_ERROR(model.forward(*s.session, std::span(j.prompt).subspan(p, n), prefill_opt));
      append_taps(*s.session, n_taps, n_embd, 0, (int64_t)n, s.seq);
    }
    after_forward(s);
    counters.prefill_ms += ms_since(t0);
    s.active = true;
    counters.prompt_tokens += (int64_t)j.prompt.size();
    counters.new_tokens += 1;
    return Status::ok();
  };

  auto finish = [&](Slot& s) -> Status {
    s.seq.taps.resize(s.seq.tokens.size() * n_taps * n_embd, 0);  // the last token's row: never run
    s.active = false;
    counters.sequences += 1;
    return on_done(std::move(s.seq));
  };

  std::vector<model::SeqInput> inputs;
  std::vector<Slot*> stepping;
  while (true) {
    // Refill free slots (a prompt that finishes at once is handed over immediately).
    for (Slot& s : slots) {
      while (!s.active && next_job < jobs.size()) {
        DSPARK_RETURN_IF_ERROR(start(s, jobs[next_job++]));
        if (s.done) DSPARK_RETURN_IF_ERROR(finish(s));
      }
    }
    inputs.clear();
    stepping.clear();
    for (Slot& s : slots)
      if (s.active) {
        stepping.push_back(&s);
        inputs.push_back({s.session.get(), std::span<const int32_t>(&s.next, 1)});
      }
    if (stepping.empty()) break;
    auto t0 = Clock::now();
    DSPARK_RETURN_IF_ERROR(model.forward_multi(inputs, step_opt, scratch));
    counters.step_ms += ms_since(t0);
    t0 = Clock::now();
    for (Slot* s : stepping) append_taps(*s->session, n_taps, n_embd, 0, 1, s->seq);
    pool->parallel_for((int64_t)stepping.size(), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) after_forward(*stepping[i]);
    });
    counters.post_ms += ms_since(t0);
    counters.new_tokens += (int64_t)stepping.size();
    for (Slot* s : stepping)
      if (s->done) DSPARK_RETURN_IF_ERROR(finish(*s));
    if (on_step) on_step(counters);
  }
  return Status::ok();
}

}  // namespace dspark::train
