// dspark drafter-diag: diagnostics of a trained DSpark drafter on regen shards (issue #11): is the
// context path alive (teacher-forced accuracy with the context taps zeroed or shuffled), how sharp
// are the draft distributions next to the target's (entropy by slot), under- or over-fitting
// (train vs held-out), and the per-tap RMS table of the data (the scale the taps enter fc at).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "eval/heldout_eval.h"
#include "spec/spec_config.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/loaded_model.h"
#include "tools/verbs.h"
#include "train/checkpoint_params.h"
#include "train/diagnose.h"
#include "train/trainer.h"
#include "train/gemm.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

nlohmann::json stats_json(const train::SlotStats& s) {
  nlohmann::json j = {{"top1_by_pos", s.top1}, {"cstar_by_pos", s.cstar}, {"draft_entropy_by_pos", s.draft_entropy},
                      {"target_entropy_by_pos", s.target_entropy}, {"slots_by_pos", s.count}, {"loss", s.loss}};
  if (!s.top1_guessed.empty()) {
    j["top1_lookup_guessed_by_pos"] = s.top1_guessed;
    j["top1_lookup_unguessed_by_pos"] = s.top1_unguessed;
    j["slots_lookup_guessed_by_pos"] = s.count_guessed;
  }
  nlohmann::json bins = nlohmann::json::array();
  for (size_t b = 0; b < s.slot1_bin_count.size(); ++b)
    bins.push_back({{"target_top1_prob_below", train::kTargetConfidenceBins[b]}, {"slots", s.slot1_bin_count[b]},
                    {"draft_top1", s.slot1_bin_top1[b]}, {"target_top1_in_draft_vocab", s.slot1_bin_in_vocab[b]}});
  j["slot1_by_target_confidence"] = bins;
  return j;
}

void print_row(const char* split, const char* what, const std::vector<double>& v) {
  std::printf("| %-30s | %-22s |", split, what);
  for (double x : v) std::printf(" %5.3f |", x);
  std::printf("\n");
}

// --replay: heldout_eval (the trainer's checkpoint measurement) on any drafter folder.
int replay_heldout(const std::string& dir, const model::Model& target, const std::vector<std::string>& data,
                   int64_t heldout_mod, int64_t n_seqs, spec::DraftQuant draft_quant, int threads, bool json) {
  auto ds = train::Dataset::open(data, target.config().n_vocab, heldout_mod);
  if (!ds) {
    std::fprintf(stderr, "dspark drafter-diag: %s\n", ds.message().c_str());
    return kExitBadInput;
  }
  ThreadPool pool(threads);
  auto r = eval::heldout_eval(dir, target, *ds, n_seqs, 0, 0.0f, /*record_confidence=*/false, &pool,
                                spec::copy_bits_of_quant(draft_quant));
  if (!r) {
    std::fprintf(stderr, "dspark drafter-diag: %s\n", r.message().c_str());
    return kExitBadInput;
  }
  nlohmann::json j = train::heldout_json(*r);
  j["drafter"] = dir;
  j["draft_quant"] = spec::draft_quant_name(draft_quant);
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("drafter-diag --replay: %s (%s), %lld held-out greedy sequences, %lld rounds\n", dir.c_str(),
              draft_quant == spec::DraftQuant::kNone ? "as given" : (std::string(spec::draft_quant_name(draft_quant)) + " copies").c_str(),
              (long long)r->sequences, (long long)r->rounds);
  std::printf("tau %.3f  acceptance %.3f  by position:", r->tau(), r->acceptance());
  for (const auto& v : j["accept_by_pos"]) std::printf(" %.3f", v.get<double>());
  std::printf("  drafter %.2f ms/round\n", r->ms_per_round());
  return 0;
}

}  // namespace

int verb_drafter_diag(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache;
  std::vector<std::string> data;
  int64_t seqs = 32, anchors = 32, seed = 1, heldout_mod = 50, tap_seqs = 64, replay = 0;
  std::string draft_quant = "none";
  int64_t threads = ThreadPool::default_threads();
  bool json = false;
  Args args("dspark drafter-diag DRAFTER_DIR --data REGEN_DIR [--seqs 32] [--anchors 32] [--replay N [--draft-quant int8|int4]] [--json]",
            "Teacher-forced diagnostics of a DSpark drafter on regen shards (the target out of the loop):\n"
            "top-1 agreement with the target's token and c* (expected acceptance at T = 1) by slot on the\n"
            "held-out and the training split; the same on held-out with the context taps zeroed and shuffled\n"
            "across sequences (if nothing drops, the context path is dead); draft vs target entropy by slot;\n"
            "and the per-tap RMS table of the data.\n"
            "--replay N instead replays T = 0 speculative decoding with the serving drafter along N held-out\n"
            "greedy sequences (what train-drafter reports at its checkpoints), for any checkpoint, quantized\n"
            "ones included; --draft-quant int8 / int4 mounts the integer copies generate and serve use without AMX.");
  add_model_flags(args, &model_spec, &cache);
  args.add_list("--data", &data, "regen output folder (repeatable)");
  args.add("--seqs", &seqs, "sequences per split", 2, 100000);
  args.add("--anchors", &anchors, "anchor blocks per sequence", 1, 4096);
  args.add("--seed", &seed, "batch seed", 0, INT64_MAX);
  args.add("--heldout-mod", &heldout_mod, "held-out prompts: index % N == 0 (as train-drafter)", 2, 1000000);
  args.add("--tap-seqs", &tap_seqs, "training sequences for the tap RMS table", 1, 1000000);
  args.add("--replay", &replay, "held-out greedy sequences to replay with the serving drafter (0 = the teacher-forced "
           "diagnostics instead)", 0, 1000000);
  args.add("--draft-quant", &draft_quant, "--replay: none (the checkpoint as given), int8 or int4 (8- / 4-bit copies, as\n"
           "served without AMX: --draft-quant of generate)");
  add_threads_flag(args, &threads);
  add_json_flag(args, &json, "print the results as JSON");
  auto fail = [](const std::string& m, int code = kExitBadInput) {
    std::fprintf(stderr, "dspark drafter-diag: %s\n", m.c_str());
    return code;
  };
  if (Status st = args.parse(argc, argv, 2); !st) return fail(st.message());
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (args.positional().size() != 1) return fail("expected one drafter directory");
  if (data.empty()) return fail("--data REGEN_DIR is required");
  spec::DraftQuant quant = spec::DraftQuant::kNone;
  if (!spec::parse_draft_quant(draft_quant, &quant) || quant == spec::DraftQuant::kAuto)
    return fail("--draft-quant must be none, int8 or int4, got '" + draft_quant + "'");
  auto lm = load_model(model_spec, cache);
  if (!lm) return fail(lm.message());
  const model::ModelConfig& tc = lm->model->config();
  if (replay > 0) return replay_heldout(args.positional()[0], *lm->model, data, heldout_mod, replay, quant,
                                        (int)threads, json);
  auto p = train::load_checkpoint_params(args.positional()[0], tc);
  if (!p) return fail(p.message());
  auto ds = train::Dataset::open(data, tc.n_vocab, heldout_mod);
  if (!ds) return fail(ds.message());
  if (ds->heldout().empty()) return fail("the shards have no held-out sequences (--heldout-mod)");
  auto cols = ds->tap_columns(p->cfg.target_layer_ids);
  if (!cols) return fail(cols.message());
  train::gemm_set_threads((int)threads);
  const train::FrozenTables frozen = train::make_frozen_tables(lm->model->weights().token_embd, p->d2t, tc.n_embd);
  train::DraftNet net(*p, frozen);

  train::TrainBatch held, trn;
  Rng r1((uint64_t)seed), r2((uint64_t)seed + 1);
  const train::BlockInputs bin = train::block_inputs_of(p->cfg);
  ds->make_batch(r1, seqs, anchors, p->cfg.block_size, *cols, &held, &ds->heldout(), bin);
  ds->make_batch(r2, seqs, anchors, p->cfg.block_size, *cols, &trn, nullptr, bin);
  nlohmann::json out;
  const std::pair<const char*, train::TapAblation> held_runs[] = {
      {"heldout", train::TapAblation::kNone}, {"heldout", train::TapAblation::kZero}, {"heldout", train::TapAblation::kShuffle}};
  std::vector<std::pair<std::string, train::SlotStats>> rows;
  for (const auto& [split, ab] : held_runs)
    rows.emplace_back(std::string(split) + " / " + train::tap_ablation_name(ab), train::teacher_forced_stats(net, *p, held, ab));
  rows.emplace_back("train / taps", train::teacher_forced_stats(net, *p, trn, train::TapAblation::kNone));
  for (const auto& [name, s] : rows) out["runs"][name] = stats_json(s);
  const auto taps = train::tap_rms_table(*ds, p->cfg.target_layer_ids, *cols, tap_seqs);
  for (const auto& t : taps)
    out["tap_rms"].push_back({{"tap", t.tap}, {"rms", t.rms}, {"dim_rms_max", t.dim_rms_max},
                              {"dim_rms_median", t.dim_rms_median}, {"abs_max", t.abs_max}});
  out["drafter"] = args.positional()[0];
  out["blocks_per_split"] = (int64_t)held.blocks.size();
  if (json) {
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("drafter-diag: %s, %zu held-out / %zu train blocks of %lld slots\n\n", args.positional()[0].c_str(),
              held.blocks.size(), trn.blocks.size(), (long long)p->cfg.block_size);
  std::printf("| run                            | measure                |");
  for (int64_t k = 0; k < p->cfg.block_size; ++k) std::printf(" slot%lld |", (long long)k + 1);
  std::printf("\n|---|---|%s\n", std::string((size_t)p->cfg.block_size * 4, '-').c_str());
  for (const auto& [name, s] : rows) {
    print_row(name.c_str(), "top-1", s.top1);
    print_row(name.c_str(), "c* (T=1 acceptance)", s.cstar);
    if (!s.top1_guessed.empty()) {
      print_row(name.c_str(), "top-1, lookup guessed", s.top1_guessed);
      print_row(name.c_str(), "top-1, no guess (MASK)", s.top1_unguessed);
    }
  }
  print_row("heldout", "draft entropy (nats)", rows[0].second.draft_entropy);
  print_row("heldout", "target entropy (top-k)", rows[0].second.target_entropy);
  for (size_t r : {(size_t)0, rows.size() - 1}) {
    const train::SlotStats& s = rows[r].second;
    std::printf("\nSlot 1 by the target's top-1 probability (%s): share of slots, draft top-1 == target top-1, and\n"
                "the share whose target top-1 is in the draft vocabulary at all (the draft top-1's ceiling)\n",
                rows[r].first.c_str());
    std::printf("| target top-1 prob | slots | share | draft top-1 | in draft vocab |\n|---|---:|---:|---:|---:|\n");
    int64_t tot = 0;
    for (int64_t c : s.slot1_bin_count) tot += c;
    double lo = 0;
    for (size_t b = 0; b < s.slot1_bin_count.size(); ++b) {
      std::printf("| %.2f-%.2f | %lld | %.3f | %.3f | %.3f |\n", lo, train::kTargetConfidenceBins[b],
                  (long long)s.slot1_bin_count[b], (double)s.slot1_bin_count[b] / (double)std::max<int64_t>(1, tot),
                  s.slot1_bin_top1[b], s.slot1_bin_in_vocab[b]);
      lo = train::kTargetConfidenceBins[b];
    }
  }
  std::printf("\n| tap | RMS | per-dim RMS median | per-dim RMS max | max abs |\n|---:|---:|---:|---:|---:|\n");
  for (const auto& t : taps)
    std::printf("| %d | %.3f | %.3f | %.3f | %.1f |\n", t.tap, t.rms, t.dim_rms_median, t.dim_rms_max, t.abs_max);
  return 0;
}

}  // namespace dspark::tools
