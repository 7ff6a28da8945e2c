#include "speculative/drafter_dspark.h"

#include <chrono>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "speculative/answer_cache.h"

namespace dspark::speculative {

namespace {

Status check_options(const DSparkOptions& opt, const DSparkConfig& c, const std::string& dir) {
  if (!(opt.threshold >= 0.0f && opt.threshold <= 1.0f))
    return Status::error("dspark drafter: threshold = " + std::to_string(opt.threshold) + " is outside [0, 1]");
  if (opt.schedule && !c.confidence)
    return Status::error("dspark drafter: the cost-aware schedule needs a confidence head, but " + dir +
                         "config.json: field 'enable_confidence_head' is false");
  if (opt.threshold > 0.0f && !c.confidence)
    return Status::error("dspark drafter: threshold " + std::to_string(opt.threshold) + " needs a confidence head, but " +
                         dir + "config.json: field 'enable_confidence_head' is false");
  if (opt.gamma < 0 || opt.gamma > c.block_size)
    return Status::error("dspark drafter: gamma = " + std::to_string(opt.gamma) + " is outside [1, block_size = " +
                         std::to_string(c.block_size) + "] (0 = block_size)");
  if (opt.fast_path_top_k < 1) return Status::error("dspark drafter: fast_path_top_k must be >= 1");
  if (opt.ctx_reserve < 0) return Status::error("dspark drafter: ctx_reserve must be >= 0");
  return Status::ok();
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

Result<std::unique_ptr<DSparkDrafter>> DSparkDrafter::load(const std::string& dir, const model::Model& target,
                                                           const DSparkOptions& opt, ThreadPool* pool) {
  const model::ModelConfig& tc = target.config();
  TargetTables tables;
  tables.embed = target.weights().token_embd;
  tables.lm_head = target.weights().output;  // the target's LM head (== token_embd when tied)
  tables.n_vocab = tc.n_vocab;
  tables.n_embd = tc.n_embd;
  // The target's backend decides the drafter's kernels too (`--backend cpu-avx2` reaches both).
  return load(dir, target_shape(tc), &tables, opt, pool, target.backend().matmul_context(nullptr).isa);
}

Result<std::unique_ptr<DSparkDrafter>> DSparkDrafter::load(const std::string& dir, const TargetShape& target,
                                                           const TargetTables* tables, const DSparkOptions& opt,
                                                           ThreadPool* pool, std::optional<kernels::Isa> isa) {
  auto m = DSparkModel::load(dir, target, tables, net::DSparkLoadOptions{.copy_bits = opt.copy_bits, .isa = isa});
  if (!m) return m.status();
  return create(std::move(m.value()), opt, pool);
}

std::unique_ptr<Drafter> DSparkDrafter::fork() const {
  return std::unique_ptr<Drafter>(new DSparkDrafter(model_, opt_, pool_));  // opt_ was checked when this state was made
}

Result<std::unique_ptr<DSparkDrafter>> DSparkDrafter::create(std::shared_ptr<const DSparkModel> model,
                                                             const DSparkOptions& opt, ThreadPool* pool) {
  DSPARK_RETURN_IF_ERROR(check_options(opt, model->config(), model->dir()));
  return std::unique_ptr<DSparkDrafter>(new DSparkDrafter(std::move(model), opt, pool));
}

DSparkDrafter::DSparkDrafter(std::shared_ptr<const DSparkModel> model, const DSparkOptions& opt, ThreadPool* pool)
    : model_(std::move(model)), opt_(opt), markov_(*model_, opt.fast_path_top_k), copy_(opt.copy_cfg), pool_(pool) {
  const DSparkConfig& c = model_->config();
  gamma_ = opt.gamma > 0 ? opt.gamma : (int)c.block_size;
  const size_t vd = (size_t)model_->draft_vocab(), g = (size_t)c.block_size;
  model_->init_scratch(s_, pool, opt.ctx_reserve);
  hidden_.resize(g * (size_t)c.hidden_size);
  base_.resize(g * vd);
  scores_.resize(g * vd);
  scores_valid_.assign(g, 0);
  conf_logits_.reserve(g);
  verify_ms_ = opt.verify_ms;
}

double DSparkDrafter::calibrate_draft_ms() {
  const DSparkConfig& c = model_->config();
  const int64_t rows = 128;
  std::vector<float> zeros((size_t)(rows * c.hidden_size), 0.0f);
  TapRows taps;
  taps.taps.assign(c.target_layer_ids.size(), zeros.data());
  taps.n_rows = rows;
  taps.n_embd = c.hidden_size;
  std::vector<int32_t> prompt((size_t)rows, 2);
  if (!begin(prompt, taps).is_ok()) return 0.0;
  std::vector<double> t;
  for (int r = 0; r < 6; ++r) {
    run_backbone(2, gamma_);
    if (r > 0) t.push_back(last_backbone_ms_);
  }
  std::sort(t.begin(), t.end());
  opt_.draft_ms = t[t.size() / 2];
  draft_ms_ = opt_.draft_ms;
  backbone_rounds_ = 1;  // the online mean starts from the calibration
  ctx_.len = 0;
  for (auto& k : ctx_.k) k.clear();
  for (auto& v : ctx_.v) v.clear();
  history_.clear();
  return opt_.draft_ms;
}

void DSparkDrafter::observe_verify(int n_tokens, double ms) {
  constexpr double kVerifyEmaWeight = 0.1;  // ~10 rounds of memory: follows load changes, damps spikes
  if (n_tokens >= 1 && (size_t)n_tokens < verify_ms_.size() && ms > 0)
    verify_ms_[(size_t)n_tokens] += kVerifyEmaWeight * (ms - verify_ms_[(size_t)n_tokens]);
}

const float* DSparkDrafter::last_logits(int slot) const {
  if (slot < 0 || slot >= last_slots_ || !scores_valid_[(size_t)slot]) return nullptr;
  return scores_.data() + (size_t)slot * (size_t)model_->draft_vocab();
}

Status DSparkDrafter::begin(std::span<const int32_t> prompt, const TapRows& taps) {
  const DSparkConfig& c = model_->config();
  const size_t row = (size_t)(c.n_kv_heads * c.head_dim);
  ctx_.k.resize((size_t)c.n_layers);
  ctx_.v.resize((size_t)c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    ctx_.k[(size_t)l].clear();
    ctx_.v[(size_t)l].clear();
    ctx_.k[(size_t)l].reserve(row * (size_t)opt_.ctx_reserve);
    ctx_.v[(size_t)l].reserve(row * (size_t)opt_.ctx_reserve);
  }
  ctx_.len = 0;
  pending_rows_ = 0;
  for (auto& t : pending_taps_) t.clear();
  last_slots_ = 0;
  gate_ = Gate{};
  slot_conf_.clear();
  copy_.begin(prompt);
  if (c.lookup_max_ngram > 0) history_.assign(prompt.begin(), prompt.end());
  if (taps.n_rows != (int64_t)prompt.size())
    return Status::error("dspark drafter: begin got " + std::to_string(taps.n_rows) + " tap rows for a prompt of " +
                         std::to_string(prompt.size()) + " tokens");
  // Like committed rows, the prompt's rows are projected when the drafter next drafts: a request
  // whose governor never drafts (or a server batch held plain) never pays for them.
  return buffer_taps(taps);
}

Status DSparkDrafter::commit(std::span<const int32_t> committed, int64_t pos, const TapRows& taps) {
  if (pos != context_len())
    return Status::error("dspark drafter: commit at position " + std::to_string(pos) + ", but the drafter context has " +
                         std::to_string(context_len()) + " rows");
  if (taps.n_rows != (int64_t)committed.size())
    return Status::error("dspark drafter: commit of " + std::to_string(committed.size()) + " tokens got " +
                         std::to_string(taps.n_rows) + " tap rows");
  if (gate_.pending) {
    constexpr double kGateEmaWeight = 0.25;  // ~4 rounds: follows the text, not the whole request
    const double tok = (double)committed.size();
    if (gate_.n == 0) {
      gate_.tokens = tok;
      gate_.ms = gate_.pending_ms;
    } else {
      gate_.tokens += kGateEmaWeight * (tok - gate_.tokens);
      gate_.ms += kGateEmaWeight * (gate_.pending_ms - gate_.ms);
    }
    ++gate_.n;
    ++gate_rounds_;
    gate_.pending = false;
  }
  // Slot i of the last draft was evaluated iff slots < i were all accepted, accepted iff i < accepted.
  if (!committed.empty()) {
    const size_t accepted = committed.size() - 1;
    for (size_t i = 0; i < slot_conf_.size() && i <= accepted; ++i) {
      if (slot_conf_[i] < 0) continue;
      all_predicted_ += slot_conf_[i];
      all_accepted_ += i < accepted ? 1.0 : 0.0;
      ++all_evaluated_;
    }
  }
  slot_conf_.clear();
  if (!copy_.commit(committed, pos))
    return Status::error("dspark drafter: copy head history out of step at position " + std::to_string(pos));
  if (model_->config().lookup_max_ngram > 0) history_.insert(history_.end(), committed.begin(), committed.end());
  return buffer_taps(taps);
}

Status DSparkDrafter::buffer_taps(const TapRows& taps) {
  if ((int64_t)taps.taps.size() != (int64_t)model_->config().target_layer_ids.size() ||
      taps.n_embd != model_->config().hidden_size)
    return model_->append_context(ctx_, s_, taps);  // the projection reports the mismatch
  pending_taps_.resize(taps.taps.size());
  for (size_t t = 0; t < taps.taps.size(); ++t)
    pending_taps_[t].insert(pending_taps_[t].end(), taps.taps[t], taps.taps[t] + taps.n_rows * taps.n_embd);
  pending_rows_ += taps.n_rows;
  return Status::ok();
}

Status DSparkDrafter::flush_context() {
  if (pending_rows_ == 0) return Status::ok();
  TapRows rows;
  rows.n_rows = pending_rows_;
  rows.n_embd = model_->config().hidden_size;
  for (const auto& t : pending_taps_) rows.taps.push_back(t.data());
  const Status st = model_->append_context(ctx_, s_, rows);
  pending_rows_ = 0;
  for (auto& t : pending_taps_) t.clear();
  return st;
}

// Open while the gated rounds' tokens per ms beat plain decoding, after a few rounds of evidence;
// closed, it opens for one probe round after `backoff` skipped rounds (doubling up to a cap).
bool DSparkDrafter::gate_open(double serial_rate) {
  constexpr int64_t kGateWarmup = 4;  // rounds of evidence before the gate may close
  constexpr int kGateMaxBackoff = 16;
  if (gate_.n < kGateWarmup || gate_.tokens / gate_.ms >= serial_rate) {
    gate_.backoff = 1;
    gate_.skipped = 0;
    return true;
  }
  if (++gate_.skipped > gate_.backoff) {
    gate_.skipped = 0;
    gate_.backoff = std::min(2 * gate_.backoff, kGateMaxBackoff);
    ++gate_probes_;
    return true;
  }
  ++gate_skips_;
  return false;
}

nlohmann::json DSparkDrafter::stats() const {
  const MarkovFastPathStats& f = markov_.stats();
  nlohmann::json j = {{"markov_fast_path", {{"slots", f.slots}, {"hits", f.hits}, {"fallbacks", f.fallbacks},
                                            {"hit_rate", f.hit_rate()}, {"macs_full", f.macs_full},
                                            {"macs_done", f.macs_done}, {"macs_saved", f.macs_saved()}}},
                      {"draft_rounds", rounds_}, {"backbone_rounds", backbone_rounds_}};
  if (opt_.copy) j["copy_head"] = copy_.stats();
  else j["copy_head_shadow"] = copy_.stats()["shadow"];
  // How the network's calibrated confidences compared with what the target accepted (all requests).
  j["network_calibration"] = {{"evaluated", all_evaluated_}, {"predicted", all_predicted_}, {"accepted", all_accepted_}};
  if (opt_.schedule && opt_.backbone_gate)
    j["backbone_gate"] = {{"rounds_skipped", gate_skips_}, {"probes", gate_probes_}, {"gated_rounds", gate_rounds_}};
  return j;
}

// Backbone over the whole block (γ rows attend to each other) and base logits for n_rows rows;
// updates the running mean of its cost.
void DSparkDrafter::run_backbone(int32_t anchor, int n_rows) {
  const auto t0 = std::chrono::steady_clock::now();
  // Block inputs: [anchor, MASK...], or the lookup chain from the anchor (E6).
  const DSparkConfig& c = model_->config();
  if (c.lookup_max_ngram > 0) {
    lookup_chain(history_, anchor, (int)c.block_size, c.lookup_max_ngram, c.lookup_min_ngram, c.mask_token_id, &inputs_);
  } else {
    inputs_.assign((size_t)c.block_size, c.mask_token_id);
    inputs_[0] = anchor;
  }
  model_->backbone(ctx_, s_, inputs_.data(), hidden_.data());
  model_->base_logits(s_, hidden_.data(), n_rows, base_.data());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  last_backbone_ms_ = ms;
  ++backbone_rounds_;
  draft_ms_ += (ms - draft_ms_) / (double)std::min<int64_t>(backbone_rounds_, 32);
  backbone_ran_ = true;
}

// The network's greedy token at slot k (Markov state prepared for it), without touching the
// drafter's outputs or the fast path's counters; for the shadow statistics only.
int32_t DSparkDrafter::shadow_argmax(int k) {
  const int64_t vd = model_->draft_vocab();
  const float* u_row = base_.data() + (size_t)k * (size_t)vd;
  float* s_row = scores_.data() + (size_t)k * (size_t)vd;
  int64_t j;
  if (markov_.enabled()) {
    const MarkovFastPathStats keep = markov_.stats();
    bool full = true;
    j = markov_.argmax(s_.mm, u_row, opt_.markov_fast_path, s_row, &full);
    markov_.restore_stats(keep);
  } else {
    j = kernels::argmax(u_row, vd);
  }
  return model_->to_target(j);
}

// z_k = w·[h_k ; W1[prev_k]] + b (or w·h_k + b).
float DSparkDrafter::confidence_logit(int slot, const float* w1_prev) const {
  const DSparkConfig& c = model_->config();
  const DSparkWeights& w = model_->weights();
  const float* h = hidden_.data() + (size_t)slot * (size_t)c.hidden_size;
  double z = w.conf_b;
  for (int64_t i = 0; i < c.hidden_size; ++i) z += (double)w.conf_w[(size_t)i] * h[i];
  if (c.confidence_with_markov)
    for (int64_t i = 0; i < c.markov_rank; ++i) z += (double)w.conf_w[(size_t)(c.hidden_size + i)] * w1_prev[i];
  return (float)z;
}

CopyProposal DSparkDrafter::propose_copy() const {
  const CopyProposal lookup = copy_.propose();
  // Answers already served: taken over the request's own match when its kind is estimated better
  // (a long agreement with a stored answer beats a 3-token lookup; a short one does not).
  if (answers_ && cache_ok_ && copy_.has_cache_kinds()) {
    const int len = answers_->propose(copy_.context(), 1, &cache_out_);
    const int kind = copy_.cache_kind(len);
    if (kind >= 0 && !cache_out_.empty() && (lookup.token < 0 || copy_.confidence(kind) > copy_.confidence(lookup.n)))
      return CopyProposal{cache_out_[0], kind};
  }
  if (!opt_.index || !copy_.has_index_kinds() || lookup.n >= opt_.index_below) return lookup;
  const SuffixProposal p = opt_.index->propose(copy_.context(), opt_.index_query, 1);
  if (p.tokens.empty() || p.context_count == 0) return lookup;
  const int kind = copy_.index_kind((double)p.support[0] / (double)p.context_count);
  return kind < 0 ? lookup : CopyProposal{p.tokens[0], kind};
}

// Copies of the answers already served only, each estimated at >= kSureAcceptance; no backbone pass.
// (The request's own lookup copies are left to the governor: its plain decision already weighed them.)
Status DSparkDrafter::sure_draft(int32_t pending, int n, DraftResult* out) {
  if (!opt_.copy || opt_.copy_first) return Status::ok();
  copy_.start_draft(pending);
  for (int k = 0; k < n; ++k) {
    const CopyProposal cp = propose_copy();
    if (cp.token < 0 || !copy_.is_cache_kind(cp.n)) break;
    const double conf = copy_.confidence(cp.n);
    if (conf < kSureAcceptance) break;
    out->tokens.push_back(cp.token);
    out->confidence.push_back((float)conf);
    slot_conf_.push_back(-1);
    copy_.push(cp.token, cp.n, cp.n, -1);
  }
  // No network rows this draft (last_logits() has none); the slots may exceed the block.
  std::fill(scores_valid_.begin(), scores_valid_.end(), 0);
  last_slots_ = std::min<int>((int)out->tokens.size(), (int)scores_valid_.size());
  backbone_ran_ = false;  // (not counted in rounds_: the stepper may still draft the round normally)
  return Status::ok();
}

Status DSparkDrafter::draft(const DraftRequest& req, DraftResult* out) {
  out->tokens.clear();
  out->confidence.clear();
  conf_logits_.clear();
  slot_conf_.clear();
  last_slots_ = 0;
  const int n = std::min(gamma_, req.max_n);
  const bool sampled = req.sampler.temperature > 0.0f;
  if (!sampled) out->q.clear();
  if (n <= 0) {
    out->q.clear();
    return Status::ok();
  }
  // The answers already served are other requests' text: greedy rounds only, so a seeded sampled
  // request drafts (and samples) the same whatever the server answered before.
  cache_ok_ = !sampled;
  // Sure drafts are copies (no network pass), so they may run past the block.
  if (req.sure_only) return sure_draft(req.pending, sampled ? 0 : std::min(req.max_n, kMaxSureGamma), out);
  if (req.pos != context_len())
    return Status::error("dspark drafter: draft at position " + std::to_string(req.pos) + ", but the drafter context has " +
                         std::to_string(context_len()) + " rows");
  DSPARK_RETURN_IF_ERROR(flush_context());
  if (sampled && !req.rng) return Status::error("dspark drafter: temperature > 0 needs an rng");
  const DSparkConfig& c = model_->config();
  if (req.pending < 0 || req.pending >= c.vocab_size)
    return Status::error("dspark drafter: anchor token " + std::to_string(req.pending) + " is outside the vocabulary");

  const int64_t vd = model_->draft_vocab(), H = c.hidden_size;
  ++rounds_;
  backbone_ran_ = false;
  copy_.use_sampled_priors(sampled);
  // Scheduler state (Algorithm 1): expected tokens 1 + Σ a_j over the cost of verifying 1 + ℓ
  // tokens plus the backbone's cost once it has run.
  // Sampled requests (and greedy ones under static_costs) decide from constants (start-up tables),
  // greedy ones otherwise from the online estimates.
  const bool constants = sampled || opt_.static_costs;
  const std::vector<double>& vms = constants ? opt_.verify_ms : verify_ms_;
  const double bb_ms = constants && opt_.draft_ms > 0 ? opt_.draft_ms : draft_ms_;
  const bool schedule = opt_.schedule && (int64_t)vms.size() >= (int64_t)n + 2;
  const bool gated = schedule && opt_.backbone_gate;
  bool gate_round = false;  // the backbone ran from slot 0 under the gate: commit() scores the round
  // 1. Backbone over the block, now (no copy head) or at the first slot the copy head cannot fill.
  if (!opt_.copy) {
    if (gated && !gate_open(1.0 / vms[1])) {
      out->q.clear();
      return Status::ok();  // nothing drafted: the round verifies the anchor alone
    }
    run_backbone(req.pending, n);
    gate_round = gated;
  }
  // With the copy head off it still proposes (one lookup per slot, microseconds against a verify
  // forward of milliseconds), so stats() can say what it would have drafted at the network's slots.
  copy_.start_draft(req.pending);
  auto draft_cost = [&] { return backbone_ran_ ? bb_ms : 0.0; };
  double surv = 1.0, expected = 1.0, best_rate = schedule ? 1.0 / (draft_cost() + vms[1]) : 0.0;

  // 2-4. Sequential pass; the confidence of slot k uses h_k and W1[prev_k], known before drawing.
  const bool want_conf = c.confidence && (opt_.threshold > 0.0f || opt_.report_confidence || schedule);
  markov_.reset();
  std::fill(scores_valid_.begin(), scores_valid_.end(), 0);
  if (sampled) out->q.resize((size_t)n);
  int32_t prev = req.pending;
  int taken = 0;
  double net_conf = -1;  // calibrated c_k of the network slot being decided (-1: none computed)
  // Cost-aware: a backbone pass at slot k pays if the drafter's slots, as accepted so far, are
  // expected to raise the rate (its cost is known from earlier rounds).
  auto backbone_pays = [&](int k) {
    const double a = surv * copy_.schedule_confidence(0);
    return (expected + a) / (bb_ms + vms[(size_t)k + 2]) > best_rate;
  };
  for (int k = 0; k < n; ++k) {
    const CopyProposal seen = propose_copy();  // the copy head's candidate, taken or not
    CopyProposal cp = opt_.copy ? seen : CopyProposal{};
    const float* h_k = hidden_.data() + (size_t)k * (size_t)H;
    if (cp.token >= 0 && !opt_.copy_only && !opt_.copy_first &&
        copy_.schedule_confidence(cp.n) < copy_.schedule_confidence(0)) {
      // The network is expected to beat this copy: it takes the slot if its pass has run or pays.
      if (backbone_ran_ || !schedule || backbone_pays(k)) cp = CopyProposal{};
    }
    if (cp.token < 0 && opt_.copy_only) break;  // the copy head alone: no network slots
    if (cp.token < 0 && !backbone_ran_) {
      if (schedule && !backbone_pays(k)) break;
      if (gated && k == 0 && !gate_open(1.0 / vms[1])) break;
      run_backbone(req.pending, n);
      gate_round = gated && k == 0;
      // Bring the Markov state up to slot k (the RNN head's state runs through every slot).
      markov_.reset();
      for (int i = 0; i < k && markov_.enabled(); ++i)
        markov_.prepare(i == 0 ? req.pending : out->tokens[(size_t)i - 1], hidden_.data() + (size_t)i * (size_t)H, s_.mm);
    }
    if (cp.token >= 0) {
      // Copied slot: c_k is the copy head's estimate; the RNN Markov state still advances.
      if (backbone_ran_ && markov_.enabled()) markov_.prepare(prev, h_k, s_.mm);
      // Shadow (diagnostics): what the network would have drafted here, when its pass has run.
      const int32_t alt = backbone_ran_ && !sampled ? shadow_argmax(k) : -1;
      const double conf = copy_.confidence(cp.n);
      out->confidence.push_back((float)conf);
      if (opt_.threshold > 0.0f && conf < opt_.threshold) break;
      if (schedule) {
        const double a = surv * copy_.schedule_confidence(cp.n);
        const double rate = (expected + a) / (draft_cost() + vms[(size_t)k + 2]);
        if (!(rate > best_rate)) break;
        best_rate = rate;
        expected += a;
        surv = a;
      }
      if (sampled) out->q[(size_t)k] = {{cp.token, 1.0f}};
      prev = cp.token;
      out->tokens.push_back(prev);
      slot_conf_.push_back(-1);
      copy_.push(prev, cp.n, cp.n, alt);
      taken = k + 1;
      continue;
    }
    if (markov_.enabled()) markov_.prepare(prev, h_k, s_.mm);
    net_conf = -1;
    if (want_conf) {
      // confidence_with_markov implies r > 0 (DSparkConfig), so W1[prev] is prepared.
      const float* w1 = c.confidence_with_markov ? markov_.w1_row() : nullptr;
      const float z = confidence_logit(k, w1);
      const float conf = sigmoid(z);
      conf_logits_.push_back(z);
      out->confidence.push_back(conf);
      if (opt_.threshold > 0.0f && conf < opt_.threshold) break;  // non-anticipating: uses slots <= k only
      const float T = (size_t)k < c.sts_temperatures.size() ? c.sts_temperatures[(size_t)k] : 1.0f;
      net_conf = (double)sigmoid(z / T);  // calibrated (STS)
      if (schedule) {
        const double a = surv * net_conf;
        const double rate = (expected + a) / (draft_cost() + vms[(size_t)k + 2]);
        if (!(rate > best_rate)) break;  // first non-improvement ends the scan
        best_rate = rate;
        expected += a;
        surv = a;
      }
    }
    const float* u_row = base_.data() + (size_t)k * (size_t)vd;
    float* s_row = scores_.data() + (size_t)k * (size_t)vd;
    int64_t j;
    if (!sampled) {
      bool full = true;
      if (markov_.enabled()) {
        j = markov_.argmax(s_.mm, u_row, opt_.markov_fast_path, s_row, &full);
      } else {
        std::memcpy(s_row, u_row, (size_t)vd * 4);
        j = kernels::argmax(s_row, vd);
      }
      scores_valid_[(size_t)k] = full;
    } else {
      // s_k = U_k + bias_k; draw from the request's sampler over s_k; q = that distribution (d2t-mapped).
      if (markov_.enabled()) {
        markov_.full_bias(s_.mm, s_row);
        for (int64_t v = 0; v < vd; ++v) s_row[v] += u_row[v];
      } else {
        std::memcpy(s_row, u_row, (size_t)vd * 4);
      }
      scores_valid_[(size_t)k] = 1;
      // The request's sampler over the draft vocabulary (temperature, top-k, top-p, min-p), so
      // drafts come from where the target will sample; q is reported in target ids.
      draft_row_.build(req.sampler, s_row, vd);
      j = draft_row_.draw(*req.rng);
      draft_row_.to_list(&draft_list_);
      SparseDist& q = out->q[(size_t)k];
      q.clear();
      for (const sample::TokenProb& tp : draft_list_) q.emplace_back(model_->to_target(tp.id), tp.p);
    }
    prev = model_->to_target(j);
    out->tokens.push_back(prev);
    slot_conf_.push_back(net_conf);
    copy_.push(prev, 0, seen.n, seen.token);
    taken = k + 1;
  }
  last_slots_ = std::max<int>(taken, (int)out->confidence.size());
  if (sampled) out->q.resize((size_t)taken);
  if (gate_round) {
    gate_.pending = true;
    gate_.pending_ms = bb_ms + vms[std::min(vms.size() - 1, out->tokens.size() + 1)];
  }
  return Status::ok();
}

}  // namespace dspark::speculative
