// dspark drafter-diag: diagnostics of a trained DSpark drafter on regen shards (issue #11): is the
// context path alive (teacher-forced accuracy with the context taps zeroed or shuffled), how sharp
// are the draft distributions next to the target's (entropy by slot), under- or over-fitting
// (train vs held-out), and the per-tap RMS table of the data (the scale the taps enter fc at).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "eval/heldout_eval.h"
#include "speculative/spec_config.h"
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
                   int64_t heldout_mod, int64_t n_seqs, speculative::DraftQuant draft_quant, int threads, bool json) {
  auto ds = train::Dataset::open(data, target.config().n_vocab, heldout_mod);
  if (!ds) {
    std::fprintf(stderr, "dspark drafter-diag: %s\n", ds.message().c_str());
    return kExitBadInput;
  }
  ThreadPool pool(threads);
  auto r = eval::heldout_eval(dir, target, *ds, n_seqs, 0, 0.0f, /*record_confidence=*/false, &pool,
                                speculative::copy_bits_of_quant(draft_quant));
  if (!r) {
    std::fprintf(stderr, "dspark drafter-diag: %s\n", r.message().c_str());
    return kExitBadInput;
  }
  nlohmann::json j = train::heldout_json(*r);
  j["drafter"] = dir;
  j["draft_quant"] = speculative::draft_quant_name(draft_quant);
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("drafter-diag --replay: %s (%s), %lld held-out greedy sequences, %lld rounds\n", dir.c_str(),
              draft_quant == speculative::DraftQuant::kNone ? "as given" : (std::string(speculative::draft_quant_name(draft_quant)) + " copies").c_str(),
              (long long)r->sequences, (long long)r->rounds);
  std::printf("tau %.3f  acceptance %.3f  by position:", r->tau(), r->acceptance());
  for (const auto& v : j["accept_by_pos"]) std::printf(" %.3f", v.get<double>());
  std::printf("  drafter %.2f ms/round\n", r->ms_per_round());
  return 0;
}

struct DiagFlags {
  std::string model_spec = "gemma3-270m", cache, draft_quant = "none";
  std::vector<std::string> data;
  int64_t seqs = 32, anchors = 32, seed = 1, heldout_mod = 50, tap_seqs = 64, replay = 0;
  int64_t threads = ThreadPool::default_threads();
  bool json = false;
  speculative::DraftQuant quant = speculative::DraftQuant::kNone;  // parsed draft_quant
};

void add_diag_flags(Args& args, DiagFlags* f) {
  add_model_flags(args, &f->model_spec, &f->cache);
  args.add_list("--data", &f->data, "regen output folder (repeatable)");
  args.add("--seqs", &f->seqs, "sequences per split", 2, 100000);
  args.add("--anchors", &f->anchors, "anchor blocks per sequence", 1, 4096);
  args.add("--seed", &f->seed, "batch seed", 0, INT64_MAX);
  args.add("--heldout-mod", &f->heldout_mod, "held-out prompts: index % N == 0 (as train-drafter)", 2, 1000000);
  args.add("--tap-seqs", &f->tap_seqs, "training sequences for the tap RMS table", 1, 1000000);
  args.add("--replay", &f->replay, "held-out greedy sequences to replay with the serving drafter (0 = the teacher-forced "
           "diagnostics instead)", 0, 1000000);
  args.add("--draft-quant", &f->draft_quant, "--replay: none (the checkpoint as given), int8 or int4 (8- / 4-bit copies, as\n"
           "served without AMX: --draft-quant of generate)");
  add_threads_flag(args, &f->threads);
  add_json_flag(args, &f->json, "print the results as JSON");
}

// The teacher-forced diagnostics: per run (held-out with the taps as they are, zeroed, shuffled;
// training split) the slot statistics, and the tap RMS table.
struct Diagnosis {
  std::vector<std::pair<std::string, train::SlotStats>> rows;
  std::vector<train::TapRmsRow> taps;
  size_t held_blocks = 0, train_blocks = 0;
  int64_t block_size = 0;
};

Result<Diagnosis> diagnose(const DiagFlags& f, const std::string& dir, const LoadedModel& lm) {
  const model::ModelConfig& tc = lm.model->config();
  auto p = train::load_checkpoint_params(dir, tc);
  if (!p) return p.status();
  auto ds = train::Dataset::open(f.data, tc.n_vocab, f.heldout_mod);
  if (!ds) return ds.status();
  if (ds->heldout().empty()) return Status::error("the shards have no held-out sequences (--heldout-mod)");
  auto cols = ds->tap_columns(p->cfg.target_layer_ids);
  if (!cols) return cols.status();
  train::gemm_set_threads((int)f.threads);
  const train::FrozenTables frozen = train::make_frozen_tables(lm.model->weights().token_embd, p->d2t, tc.n_embd);
  train::DraftNet net(*p, frozen);
  train::TrainBatch held, trn;
  Rng r1((uint64_t)f.seed), r2((uint64_t)f.seed + 1);
  const train::BlockInputs bin = train::block_inputs_of(p->cfg);
  ds->make_batch(r1, f.seqs, f.anchors, p->cfg.block_size, *cols, &held, &ds->heldout(), bin);
  ds->make_batch(r2, f.seqs, f.anchors, p->cfg.block_size, *cols, &trn, nullptr, bin);
  Diagnosis d;
  for (const train::TapAblation ab : {train::TapAblation::kNone, train::TapAblation::kZero, train::TapAblation::kShuffle})
    d.rows.emplace_back(std::string("heldout / ") + train::tap_ablation_name(ab), train::teacher_forced_stats(net, *p, held, ab));
  d.rows.emplace_back("train / taps", train::teacher_forced_stats(net, *p, trn, train::TapAblation::kNone));
  d.taps = train::tap_rms_table(*ds, p->cfg.target_layer_ids, *cols, f.tap_seqs);
  d.held_blocks = held.blocks.size();
  d.train_blocks = trn.blocks.size();
  d.block_size = p->cfg.block_size;
  return d;
}

nlohmann::json diagnosis_json(const Diagnosis& d, const std::string& dir) {
  nlohmann::json out;
  for (const auto& [name, s] : d.rows) out["runs"][name] = stats_json(s);
  for (const auto& t : d.taps)
    out["tap_rms"].push_back({{"tap", t.tap}, {"rms", t.rms}, {"dim_rms_max", t.dim_rms_max},
                              {"dim_rms_median", t.dim_rms_median}, {"abs_max", t.abs_max}});
  out["drafter"] = dir;
  out["blocks_per_split"] = (int64_t)d.held_blocks;
  return out;
}

// Slot 1 by the target's top-1 probability, for one run.
void print_slot1_bins(const std::string& run, const train::SlotStats& s) {
  std::printf("\nSlot 1 by the target's top-1 probability (%s): share of slots, draft top-1 == target top-1, and\n"
              "the share whose target top-1 is in the draft vocabulary at all (the draft top-1's ceiling)\n",
              run.c_str());
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

void print_diagnosis(const Diagnosis& d, const std::string& dir) {
  std::printf("drafter-diag: %s, %zu held-out / %zu train blocks of %lld slots\n\n", dir.c_str(), d.held_blocks,
              d.train_blocks, (long long)d.block_size);
  std::printf("| run                            | measure                |");
  for (int64_t k = 0; k < d.block_size; ++k) std::printf(" slot%lld |", (long long)k + 1);
  std::printf("\n|---|---|%s\n", std::string((size_t)d.block_size * 4, '-').c_str());
  for (const auto& [name, s] : d.rows) {
    print_row(name.c_str(), "top-1", s.top1);
    print_row(name.c_str(), "c* (T=1 acceptance)", s.cstar);
    if (!s.top1_guessed.empty()) {
      print_row(name.c_str(), "top-1, lookup guessed", s.top1_guessed);
      print_row(name.c_str(), "top-1, no guess (MASK)", s.top1_unguessed);
    }
  }
  print_row("heldout", "draft entropy (nats)", d.rows[0].second.draft_entropy);
  print_row("heldout", "target entropy (top-k)", d.rows[0].second.target_entropy);
  print_slot1_bins(d.rows.front().first, d.rows.front().second);
  print_slot1_bins(d.rows.back().first, d.rows.back().second);
  std::printf("\n| tap | RMS | per-dim RMS median | per-dim RMS max | max abs |\n|---:|---:|---:|---:|---:|\n");
  for (const auto& t : d.taps)
    std::printf("| %d | %.3f | %.3f | %.3f | %.1f |\n", t.tap, t.rms, t.dim_rms_median, t.dim_rms_max, t.abs_max);
}

}  // namespace

int verb_drafter_diag(int argc, char** argv) {
  DiagFlags f;
  Args args("dspark drafter-diag DRAFTER_DIR --data REGEN_DIR [--seqs 32] [--anchors 32] [--replay N [--draft-quant int8|int4]] [--json]",
            "Teacher-forced diagnostics of a DSpark drafter on regen shards (the target out of the loop):\n"
            "top-1 agreement with the target's token and c* (expected acceptance at T = 1) by slot on the\n"
            "held-out and the training split; the same on held-out with the context taps zeroed and shuffled\n"
            "across sequences (if nothing drops, the context path is dead); draft vs target entropy by slot;\n"
            "and the per-tap RMS table of the data.\n"
            "--replay N instead replays T = 0 speculative decoding with the serving drafter along N held-out\n"
            "greedy sequences (what train-drafter reports at its checkpoints), for any checkpoint, quantized\n"
            "ones included; --draft-quant int8 / int4 mounts the integer copies generate and serve use without AMX.");
  add_diag_flags(args, &f);
  const VerbError fail{"drafter-diag"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (args.positional().size() != 1) return fail("expected one drafter directory");
  if (f.data.empty()) return fail("--data REGEN_DIR is required");
  if (!speculative::parse_draft_quant(f.draft_quant, &f.quant) || f.quant == speculative::DraftQuant::kAuto)
    return fail("--draft-quant must be none, int8 or int4, got '" + f.draft_quant + "'");
  auto lm = load_model(f.model_spec, f.cache);
  if (!lm) return fail(lm.message());
  const std::string dir = args.positional()[0];
  if (f.replay > 0)
    return replay_heldout(dir, *lm->model, f.data, f.heldout_mod, f.replay, f.quant, (int)f.threads, f.json);
  auto d = diagnose(f, dir, *lm);
  if (!d) return fail(d.message());
  if (f.json) std::printf("%s\n", diagnosis_json(*d, dir).dump(1).c_str());
  else print_diagnosis(*d, dir);
  return 0;
}

}  // namespace dspark::tools
