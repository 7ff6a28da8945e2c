#include "speculative/spec_stepper.h"

#include "speculative/token_tree.h"

#include <algorithm>

#include "kernels/ops.h"
#include "speculative/verify.h"

namespace dspark::speculative {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Tap rows [row0, row0 + n) of the session's last forward.
TapRows session_taps(const model::Session& s, size_t n_taps, int64_t n_embd, int64_t row0, int64_t n) {
  TapRows r;
  r.n_rows = n;
  r.n_embd = n_embd;
  for (size_t i = 0; i < n_taps; ++i) r.taps.push_back(s.tap(i).data() + row0 * n_embd);
  return r;
}

}  // namespace

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return (int64_t)i;
}

SpecStepper::SpecStepper(const model::Model& model, model::Session& session, const tokenizer::Tokenizer& tok,
                         std::span<const int32_t> prompt, const SpecParams& params, Drafter* drafter,
                         SeqHistory* history, generate::TextCallback on_text, const StepperOptions& opt)
    : model_(model), session_(session), tok_(tok), prompt_(prompt.begin(), prompt.end()), params_(params),
      drafter_(drafter), hist_(history ? history : &own_history_), on_text_(std::move(on_text)), opt_(opt),
      sampler_(params.gen.sampler, session.pool()), decoder_(tok), stops_(params.gen.stop) {}

Result<std::unique_ptr<SpecStepper>> SpecStepper::create(const model::Model& model, model::Session& session,
                                                         const tokenizer::Tokenizer& tok,
                                                         std::span<const int32_t> prompt, const SpecParams& params,
                                                         Drafter* drafter, SeqHistory* history,
                                                         generate::TextCallback on_text, const StepperOptions& opt) {
  const generate::GenerateParams& gp = params.gen;
  if (prompt.empty()) return Status::error("the prompt is empty");
  DSPARK_RETURN_IF_ERROR(sample::validate(gp.sampler));
  if (gp.max_tokens < 1) return Status::error("max tokens must be >= 1");
  if (params.gamma < 0) return Status::error("gamma must be >= 0");
  const int64_t n_ctx = session.kv().n_ctx();
  if ((int64_t)prompt.size() + gp.max_tokens > n_ctx)
    return Status::error("prompt of " + std::to_string(prompt.size()) + " tokens + " + std::to_string(gp.max_tokens) +
                         " new tokens exceeds the context size " + std::to_string(n_ctx));
  std::unique_ptr<SpecStepper> s(
      new SpecStepper(model, session, tok, prompt, params, drafter, history, std::move(on_text), opt));
  SeqHistory& h = *s->hist_;
  const int64_t n_embd = model.config().n_embd;
  if (drafter && !drafter->required_taps().empty() && drafter->required_taps() != h.tap_ids) {
    if (history) return Status::error("the history records other tap points than the drafter needs");
    h.tap_ids = drafter->required_taps();
  }
  h.taps.resize(h.tap_ids.size());
  // Room for the whole generation up front: growing the rows token by token re-copies them.
  const size_t rows_max = (size_t)std::min<int64_t>((int64_t)prompt.size() + params.gen.max_tokens, session.kv().n_ctx());
  for (auto& t : h.taps) t.reserve(rows_max * (size_t)n_embd);

  // The reusable prefix: shared with prompt[0, L-1) (the last prompt token heads the first
  // round), consistent with the KV, and restorable through the sliding-window rings.
  model::KvCache& kv = session.kv();
  bool consistent = (int64_t)h.tokens.size() == kv.length();
  for (const auto& t : h.taps) consistent = consistent && t.size() == h.tokens.size() * (size_t)n_embd;
  s->n_pre_ = (int64_t)prompt.size() - 1;
  int64_t keep = consistent && opt.reuse_prefix ? common_prefix(h.tokens, prompt.first(s->n_pre_)) : 0;
  if (keep > 0 && keep < kv.min_restorable_length()) keep = 0;
  if (keep == 0) {
    kv.clear();
  } else {
    kv.trim(kv.length() - keep);
  }
  h.tokens.resize(keep);
  for (auto& t : h.taps) t.resize((size_t)keep * n_embd);
  s->reused_ = keep;

  s->res_.stats.resize(drafter ? params.gamma : 0);
  if (drafter) {
    // Sampled requests decide from constants when there is a table (speculative/governor.h).
    GovernorConfig g = params.governor;
    g.deterministic = g.deterministic || gp.sampler.temperature > 0.0f;
    if (opt.governor) s->gov_ = opt.governor;
    s->gov_->begin_request(g, params.gamma);
    s->gov_->use_classes(drafter->class_priors());
  }
  s->res_.out.prompt_tokens = (int64_t)prompt.size();
  return s;
}

void SpecStepper::record(std::span<const int32_t> tokens) {
  SeqHistory& h = *hist_;
  const int64_t n_embd = model_.config().n_embd, n = (int64_t)tokens.size();
  h.tokens.insert(h.tokens.end(), tokens.begin(), tokens.end());
  for (size_t i = 0; i < h.taps.size(); ++i) {
    const float* rows = session_.tap(i).data();
    h.taps[i].insert(h.taps[i].end(), rows, rows + n * n_embd);
  }
}

TapRows SpecStepper::history_taps(int64_t row0, int64_t n) const {
  TapRows r;
  r.n_rows = n;
  r.n_embd = model_.config().n_embd;
  for (const auto& t : hist_->taps) r.taps.push_back(t.data() + row0 * r.n_embd);
  return r;
}

Status SpecStepper::abandon(Status st) {
  if (!st) {
    session_.kv().clear();
    hist_->clear();
    done_ = true;
  }
  return st;
}

Status SpecStepper::step() {
  if (done_) return Status::ok();
  return abandon(begun_ ? round() : prefill_step());
}

Result<std::span<const int32_t>> SpecStepper::plan_round(bool may_draft) {
  if (!in_round()) return Status::error("plan_round: the stepper is not between rounds");
  if (Status st = abandon(draft_phase(may_draft)); !st) return st;
  return std::span<const int32_t>(window_);
}

Status SpecStepper::finish_round(double verify_ms) {
  if (!in_round()) return Status::error("finish_round: the stepper is not in a round");
  ++res_.stats.target_calls;
  res_.stats.verify_ms += verify_ms;
  round_verify_ms_ = verify_ms;
  return abandon(accept_phase());
}

Status SpecStepper::prefill_step() {
  const auto t0 = Clock::now();
  model::KvCache& kv = session_.kv();
  const int64_t left = n_pre_ - kv.length();
  const int64_t n = opt_.prefill_chunk > 0 ? std::min(left, opt_.prefill_chunk) : left;
  if (n > 0) {
    const std::span<const int32_t> chunk(prompt_.data() + kv.length(), (size_t)n);
    DSPARK_RETURN_IF_ERROR(model_.forward(session_, chunk, {model::LogitsMode::kNone, hist_->tap_ids}));
    ++res_.stats.target_calls;
    record(chunk);
  }
  if (kv.length() == n_pre_) {
    if (drafter_)
      DSPARK_RETURN_IF_ERROR(drafter_->begin(std::span<const int32_t>(prompt_.data(), (size_t)n_pre_),
                                             history_taps(0, n_pre_)));
    begun_ = true;
    pending_ = prompt_.back();
    pos_ = n_pre_;
    t_decode_ = Clock::now();
  }
  const double ms = ms_since(t0);
  res_.stats.prefill_ms += ms;
  res_.out.prefill_ms += ms;
  return Status::ok();
}

bool SpecStepper::emit(int32_t id) {
  const generate::GenerateParams& gp = params_.gen;
  generate::GenerateResult& out = res_.out;
  if (!gp.ignore_eos && tok_.is_stop(id)) {
    out.finish = generate::FinishReason::kEos;
    return true;
  }
  out.tokens.push_back(id);
  const std::string text = stops_.push(decoder_.push(id));
  if (!text.empty()) {
    out.text += text;
    if (on_text_) on_text_(text);
  }
  if (stops_.stopped()) {
    out.finish = generate::FinishReason::kStop;
    return true;
  }
  if ((int32_t)out.tokens.size() >= gp.max_tokens) {
    out.finish = generate::FinishReason::kLength;
    return true;
  }
  return false;
}

void SpecStepper::finish_text() {
  if (!stops_.stopped()) {
    const std::string tail = stops_.push(decoder_.flush()) + stops_.flush();
    if (!tail.empty()) {
      res_.out.text += tail;
      if (on_text_) on_text_(tail);
    }
  }
  res_.out.decode_ms = ms_since(t_decode_);
  res_.stats.generated = (int64_t)res_.out.tokens.size();
  done_ = true;
}

Status SpecStepper::round() {
  DSPARK_RETURN_IF_ERROR(draft_phase(true, /*tree_ok=*/true));
  const auto t0 = Clock::now();
  model::ForwardOptions fo = round_options();
  fo.tree_parent = tree_parent_;
  DSPARK_RETURN_IF_ERROR(model_.forward(session_, window_, fo));
  ++res_.stats.target_calls;
  const double ms = ms_since(t0);
  res_.stats.verify_ms += ms;
  round_verify_ms_ = ms;
  if (drafter_) drafter_->observe_verify((int)window_.size(), ms);
  return tree_parent_.empty() ? accept_phase() : accept_tree_phase();
}

Status SpecStepper::draft_phase(bool may_draft, bool tree_ok) {
  const generate::GenerateParams& gp = params_.gen;
  const int64_t n_ctx = session_.kv().n_ctx();
  // 1. Draft: never more than the tokens still allowed (the round also yields one target token).
  const auto t0 = Clock::now();
  draft_.clear();
  if (drafter_) {
    const int remaining = gp.max_tokens - (int)res_.out.tokens.size();
    const int room =
        (int)std::max<int64_t>(0, std::min<int64_t>({params_.gamma, remaining - 1, n_ctx - pos_ - 1}));
    // 0: a plain step (the drafter returns at once). A batch gate's hold binds greedy requests of
    // a governed generation only: a sampled request decides from constants, so that with a seed it
    // drafts, and samples, the same way however the batch around it is timed.
    const bool hold = !may_draft && room > 0 && params_.governor.enabled && gp.sampler.temperature <= 0.0f;
    decision_ = hold ? gov_->hold(GovernorReason::kBatchPlain) : gov_->decide(room);
    // A draft the drafter is sure of (Drafter::sure_drafts: copies of a long match) is taken
    // when the round was decided plain, or when it is longer than the decided cap (it may run past
    // gamma); exploration rounds (warm-up, probes) keep their decision. Greedy only, so sampled
    // requests keep deciding from constants.
    const int sure_room = (int)std::max<int64_t>(
        0, std::min<int64_t>({Drafter::kMaxSureGamma, params_.sure_gamma, remaining - 1, n_ctx - pos_ - 1}));
    const bool plain_by_choice = decision_.gamma == 0 && (decision_.reason == GovernorReason::kPlain ||
                                                        decision_.reason == GovernorReason::kBatchPlain);
    const bool ask_sure = sure_room > 0 && params_.governor.enabled && params_.governor.sure_drafts &&
                          gp.sampler.temperature <= 0.0f &&
                          (plain_by_choice || decision_.reason == GovernorReason::kDraft) && drafter_->sure_drafts();
    bool sure = false;
    if (ask_sure) {
      DSPARK_RETURN_IF_ERROR(
          drafter_->draft({.pending = pending_, .pos = pos_, .max_n = sure_room, .sampler = gp.sampler,
                           .rng = &sampler_.rng(), .sure_only = true, .sure_min = decision_.gamma},
                          &draft_));
      if ((int)draft_.tokens.size() > sure_room) draft_.tokens.resize(sure_room);
      sure = (int)draft_.tokens.size() > decision_.gamma;
    }
    if (sure) {
      decision_ = gov_->sure(decision_, (int)draft_.tokens.size());
    } else {
      // By class (speculative/governor.h): a rate-based decision is taken after the draft, which asks
      // for the whole room; the draft's class then says how much of it pays.
      const bool by_class = gov_->by_class() && (decision_.reason == GovernorReason::kDraft ||
                                                 decision_.reason == GovernorReason::kPlain);
      const int max_n = by_class ? room : decision_.gamma;
      // A tree needs a greedy round of this sequence alone whose window rows carry no taps (a tap row
      // per window row would not be the committed branch's).
      const bool tree =
          !by_class && tree_ok && max_n > 0 && gp.sampler.temperature <= 0.0f && hist_->tap_ids.empty();
      DSPARK_RETURN_IF_ERROR(
          drafter_->draft({.pending = pending_, .pos = pos_, .max_n = max_n, .sampler = gp.sampler,
                           .rng = &sampler_.rng(), .tree_ok = tree},
                          &draft_));
      if (by_class) decision_ = gov_->cut(decision_, draft_.draft_class, (int)draft_.tokens.size());
      if (!draft_.parent.empty()) {
        const int64_t room = std::min<int64_t>(session_.kv().max_batch() - 1, n_ctx - pos_ - 1);
        tree_expected_ = prune_tree(&draft_, params_.governor.verify_ms,
                                    (int)std::min<int64_t>(room, Drafter::kMaxTreeTokens), tree_calib_.scale())
                             .expected;
      }
      if (draft_.parent.empty() && (int)draft_.tokens.size() > decision_.gamma) {
        draft_.tokens.resize(decision_.gamma);
        if (draft_.q.size() > draft_.tokens.size()) draft_.q.resize(draft_.tokens.size());
        if (draft_.confidence.size() > draft_.tokens.size()) draft_.confidence.resize(draft_.tokens.size());
      }
    }
    res_.stats.governor = gov_->stats();
  }
  round_draft_ms_ = ms_since(t0);
  res_.stats.draft_ms += round_draft_ms_;
  // 2. The verify window [pending, drafts...]: one target forward with all-position logits and taps.
  window_.assign(1, pending_);
  window_.insert(window_.end(), draft_.tokens.begin(), draft_.tokens.end());
  if (draft_.parent.empty()) tree_parent_.clear();
  else tree_parent_ = window_parents(draft_);
  return Status::ok();
}

Status SpecStepper::accept_tree_phase() {
  SpecStats& st = res_.stats;
  const int64_t n_vocab = model_.config().n_vocab;
  const int rows = (int)window_.size(), chain = draft_.chain;
  auto t0 = Clock::now();
  argmax_rows_.resize(rows);
  for (int i = 0; i < rows; ++i)
    argmax_rows_[i] = (int32_t)kernels::argmax(session_.logits() + (size_t)i * n_vocab, n_vocab);
  const TreePath path = accept_tree(argmax_rows_, window_, tree_parent_);
  const int k = (int)path.rows.size();
  st.add_round(std::max(chain, k), k);  // drafted: the chain (or the longer branch the target took)
  ++st.tree_rounds;
  st.tree_rows += rows - 1 - chain;
  const bool branch = k > 0 && path.rows[0] > chain;  // the target left the chain at its first token
  if (branch) ++st.tree_branch_taken;
  tree_calib_.observe(tree_expected_, branch ? k : 0);
  const double accept_ms = ms_since(t0);
  st.accept_ms += accept_ms;

  bool stop = false;
  std::vector<int32_t> committed(1, pending_);
  for (int r : path.rows) committed.push_back(window_[(size_t)r]);
  for (int i = 1; i <= k && !stop; ++i) stop = emit(committed[(size_t)i]);
  if (!stop) stop = emit(path.next);

  // The accepted branch's K/V rows move into place (row r sat at position pos_ + r); the rest go.
  t0 = Clock::now();
  for (int j = 0; j < k; ++j) session_.kv().move_row(pos_ + path.rows[(size_t)j], pos_ + 1 + j);
  session_.kv().trim(rows - 1 - k);
  if (drafter_) DSPARK_RETURN_IF_ERROR(drafter_->commit(committed, pos_, TapRows{}));
  record(committed);
  pos_ += k + 1;
  pending_ = path.next;
  DSPARK_CHECK(session_.kv().length() == pos_);
  const double commit_ms = ms_since(t0);
  st.commit_ms += commit_ms;
  if (drafter_ && decision_.reason != GovernorReason::kSure)
    gov_->observe({.gamma = decision_.gamma, .drafted = chain, .accepted = std::min(k, chain),  // as a chain round
                   .window = rows, .draft_ms = round_draft_ms_, .verify_ms = round_verify_ms_,
                   .rest_ms = accept_ms + commit_ms, .cls = -1});  // trees are never by class
  if (stop) finish_text();
  return Status::ok();
}

Status SpecStepper::accept_phase() {
  const generate::GenerateParams& gp = params_.gen;
  SpecStats& st = res_.stats;
  const int64_t n_vocab = model_.config().n_vocab, n_embd = model_.config().n_embd;
  const bool greedy = gp.sampler.temperature <= 0.0f;
  const int d = (int)draft_.tokens.size();

  // 3. Accept.
  auto t0 = Clock::now();
  Acceptance acc;
  if (greedy) {
    argmax_rows_.resize(d + 1);
    for (int i = 0; i <= d; ++i)
      argmax_rows_[i] = (int32_t)kernels::argmax(session_.logits() + (size_t)i * n_vocab, n_vocab);
    acc = accept_greedy(argmax_rows_, draft_.tokens);
  } else {
    if ((int)draft_.q.size() != d)
      return Status::error(drafter_->kind() + " drafter gave no draft distribution at temperature > 0");
    const float* logits = session_.logits();
    acc = accept_rejection(
        [&](int i) -> const sample::RowDist& { return sampler_.row(logits + (size_t)i * n_vocab, n_vocab); },
        draft_.tokens, std::span(draft_.q.data(), d), sampler_.rng());
  }
  if (drafter_) st.add_round(d, acc.n_accept);
  else ++st.rounds;
  const double accept_ms = ms_since(t0);
  st.accept_ms += accept_ms;

  // 4. Emit accepted drafts, then the correction/bonus; stop inside the run when needed.
  bool stop = false;
  for (int i = 0; i < acc.n_accept && !stop; ++i) stop = emit(draft_.tokens[i]);
  if (!stop) stop = emit(acc.next);

  // 5. Roll back rejected rows; commit pending + accepted drafts to the drafter and history.
  t0 = Clock::now();
  session_.kv().trim(d - acc.n_accept);
  const std::span<const int32_t> committed(window_.data(), (size_t)acc.n_accept + 1);
  if (drafter_)
    DSPARK_RETURN_IF_ERROR(
        drafter_->commit(committed, pos_, session_taps(session_, hist_->tap_ids.size(), n_embd, 0, acc.n_accept + 1)));
  record(committed);
  pos_ += acc.n_accept + 1;
  pending_ = acc.next;
  DSPARK_CHECK(session_.kv().length() == pos_);  // target KV == committed tokens (pending excluded)
  const double commit_ms = ms_since(t0);
  st.commit_ms += commit_ms;
  if (drafter_ && decision_.reason != GovernorReason::kSure)
    gov_->observe({.gamma = decision_.gamma, .drafted = d, .accepted = acc.n_accept, .draft_ms = round_draft_ms_,
                  .verify_ms = round_verify_ms_, .rest_ms = accept_ms + commit_ms,
                  .cls = gov_->by_class() ? draft_.draft_class : -1});
  if (stop) finish_text();
  return Status::ok();
}

}  // namespace dspark::speculative
