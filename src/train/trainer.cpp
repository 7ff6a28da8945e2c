#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "train/draft_net.h"
#include "train/heldout_result.h"
#include "train/sts.h"

namespace dspark::train {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double lr_at(const TrainerOptions& o, int64_t step) {
  const double warm = std::max(1.0, o.warmup * (double)o.steps);
  if ((double)step < warm) return o.lr * (double)(step + 1) / warm;
  const double t = std::min(1.0, ((double)step - warm) / std::max(1.0, (double)o.steps - warm));
  return o.lr * (o.min_lr_frac + (1.0 - o.min_lr_frac) * 0.5 * (1.0 + std::cos(3.141592653589793 * t)));
}

}  // namespace

nlohmann::json heldout_json(const HeldoutResult& r) {
  nlohmann::json by_pos = nlohmann::json::array();
  for (size_t i = 0; i < r.drafted_at.size(); ++i)
    by_pos.push_back(r.drafted_at[i] ? (double)r.accepted_at[i] / (double)r.drafted_at[i] : 0.0);
  return {{"sequences", r.sequences}, {"rounds", r.rounds}, {"tau", r.tau()}, {"acceptance", r.acceptance()},
          {"accept_by_pos", by_pos}, {"drafter_ms_per_round", r.ms_per_round()}};
}

Result<TrainSummary> train_drafter(const TrainerOptions& o, const model::Model& target, const Dataset& ds,
                                   ThreadPool* pool, const std::function<void(const nlohmann::json&)>& on_log) {
  const model::ModelConfig& tc = target.config();
  if (!target.weights().tied_output)
    return Status::error(target.file().path() + ": the target has a separate output.weight; DSpark training "
                         "reads its LM head rows from token_embd and needs a tied LM head");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return Status::error(o.out_dir + ": " + ec.message());
  const std::string state_path = (fs::path(o.out_dir) / "state.safetensors").string();
  const std::string drafter_dir = (fs::path(o.out_dir) / "drafter").string();

  // Draft vocabulary: from the data, or the saved state's on resume.
  std::vector<int32_t> d2t;
  int64_t start_step = 0;
  double coverage = 0;
  if (o.resume && fs::exists(state_path)) {
    auto hdr = read_train_state_header(state_path);
    if (!hdr) return hdr.status();
    d2t = hdr->second;
    auto meta = nlohmann::json::parse(hdr->first, nullptr, false);
    if (meta.is_discarded() || !meta.contains("step")) return Status::error(state_path + ": bad train_meta");
    start_step = meta["step"].get<int64_t>();
  } else {
    d2t = ds.top_tokens(o.draft_vocab, tc.n_vocab, &coverage);
  }
  auto cols = ds.tap_columns(o.arch.taps);
  if (!cols) return cols.status();
  DraftInit init;
  if (o.qk_init) init.qk_norm = (float)std::pow((double)tc.head_dim, -0.25);
  const float* out_norm = target.weights().output_norm;
  double out_ss = 0;
  for (int64_t e = 0; e < tc.n_embd; ++e) out_ss += (double)out_norm[e] * out_norm[e];
  const double out_rms = std::sqrt(out_ss / (double)tc.n_embd);
  const double ls_init = o.logit_scale_init > 0 ? o.logit_scale_init : kLogitScaleInitFraction * out_rms;
  init.log_logit_scale = (float)std::log(ls_init);
  init.logit_scale_lr_mult = (float)o.logit_scale_lr_mult;
  if (o.norm_init == "target") {
    const float* w = out_norm;
    const double rms = out_rms;
    init.norm.resize((size_t)tc.n_embd);
    for (int64_t e = 0; e < tc.n_embd; ++e) init.norm[(size_t)e] = (float)(w[e] / rms);
  } else if (o.norm_init != "unit") {
    return Status::error("norm init must be unit or target (got '" + o.norm_init + "')");
  }
  DraftArch arch = o.arch;
  arch.target_type = tc.arch;
  auto pr = init_draft_params(arch, tc.n_layer, tc.n_embd, tc.n_head, tc.head_dim, tc.n_ff, tc.n_vocab,
                              /*mask_token_id=*/4, d2t, o.seed, init);
  if (!pr) return pr.status();
  DraftParams& p = pr.value();
  if (start_step > 0) {
    auto st = load_train_state(p, state_path);
    if (!st) return st.status();
  } else if (o.tap_norm) {
    p.tap_scale = ds.tap_inv_rms(*cols, o.tap_stat_seqs, o.seed);
  }
  const FrozenTables frozen = make_frozen_tables(target.weights().token_embd, p.d2t, tc.n_embd);
  std::ofstream log(fs::path(o.out_dir) / "train_log.jsonl", std::ios::app);
  auto emit = [&](const nlohmann::json& j) {
    log << j.dump() << "\n";
    log.flush();
    if (on_log) on_log(j);
  };
  if (start_step == 0)
    emit({{"event", "start"}, {"command", o.command}, {"params", p.n_params()}, {"draft_vocab", (int64_t)p.d2t.size()},
          {"draft_vocab_coverage", coverage}, {"train_sequences", (int64_t)ds.train().size()},
          {"train_response_tokens", ds.train_response_tokens()}, {"heldout_sequences", (int64_t)ds.heldout().size()},
          {"config", nlohmann::json::parse(p.config_json)}});
  else
    emit({{"event", "resume"}, {"step", start_step}, {"command", o.command}});

  TrainSummary sum;
  sum.drafter_dir = drafter_dir;
  DraftNet net(p, frozen, o.loss_weights);
  TrainBatch batch;
  const auto t_start = Clock::now();
  LossTerms acc;
  int64_t acc_n = 0;
  std::vector<Param*> params = p.all();
  auto checkpoint = [&](int64_t step_done) -> Status {
    nlohmann::json meta = {{"step", step_done}, {"seed", o.seed}, {"command", o.command}};
    DSPARK_RETURN_IF_ERROR(save_train_state(p, state_path, meta.dump()));
    nlohmann::json extra = {{"dspark_training", {{"steps", step_done}, {"command", o.command},
                                                  {"draft_vocab_coverage", coverage}}}};
    DSPARK_RETURN_IF_ERROR(export_checkpoint(p, drafter_dir, extra.dump()));
    // Nominal training data seen: every step draws batch_seqs x anchors blocks of γ slots (fewer when
    // a sequence has fewer anchor positions).
    nlohmann::json rec = {{"event", "checkpoint"}, {"step", step_done},
                          {"blocks_seen", step_done * o.batch_seqs * o.anchors}};
    if (o.eval_seqs > 0 && o.heldout && !ds.heldout().empty()) {
      auto ev = o.heldout(drafter_dir);
      if (!ev) return ev.status();
      rec["heldout"] = heldout_json(*ev);
      // STS on the same rollouts, written into the exported config (the scheduler reads it).
      const StsFit fit = fit_sts(ev->conf_logits, ev->accepted_len, (int)p.cfg.block_size);
      rec["heldout"]["sts"] = {{"temperatures", fit.temperatures}, {"ece_before", fit.ece_before},
                               {"ece_after", fit.ece_after}};
      nlohmann::json patch = {{"dspark_sts_temperatures", fit.temperatures},
                              {"dspark_training", {{"heldout", rec["heldout"]}}}};
      DSPARK_RETURN_IF_ERROR(patch_checkpoint_config(drafter_dir, patch.dump()));
      sum.last_eval = rec["heldout"];
    }
    emit(rec);
    return Status::ok();
  };

  for (int64_t step = start_step; step < o.steps; ++step) {
    Rng rng(o.seed * 0x9E3779B97F4A7C15ull + (uint64_t)step);  // resumable without stored RNG state
    BlockInputs bin = block_inputs_of(p.cfg);
    bin.copyable_weight = o.copyable_weight;
    ds.make_batch(rng, o.batch_seqs, o.anchors, p.cfg.block_size, *cols, &batch, nullptr, bin);
    scale_taps(p.tap_scale, &batch);
    for (Param* q : params) std::fill(q->g.begin(), q->g.end(), 0.0f);
    const LossTerms lt = net.run(batch, true);
    if (!std::isfinite(lt.loss)) return Status::error("training diverged at step " + std::to_string(step) + " (loss not finite)");
    // Global-norm clipping, then AdamW.
    double gn2 = 0;
    for (Param* q : params)
      for (float gv : q->g) gn2 += (double)gv * gv;
    const double gn = std::sqrt(gn2);
    const float clip = gn > o.clip && o.clip > 0 ? (float)(o.clip / gn) : 1.0f;
    const double lr = lr_at(o, step);
    const double bc1 = 1.0 - std::pow(o.beta1, (double)(step + 1)), bc2 = 1.0 - std::pow(o.beta2, (double)(step + 1));
    for (Param* q : params)
      for (size_t i = 0; i < q->w.size(); ++i) {
        const float gv = q->g[i] * clip;
        q->m[i] = (float)(o.beta1 * q->m[i] + (1.0 - o.beta1) * gv);
        q->v[i] = (float)(o.beta2 * q->v[i] + (1.0 - o.beta2) * (double)gv * gv);
        const double upd = (q->m[i] / bc1) / (std::sqrt(q->v[i] / bc2) + o.adam_eps);
        q->w[i] -= (float)(lr * q->lr_mult * (upd + (q->decay ? o.weight_decay * q->w[i] : 0.0)));
      }
    // Running means for the log.
    if (acc_n == 0) { acc = lt; } else {
      acc.loss += lt.loss; acc.ce += lt.ce; acc.l1 += lt.l1; acc.bce += lt.bce; acc.slots += lt.slots;
      for (size_t k = 0; k < acc.count.size(); ++k) {
        acc.accept_sum[k] += lt.accept_sum[k]; acc.top1_sum[k] += lt.top1_sum[k]; acc.count[k] += lt.count[k];
      }
    }
    ++acc_n;
    sum.last_loss = lt.loss;
    sum.steps_done = step + 1;
    if ((step + 1) % o.log_every == 0 || step + 1 == o.steps) {
      nlohmann::json acc_pos = nlohmann::json::array(), top1_pos = nlohmann::json::array();
      for (size_t k = 0; k < acc.count.size(); ++k) {
        acc_pos.push_back(acc.count[k] ? acc.accept_sum[k] / (double)acc.count[k] : 0.0);
        top1_pos.push_back(acc.count[k] ? acc.top1_sum[k] / (double)acc.count[k] : 0.0);
      }
      const double sec = std::chrono::duration<double>(Clock::now() - t_start).count();
      emit({{"event", "train"}, {"step", step + 1}, {"lr", lr}, {"loss", acc.loss / acc_n}, {"ce", acc.ce / acc_n},
            {"l1", acc.l1 / acc_n}, {"bce", acc.bce / acc_n}, {"grad_norm", gn}, {"cstar_by_pos", acc_pos},
            {"top1_by_pos", top1_pos}, {"logit_scale", p.logit_scale()}, {"seconds", sec}, {"steps_per_s", (double)(step + 1 - start_step) / sec}});
      acc_n = 0;
    }
    if ((step + 1) % o.ckpt_every == 0 || step + 1 == o.steps) DSPARK_RETURN_IF_ERROR(checkpoint(step + 1));
  }
  if (start_step >= o.steps) DSPARK_RETURN_IF_ERROR(checkpoint(start_step));
  sum.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  return sum;
}

}  // namespace dspark::train
