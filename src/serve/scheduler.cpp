#include "serve/scheduler.h"

#include <algorithm>

#include "speculative/answer_cache.h"

namespace dspark::serve {

namespace {
using Clock = std::chrono::steady_clock;
// A batched forward holds every slot's window: a sure draft (speculative::Drafter::kMaxSureGamma) plus its
// pending token, whatever gamma requests may ask.
constexpr int64_t kMinWindow = speculative::Drafter::kMaxSureGamma + 1;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

Scheduler::Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, const SchedulerConfig& cfg,
                     DrafterFactory drafters, ThreadPool* pool, Metrics* metrics)
    : model_(model), tok_(tok), cfg_(cfg), drafters_(std::move(drafters)), pool_(pool), metrics_(metrics),
      batch_cost_(cfg.verify_ms, (int64_t)cfg.n_slots * std::max<int64_t>(cfg.max_window, kMinWindow)),
      gate_(cfg.gate, cfg.n_slots),
      cache_(cfg.cache_bytes) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(const model::Model& model,
                                                     const tokenizer::Tokenizer& tok, const SchedulerConfig& cfg,
                                                     DrafterFactory drafters, ThreadPool* pool, Metrics* metrics) {
  if (cfg.n_slots < 1) return Status::error("--parallel must be >= 1");
  if (cfg.max_queue < 0) return Status::error("--max-queue must be >= 0");
  std::unique_ptr<Scheduler> s(new Scheduler(model, tok, cfg, std::move(drafters), pool, metrics));
  if (cfg.answer_cache_bytes > 0 && s->drafters_) {
    const int64_t cap = speculative::AnswerCache::capacity_for((int64_t)cfg.answer_cache_bytes);
    if (cap == 0)
      return Status::error("--answer-cache-mib: " + std::to_string(cfg.answer_cache_bytes) +
                           " bytes cannot hold the smallest answer cache (" +
                           std::to_string(speculative::AnswerCache::bytes_for(64)) + " bytes); use 0 to turn it off");
    s->answers_ = std::make_unique<speculative::AnswerCache>(speculative::AnswerCacheConfig{.capacity_tokens = cap});
  }
  for (int i = 0; i < cfg.n_slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->id = i;
    slot->session = std::make_unique<model::Session>(
        model, model::SessionOptions{.n_ctx = cfg.n_ctx, .max_batch = cfg.max_batch}, pool);
    if (s->drafters_) {
      auto d = s->drafters_();
      if (!d) return Status::error("drafter for slot " + std::to_string(i) + ": " + d.message());
      slot->drafter = std::move(d).value();
      slot->history.tap_ids = slot->drafter->required_taps();
      slot->drafter->use_answer_cache(s->answers_.get());
    }
    s->slots_.push_back(std::move(slot));
  }
  if (cfg.batch_rounds && cfg.n_slots > 1)
    s->scratch_ = std::make_unique<model::ForwardScratch>(model.backend(), model.config(),
                                                          cfg.n_slots * std::max<int64_t>(cfg.max_window, kMinWindow),
                                                          cfg.n_ctx, pool);
  s->thread_ = std::thread([p = s.get()] { p->loop(); });
  return s;
}

Scheduler::~Scheduler() { shutdown(std::chrono::milliseconds(0)); }

Scheduler::Submit Scheduler::submit(std::shared_ptr<Job> job) {
  std::lock_guard lk(mu_);
  if (stopping_) return Submit::kStopping;
  const int64_t idle = (int64_t)slots_.size() - busy_;
  if ((int64_t)queue_.size() >= idle + cfg_.max_queue) return Submit::kQueueFull;
  job->t_submit = Clock::now();
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return Submit::kQueued;
}

void Scheduler::shutdown(std::chrono::milliseconds grace) {
  std::unique_lock lk(mu_);
  stopping_ = true;
  cv_.notify_all();
  cv_.wait_for(lk, grace, [&] { return queue_.empty() && busy_ == 0; });
  // Past the grace period: cancel what is left. Queued jobs never started; answer them here.
  for (auto& s : slots_)
    if (s->job) s->job->cancel = true;
  for (auto& j : queue_) {
    j->cancel = true;
    std::lock_guard jl(j->mu);
    j->cancelled = true;
    j->error = Status::error("the server is shutting down");
    j->finished = true;
    j->cv.notify_all();
  }
  queue_.clear();
  cv_.notify_all();
  lk.unlock();
  if (thread_.joinable()) thread_.join();
}

size_t Scheduler::kv_bytes_per_token() const {
  const model::ModelConfig& c = model_.config();
  return (size_t)(c.n_layer * c.n_head_kv * c.head_dim) * 2 /* K and V */ * sizeof(uint16_t);
}

nlohmann::json Scheduler::state() const {
  std::lock_guard lk(mu_);
  nlohmann::json slots = nlohmann::json::array();
  int64_t slot_tokens = 0;
  for (const auto& s : slots_) {
    slots.push_back({{"id", s->id}, {"state", s->job ? "busy" : "idle"}, {"cached_tokens", s->cached_tokens}});
    slot_tokens += s->cached_tokens;
  }
  return {{"queue", queue_.size()},
          {"max_queue", cfg_.max_queue},
          {"slots", slots_.size()},
          {"slots_busy", busy_},
          {"slot_state", slots},
          {"stopping", stopping_},
          {"batching",
           {{"enabled", (bool)scratch_},
            {"forwards", batched_forwards_},
            {"rounds", batched_rounds_},
            {"rows", batched_rows_},
            {"plan_ms", batch_plan_ms_},
            {"forward_ms", batch_forward_ms_},
            {"finish_ms", batch_finish_ms_},
            {"gate", gate_.stats()},
            {"step_ms", step_ms_},
            {"step_start_ms", start_ms_},
            {"step_prefill_ms", prefill_ms_},
            {"step_lone_ms", lone_ms_},
            {"batch_ms", batch_ms_}}},
          {"cache",
           {{"entries", cache_.entries()},
            {"bytes", cache_.bytes()},
            {"budget_bytes", cfg_.cache_bytes},
            {"restores", restores_},
            {"save_ms", cache_save_ms_},
            {"restore_ms", cache_restore_ms_},
            {"slot_tokens", slot_tokens},
            {"slot_bytes", (size_t)slot_tokens * kv_bytes_per_token()}}},
          {"answer_cache", answers_ ? answers_->stats() : nlohmann::json(nullptr)}};
}

void Scheduler::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    assign_locked();
    if (busy_ == 0) {
      if (stopping_ && queue_.empty()) break;
      cv_.wait(lk, [&] { return !queue_.empty() || stopping_; });
      continue;
    }
    std::vector<Slot*> active;
    for (auto& s : slots_)
      if (s->job) active.push_back(s.get());
    lk.unlock();
    run_steps(active);
    lk.lock();
  }
}

void Scheduler::assign_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<Job>& job = queue_.front();
    Slot* best = nullptr;
    int64_t best_len = -1;
    for (auto& s : slots_) {
      if (s->job) continue;
      const int64_t len = speculative::common_prefix(s->history.tokens, job->prompt);
      if (len > best_len || (len == best_len && s->last_used < best->last_used)) {
        best = s.get();
        best_len = len;
      }
    }
    if (!best) return;
    best->job = std::move(job);
    queue_.pop_front();
    ++busy_;
  }
}

bool Scheduler::start_job(Slot& s) {
  Job& job = *s.job;
  const auto now = Clock::now();
  job.queue_ms = ms_between(job.t_submit, now);
  job.slot = s.id;
  s.first_text = false;
  Job* jp = &job;
  Slot* sp = &s;
  auto on_text = [jp, sp](std::string_view t) {
    if (!sp->first_text) {
      sp->first_text = true;
      jp->ttft_ms = ms_between(jp->t_submit, Clock::now());
    }
    jp->push_text(t);
  };
  // A snapshot sharing a longer prefix than what the slot holds is restored into it first.
  if (cfg_.cache_bytes > 0 && !job.prompt.empty()) {
    const std::span<const int32_t> head(job.prompt.data(), job.prompt.size() - 1);
    int64_t own = speculative::common_prefix(s.history.tokens, head);
    if (own > 0 && own < s.session->kv().min_restorable_length()) own = 0;
    const auto t0 = Clock::now();
    const auto [idx, len] = cache_.best(head);
    const bool restored = idx >= 0 && len > own && cache_.restore(idx, s.session->kv(), &s.history, len);
    std::lock_guard lk(mu_);
    restores_ += restored ? 1 : 0;
    cache_restore_ms_ += ms_between(t0, Clock::now());
  }
  speculative::Drafter* drafter = job.use_drafter ? s.drafter.get() : nullptr;
  const speculative::StepperOptions opt{
      .prefill_chunk = cfg_.prefill_chunk, .reuse_prefix = cfg_.cache_bytes > 0, .governor = &s.governor};
  auto st = speculative::SpecStepper::create(model_, *s.session, tok_, job.prompt, job.params, drafter, &s.history,
                                      std::move(on_text), opt);
  if (!st) {
    finish(s, st.status(), false);
    return false;
  }
  s.stepper = std::move(st).value();
  return true;
}

void Scheduler::step(Slot& s) {
  if (s.job->cancel) {
    finish(s, Status::ok(), true);
    return;
  }
  const auto t0 = Clock::now();
  if (!s.stepper) {
    start_job(s);
    std::lock_guard lk(mu_);  // state() reads the phase times
    start_ms_ += ms_between(t0, Clock::now());
    return;
  }
  const bool prefill = s.stepper->prefilling();
  Status st = s.stepper->step();
  {
    std::lock_guard lk(mu_);
    (prefill ? prefill_ms_ : lone_ms_) += ms_between(t0, Clock::now());
  }
  if (!st) finish(s, st, false);
  else if (s.stepper->done()) finish(s, Status::ok(), false);
}

void Scheduler::run_steps(const std::vector<Slot*>& active) {
  std::vector<Slot*> batch;
  for (Slot* s : active) {
    const bool batchable = scratch_ && s->stepper && !s->job->cancel && s->stepper->in_round() &&
                           s->history.tap_ids == active.front()->history.tap_ids;
    if (!batchable) {
      const auto t0 = Clock::now();
      step(*s);
      std::lock_guard lk(mu_);
      step_ms_ += ms_between(t0, Clock::now());
    } else {
      batch.push_back(s);
    }
  }
  const auto t0 = Clock::now();
  if (batch.size() == 1) step(*batch.front());
  if (batch.size() > 1) batched_rounds(batch);
  std::lock_guard lk(mu_);
  (batch.size() == 1 ? step_ms_ : batch_ms_) += ms_between(t0, Clock::now());
}

void Scheduler::batched_rounds(std::vector<Slot*>& batch) {
  std::vector<model::SeqInput> seqs;
  std::vector<Slot*> planned;
  std::vector<size_t> tokens_before;  // [planned] tokens generated before this round
  const auto t_plan = Clock::now();
  const int n_batch = (int)batch.size();
  bool may_draft = true;
  {
    std::lock_guard lk(mu_);  // state() reads the gate
    may_draft = gate_.drafting(n_batch);
  }
  for (Slot* s : batch) {
    const size_t before = s->stepper->result().out.tokens.size();
    auto window = s->stepper->plan_round(may_draft);
    if (!window) {
      finish(*s, window.status(), false);
      continue;
    }
    seqs.push_back({s->session.get(), *window});
    planned.push_back(s);
    tokens_before.push_back(before);
  }
  if (planned.empty()) return;
  const auto t0 = Clock::now();
  model::ForwardOptions opt = planned.front()->stepper->round_options();
  for (const Slot* s : planned) opt.argmax_only = opt.argmax_only && s->stepper->argmax_only();
  Status st = model_.forward_multi(seqs, opt, *scratch_);
  const auto t1 = Clock::now();
  const double ms = ms_between(t0, t1);
  // Each sequence is charged its share of a draft-free forward plus what its draft rows add at the
  // margin (serve/batch_cost.h): its governor then drafts only where that beats the batch's plain rate.
  size_t rows = 0;
  std::vector<int64_t> windows;
  for (const model::SeqInput& q : seqs) {
    rows += q.tokens.size();
    windows.push_back((int64_t)q.tokens.size());
  }
  if (st) batch_cost_.observe((int64_t)rows, ms);
  const std::vector<double> charge = batch_cost_.charges(windows, ms);
  std::vector<std::pair<Slot*, Status>> ended;  // finished after the round's timing
  int64_t tokens = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    Slot* s = planned[i];
    if (!st) {  // the forward failed: every sequence in it is abandoned
      s->session->kv().clear();
      s->history.clear();
      ended.emplace_back(s, st);
      continue;
    }
    Status r = s->stepper->finish_round(charge[i]);
    tokens += (int64_t)(s->stepper->result().out.tokens.size() - tokens_before[i]);
    if (!r || s->stepper->done()) ended.emplace_back(s, std::move(r));
  }
  const auto t2 = Clock::now();
  {
    std::lock_guard lk(mu_);
    if (st && (int)planned.size() == n_batch) gate_.observe(n_batch, tokens, ms_between(t_plan, t2));
    ++batched_forwards_;
    batched_rounds_ += (int64_t)planned.size();
    batched_rows_ += (int64_t)rows;
    batch_plan_ms_ += ms_between(t_plan, t0);
    batch_forward_ms_ += ms;
    batch_finish_ms_ += ms_between(t1, t2);
  }
  for (auto& [s, r] : ended) finish(*s, std::move(r), false);
}

void Scheduler::finish(Slot& s, Status error, bool cancelled) {
  std::shared_ptr<Job> job = s.job;
  const auto now = Clock::now();
  speculative::SpecResult res;
  int64_t cached = 0;
  if (s.stepper) {
    cached = s.stepper->reused_tokens();
    res = s.stepper->take_result();
    res.stats.generated = (int64_t)res.out.tokens.size();
  }
  const bool spec_ran = s.stepper && job->use_drafter && s.drafter;
  JobSummary sum{.prompt_tokens = (int64_t)job->prompt.size(),
                 .completion_tokens = (int64_t)res.out.tokens.size(),
                 .cached_tokens = cached,
                 .spec = spec_ran ? &res.stats : nullptr,
                 .cancelled = cancelled,
                 .failed = !error.is_ok(),
                 .queue_s = job->queue_ms / 1e3,
                 .ttft_s = job->ttft_ms / 1e3,
                 .total_s = ms_between(job->t_submit, now) / 1e3};
  if (metrics_) metrics_->record_job(sum);
  if (answers_ && error.is_ok() && !cancelled) answers_->add(job->prompt, res.out.tokens);
  if (cfg_.cache_bytes > 0 && error.is_ok()) {
    cache_.save(s.session->kv(), s.history);
    std::lock_guard lk(mu_);
    cache_save_ms_ += ms_between(now, Clock::now());
  }
  {  // Free the slot first: once a client has its answer, the slot is idle in state().
    std::lock_guard lk(mu_);
    s.stepper.reset();
    s.job.reset();
    --busy_;
    s.last_used = ++clock_;
    if (cfg_.cache_bytes == 0) {
      s.history.clear();
      s.session->kv().clear();
    }
    s.cached_tokens = (int64_t)s.history.tokens.size();
    cv_.notify_all();
  }
  std::lock_guard jl(job->mu);
  job->result = std::move(res);
  job->error = std::move(error);
  job->cancelled = cancelled;
  job->spec_ran = spec_ran;
  job->cached_tokens = cached;
  job->total_ms = sum.total_s * 1e3;
  job->finished = true;
  job->cv.notify_all();
}

}  // namespace dspark::serve
