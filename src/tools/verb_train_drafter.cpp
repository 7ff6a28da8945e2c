// dspark train-drafter: trains a DSpark drafter for the target on regen shards (src/train/).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/loaded_model.h"
#include "eval/heldout_eval.h"
#include "tools/verbs.h"
#include "train/gemm.h"
#include "train/trainer.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory
using namespace dspark::eval;     // A/B harness, bench --spec, held-out evaluation

namespace {

struct TrainFlags {
  std::string model_spec = "gemma3-270m", cache, taps_s = "1,7,13";
  std::vector<std::string> data;
  train::TrainerOptions o;  // filled from the numbers below by apply_train_flags
  int64_t layers = 1, rank = 64, block = 7, vocab = o.draft_vocab, steps = o.steps, bseqs = o.batch_seqs;
  int64_t anchors = o.anchors, seed = 1, log_every = o.log_every, ckpt = o.ckpt_every, eval_seqs = o.eval_seqs;
  int64_t heldout_mod = 50, threads = ThreadPool::default_threads(), inter = 0, lookup_max = 0, lookup_min = 1;
  double lr = o.lr, warmup = o.warmup, wd = o.weight_decay, clip = o.clip;
  double copyable_w = 1.0, ce_w = train::LossWeights{}.ce, l1_w = train::LossWeights{}.l1;
  std::string setup = "fixed", tap_norm, qk_init, norm_init;
  double ls_init = -1, ls_mult = -1;
  bool resume = false, json = false;
};

// The drafter's shape and what it reads.
void add_arch_flags(Args& args, TrainFlags* f) {
  add_model_flags(args, &f->model_spec, &f->cache);
  args.add_list("--data", &f->data, "regen output folder (repeatable)");
  args.add("--out,-o", &f->o.out_dir, "output folder (required)");
  args.add("--taps", &f->taps_s, "target layers the drafter reads (a subset of the regen taps)");
  args.add("--layers", &f->layers, "drafter layers", 1, 8);
  args.add("--lookup-input", &f->lookup_max, "prompt-lookup guesses as the block's inputs, n-grams up to N (0 = off;\n"
           "config extension dspark_lookup_input): the network sees what prompt lookup knows", 0, 16);
  args.add("--lookup-min-ngram", &f->lookup_min, "shortest n-gram the lookup input matches", 1, 16);
  args.add("--markov-rank", &f->rank, "Markov head rank (0 = none)", 0, 1024);
  args.add("--block", &f->block, "block size (gamma)", 1, 16);
  args.add("--intermediate", &f->inter, "MLP width (0 = the target's)", 0, 65536);
  args.add("--draft-vocab", &f->vocab, "draft vocabulary size", 64, 262144);
  args.add("--setup", &f->setup, "fixed (default: tap normalisation, q/k init, learned logit scale) or legacy\n"
                                 "(the original: raw taps, unit q/k norms, unit final norm, fixed scale)");
  args.add("--tap-norm", &f->tap_norm, "on|off: per-dimension tap RMS normalisation, folded into fc at export");
  args.add("--qk-init", &f->qk_init, "on|off: q/k norm weights head_dim^-1/4 (attention logits ~unit at init)");
  args.add("--norm-init", &f->norm_init, "unit|target: final norm init (target = the target's output_norm shape)");
  args.add("--logit-scale-init", &f->ls_init, "initial logit scale (folded into norm.weight at export; default 0.148 x the RMS\n"
                                             "of the target's output_norm: 8.0 on Gemma 3 270M, 0.27 on SmolLM2-135M)", 1e-3, 1e4);
  args.add("--logit-scale-lr-mult", &f->ls_mult, "learning-rate multiplier of the log logit scale (0 = frozen)", 0.0, 1e4);
}

// The loss, the optimizer, checkpoints and logging.
void add_optim_flags(Args& args, TrainFlags* f) {
  args.add("--steps", &f->steps, "optimizer steps", 1, 100000000);
  args.add("--batch-seqs", &f->bseqs, "sequences per batch", 1, 4096);
  args.add("--anchors", &f->anchors, "anchor blocks per sequence", 1, 4096);
  args.add("--copyable-weight", &f->copyable_w, "loss weight of slots prompt lookup already drafts right (a match of\n"
           ">= 2 tokens followed by the label); < 1 trains the network for the slots the copy head cannot fill", 0.0, 1.0);
  args.add("--ce-weight", &f->ce_w, "weight of the cross-entropy on the answer's next token (greedy answers: the\n"
           "target's argmax, what T = 0 acceptance needs)", 0.0, 100.0);
  args.add("--l1-weight", &f->l1_w, "weight of the L1 distance to the target's distribution (the paper's TV term,\n"
           "what T = 1 acceptance needs)", 0.0, 100.0);
  args.add("--lr", &f->lr, "peak learning rate", 1e-7, 1.0);
  args.add("--warmup", &f->warmup, "warmup share of the steps", 0.0, 1.0);
  args.add("--weight-decay", &f->wd, "AdamW weight decay", 0.0, 1.0);
  args.add("--clip", &f->clip, "global gradient-norm clip (0 = off)", 0.0, 1e6);
  args.add("--seed", &f->seed, "initialization and batch seed", 0, INT64_MAX);
  args.add("--log-every", &f->log_every, "steps per log line", 1, 1000000);
  args.add("--ckpt-every", &f->ckpt, "steps per checkpoint + held-out evaluation", 1, 100000000);
  args.add("--eval-seqs", &f->eval_seqs, "held-out greedy sequences per evaluation (0 = skip)", 0, 1000000);
  args.add("--heldout-mod", &f->heldout_mod, "hold out prompts with index % N == 0", 2, 1000000);
  add_threads_flag(args, &f->threads);
  args.add_flag("--resume", &f->resume, "continue from DIR/state.safetensors");
  add_json_flag(args, &f->json, "print the final summary as JSON");
}

// --setup and its overrides (--tap-norm, --qk-init, --norm-init, --logit-scale-*).
Status apply_setup(const TrainFlags& f, train::TrainerOptions* o) {
  if (f.setup == "legacy") {
    o->tap_norm = false;
    o->qk_init = false;
    o->norm_init = "unit";
    o->logit_scale_init = 1.0;
    o->logit_scale_lr_mult = 0.0;
  } else if (f.setup != "fixed") {
    return Status::error("--setup must be fixed or legacy (got '" + f.setup + "')");
  }
  auto on_off = [](const std::string& v, bool* out) {
    if (v.empty()) return true;
    if (v != "on" && v != "off") return false;
    *out = v == "on";
    return true;
  };
  if (!on_off(f.tap_norm, &o->tap_norm)) return Status::error("--tap-norm must be on or off");
  if (!on_off(f.qk_init, &o->qk_init)) return Status::error("--qk-init must be on or off");
  if (!f.norm_init.empty()) {
    if (f.norm_init != "unit" && f.norm_init != "target") return Status::error("--norm-init must be unit or target");
    o->norm_init = f.norm_init;
  }
  if (f.ls_init > 0) o->logit_scale_init = f.ls_init;
  if (f.ls_mult >= 0) o->logit_scale_lr_mult = f.ls_mult;
  return Status::ok();
}

// The trainer's options from the flags (taps already checked against the target).
Status apply_train_flags(TrainFlags& f, const std::vector<int>& taps) {
  train::TrainerOptions& o = f.o;
  DSPARK_RETURN_IF_ERROR(apply_setup(f, &o));
  if (f.lookup_max > 0 && f.lookup_min > f.lookup_max) return Status::error("--lookup-min-ngram exceeds --lookup-input");
  o.arch = train::DraftArch{taps, f.layers, f.rank, f.block, f.inter, (int)f.lookup_max, (int)f.lookup_min};
  o.draft_vocab = f.vocab;
  o.steps = f.steps;
  o.batch_seqs = f.bseqs;
  o.anchors = f.anchors;
  o.copyable_weight = (float)f.copyable_w;
  o.loss_weights.ce = f.ce_w;
  o.loss_weights.l1 = f.l1_w;
  o.lr = f.lr;
  o.warmup = f.warmup;
  o.weight_decay = f.wd;
  o.clip = f.clip;
  o.seed = (uint64_t)f.seed;
  o.log_every = f.log_every;
  o.ckpt_every = f.ckpt;
  o.eval_seqs = f.eval_seqs;
  o.resume = f.resume;
  return Status::ok();
}

// The regen shards, checked against the target and the taps.
Result<train::Dataset> open_data(const TrainFlags& f, const model::ModelConfig& tc, const std::vector<int>& taps) {
  for (size_t i = 0; i < taps.size(); ++i)
    if (taps[i] < -1 || taps[i] >= tc.n_layer - 1 || (i && taps[i] <= taps[i - 1]))
      return Status::error("--taps: layer ids must be strictly increasing in -1 .. " + std::to_string(tc.n_layer - 2) +
                           " for this " + std::to_string(tc.n_layer) + "-layer target");
  auto ds = train::Dataset::open(f.data, tc.n_vocab, f.heldout_mod);
  if (!ds) return ds.status();
  if (ds->layout().n_embd != tc.n_embd)
    return Status::error("the regen shards have hidden width " + std::to_string(ds->layout().n_embd) + ", the target " +
                         std::to_string(tc.n_embd) + " (shards from another model?)");
  if (auto c = ds->tap_columns(taps); !c) return c.status();
  return ds;
}

// One line on stderr per training log event.
void print_train_event(const nlohmann::json& j) {
  const std::string ev = j.value("event", "");
  if (ev == "train") {
    std::fprintf(stderr, "step %6lld  loss %.4f  ce %.3f  l1 %.3f  bce %.3f  top1@1..: ", (long long)j["step"].get<int64_t>(),
                 j["loss"].get<double>(), j["ce"].get<double>(), j["l1"].get<double>(), j["bce"].get<double>());
    for (const auto& v : j["top1_by_pos"]) std::fprintf(stderr, "%.2f ", v.get<double>());
    std::fprintf(stderr, " scale %.1f  %.2f steps/s\n", j.value("logit_scale", 1.0), j["steps_per_s"].get<double>());
  } else if (ev == "checkpoint" && j.contains("heldout")) {
    const auto& h = j["heldout"];
    std::fprintf(stderr, "checkpoint %lld  held-out tau %.2f  acceptance %.3f  by position:", (long long)j["step"].get<int64_t>(),
                 h["tau"].get<double>(), h["acceptance"].get<double>());
    for (const auto& v : h["accept_by_pos"]) std::fprintf(stderr, " %.2f", v.get<double>());
    std::fprintf(stderr, "  drafter %.2f ms/round\n", h["drafter_ms_per_round"].get<double>());
  } else if (ev == "start") {
    std::fprintf(stderr, "train-drafter: %lld params, draft vocab %lld (covers %.1f%% of response tokens), %lld train seqs (%lld response tokens), %lld held out\n",
                 (long long)j["params"].get<int64_t>(), (long long)j["draft_vocab"].get<int64_t>(),
                 100.0 * j["draft_vocab_coverage"].get<double>(), (long long)j["train_sequences"].get<int64_t>(),
                 (long long)j["train_response_tokens"].get<int64_t>(), (long long)j["heldout_sequences"].get<int64_t>());
  }
}

}  // namespace

int verb_train_drafter(int argc, char** argv) {
  TrainFlags f;
  f.o.out_dir.clear();
  Args args("dspark train-drafter --data REGEN_DIR --out DIR [--taps 1,7,13] [--layers 1] [--steps N] [--resume]",
            "Trains a DSpark drafter (DeepSpec format) against the target on `dspark regen` shards: frozen\n"
            "target embedding and LM head (rows of the draft vocabulary, --draft-vocab most frequent response\n"
            "tokens), loss 0.1 CE + 0.9 L1 + 1.0 confidence BCE with slot weights exp(-(k-1)/4), AdamW with\n"
            "warmup + cosine decay. Every --ckpt-every steps: DIR/state.safetensors (for --resume),\n"
            "DIR/drafter/ (the checkpoint `dspark generate --draft-model` loads) and a held-out acceptance\n"
            "measured with the serving drafter. Log: DIR/train_log.jsonl.");
  add_arch_flags(args, &f);
  add_optim_flags(args, &f);
  const VerbError fail{"train-drafter"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (f.data.empty()) return fail("--data is required");
  if (f.o.out_dir.empty()) return fail("--out is required");
  auto taps = parse_int_list(f.taps_s, "--taps");
  if (!taps) return fail(taps.message());
  auto lm = load_model(f.model_spec, f.cache);
  if (!lm) return fail(lm.message());
  auto ds = open_data(f, lm->model->config(), *taps);
  if (!ds) return fail(ds.message());
  if (Status st = apply_train_flags(f, *taps); !st) return fail(st.message());
  for (int i = 0; i < argc; ++i) {
    if (i) f.o.command += ' ';
    f.o.command += argv[i];
  }
  train::gemm_set_threads((int)f.threads);
  ThreadPool pool((int)f.threads);
  f.o.heldout = [&](const std::string& drafter_dir) {
    return heldout_eval(drafter_dir, *lm->model, *ds, f.eval_seqs, 0, 0.0f, /*record_confidence=*/true, &pool);
  };
  auto res = train::train_drafter(f.o, *lm->model, *ds, &pool, print_train_event);
  if (!res) return fail(res.message(), 1);
  if (f.json) {
    nlohmann::json j = {{"steps", res->steps_done}, {"seconds", res->seconds}, {"loss", res->last_loss},
                        {"drafter", res->drafter_dir}, {"heldout", res->last_eval}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("train-drafter: %lld steps in %.0f s; drafter at %s\n", (long long)res->steps_done, res->seconds,
                res->drafter_dir.c_str());
  }
  return 0;
}

}  // namespace dspark::tools
