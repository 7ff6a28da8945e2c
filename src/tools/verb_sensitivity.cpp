// dspark sensitivity: the drafter's per-tensor quantization sensitivity table (docs/QUANT-FORMAT.md §7, the
// target out of the loop: cached taps from regen shards) and, with --target-bpw, the knapsack
// recipe `dspark quantize-drafter --recipe` consumes.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "core/dtype.h"
#include "quant/convert.h"
#include "quant/fake_quant.h"
#include "quant/knapsack.h"
#include "quant/quant_config.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/loaded_model.h"
#include "core/progress.h"
#include "tools/verbs.h"
#include "train/checkpoint_params.h"
#include "train/dataset.h"
#include "train/gemm.h"
#include "train/sensitivity.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

std::string cand_name(const quant::Candidate& c) {
  if (c.method == "none") return "kept";
  return c.method + std::to_string(c.bits) + " g" + std::to_string(c.group);
}

nlohmann::json recipe_json(const train::SensitivityResult& r, const quant::Allocation& a) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t t = 0; t < r.table.size(); ++t) {
    const quant::Candidate& c = r.table[t].candidates[a.choice[t]];
    const std::string module = quant::module_of(r.table[t].name);
    if (c.method == "none") j[module] = false;
    else j[module] = {{"method", c.method}, {"bits", c.bits}, {"group_size", c.group}};
  }
  return j;
}

struct SensitivityFlags {
  std::string model_spec = "gemma3-270m", cache, bits_s = "2,3,4,8", methods_s = "affine,turbo", md_path, recipe_out;
  std::vector<std::string> calib;
  int64_t affine_group = 64, turbo_group = 32, seqs = 24, anchors = 16, seed = 1, heldout_mod = 50;
  int64_t threads = ThreadPool::default_threads();
  std::string target_bpw_s;
  bool json = false;
};

void add_sensitivity_flags(Args& args, SensitivityFlags* f) {
  add_model_flags(args, &f->model_spec, &f->cache);
  args.add_list("--calib", &f->calib, "regen output folder (repeatable); its held-out split is used");
  args.add("--bits", &f->bits_s, "candidate bit widths (turbo takes 2, 3, 4 only)");
  args.add("--methods", &f->methods_s, "candidate methods: affine, turbo");
  args.add("--affine-group", &f->affine_group, "affine group size", 32, 128);
  args.add("--turbo-group", &f->turbo_group, "turbo group size", 32, 128);
  args.add("--seqs", &f->seqs, "held-out sequences in the calibration batch", 1, 100000);
  args.add("--anchors", &f->anchors, "anchor blocks per sequence", 1, 4096);
  args.add("--seed", &f->seed, "batch seed and turbo rotation seed (as quantize-drafter --seed)", 0, INT64_MAX);
  args.add("--heldout-mod", &f->heldout_mod, "held-out prompts: index % N == 0 (as train-drafter)", 2, 1000000);
  args.add("--target-bpw", &f->target_bpw_s, "run the knapsack for these bits per weight (a ceiling; list: 3,3.5,4)");
  args.add("--recipe-out", &f->recipe_out, "where the knapsack writes its recipe (JSON); with several targets a\n"
           "path containing {bpw}, e.g. recipes/mix-{bpw}.json");
  args.add("--markdown", &f->md_path, "also write the table as markdown");
  add_threads_flag(args, &f->threads);
  add_json_flag(args, &f->json, "print the table (and allocation) as JSON");
}

// --target-bpw: a comma-separated list of numbers in (0, 32], with --recipe-out to match.
Result<std::vector<double>> parse_targets(const SensitivityFlags& f) {
  std::vector<double> targets;
  const std::string& list = f.target_bpw_s;
  for (size_t from = 0; !list.empty() && from <= list.size();) {
    size_t to = list.find(',', from);
    if (to == std::string::npos) to = list.size();
    const std::string item = list.substr(from, to - from);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !(v > 0 && v <= 32))
      return Status::error("--target-bpw: '" + item + "' is not a number in (0, 32]");
    targets.push_back(v);
    from = to + 1;
  }
  if (!targets.empty() && f.recipe_out.empty()) return Status::error("--target-bpw needs --recipe-out FILE");
  if (!f.recipe_out.empty() && targets.empty()) return Status::error("--recipe-out needs --target-bpw X");
  if (targets.size() > 1 && f.recipe_out.find("{bpw}") == std::string::npos)
    return Status::error("--recipe-out must contain {bpw} when --target-bpw lists several targets");
  return targets;
}

// The candidate formats: every method x bit width (turbo at 2-4 bits only).
Result<std::vector<quant::Candidate>> candidate_formats(const SensitivityFlags& f) {
  auto bits = parse_int_list(f.bits_s, "--bits");
  if (!bits) return bits.status();
  std::vector<quant::Candidate> cands;
  for (size_t from = 0; from <= f.methods_s.size();) {
    size_t to = f.methods_s.find(',', from);
    if (to == std::string::npos) to = f.methods_s.size();
    const std::string m = f.methods_s.substr(from, to - from);
    from = to + 1;
    if (m != "affine" && m != "turbo") return Status::error("--methods: '" + m + "' is not affine or turbo");
    for (int b : *bits) {
      quant::QuantSpec s;
      s.method = m == "affine" ? quant::Method::kAffine : quant::Method::kTurbo;
      s.bits = b;
      s.group_size = (int)(m == "affine" ? f.affine_group : f.turbo_group);
      if (m == "turbo" && (b < 2 || b > 4)) continue;  // Lloyd-Max codebooks exist for 2, 3, 4 bits
      DSPARK_RETURN_IF_ERROR(quant::check_spec(s, "--bits " + std::to_string(b) + " (" + m + ")"));
      cands.push_back({m, b, s.group_size, quant::spec_bpw(s), 0.0});
    }
  }
  if (cands.empty()) return Status::error("no candidate formats (check --bits / --methods)");
  return cands;
}

// The sensitivity table of the drafter in `dir` on the held-out split of the calibration shards.
// Errors before the measurement are bad input (*measured stays false).
Result<train::SensitivityResult> measure(const SensitivityFlags& f, const std::string& dir,
                                         const std::vector<quant::Candidate>& cands, const LoadedModel& lm,
                                         bool* measured) {
  const model::ModelConfig& tc = lm.model->config();
  auto p = train::load_checkpoint_params(dir, tc);
  if (!p) return p.status();
  auto ds = train::Dataset::open(f.calib, tc.n_vocab, f.heldout_mod);
  if (!ds) return ds.status();
  if (ds->heldout().empty()) return Status::error("the calibration shards have no held-out sequences (--heldout-mod)");
  auto cols = ds->tap_columns(p->cfg.target_layer_ids);
  if (!cols) return cols.status();
  train::gemm_set_threads((int)f.threads);
  train::FrozenTables frozen = train::make_frozen_tables(lm.model->weights().token_embd, p->d2t, tc.n_embd);
  train::TrainBatch batch;
  Rng rng((uint64_t)f.seed);
  ds->make_batch(rng, f.seqs, f.anchors, p->cfg.block_size, *cols, &batch, &ds->heldout(), train::block_inputs_of(p->cfg));
  ProgressBar bar("sensitivity", (uint64_t)(train::sensitivity_units(*p, frozen).size() * cands.size()), " runs");
  auto fq = [&](const std::string& tensor, const quant::Candidate& c, float* w, int64_t rows, int64_t n_cols) {
    quant::QuantSpec s;
    s.method = c.method == "affine" ? quant::Method::kAffine : quant::Method::kTurbo;
    s.bits = c.bits;
    s.group_size = c.group;
    return quant::fake_quantize(s, quant::module_of(tensor), (uint64_t)f.seed, w, rows, n_cols);
  };
  *measured = true;
  auto res = train::measure_sensitivity(*p, frozen, batch, cands, fq,
                                        [&](int64_t done, int64_t) { bar.update((uint64_t)done); });
  if (!res) return res.status();
  // The draft LM head kept as is means the target's rows in the target's encoding.
  const double head_bpw = 8.0 * (double)row_bytes(lm.model->weights().token_embd.type, tc.n_embd) / (double)tc.n_embd;
  for (quant::TensorSensitivity& t : res->table)
    if (t.name == "lm_head.weight") t.candidates[0].bpw = head_bpw;
  return res;
}

// The table as markdown (*md) and JSON (the returned tensors array).
nlohmann::json describe_table(const train::SensitivityResult& res, const std::vector<quant::Candidate>& cands,
                              const std::string& dir, std::string* md) {
  nlohmann::json tensors = nlohmann::json::array();
  *md = "## dspark sensitivity: " + dir + "\n\n" + std::to_string(res.blocks) + " held-out blocks, " +
        std::to_string(res.slots) + " slots; KL(unquantized || quantized) x 1e3 (slot-0 argmax agreement)\n\n"
        "| tensor | params |";
  std::string rule = "|---|---|";
  for (const quant::Candidate& c : cands) {
    md->append(" ").append(cand_name(c)).append(" (").append(std::to_string(c.bpw).substr(0, 4)).append(" bpw) |");
    rule += "---|";
  }
  md->append("\n").append(rule).append("\n");
  for (size_t t = 0; t < res.table.size(); ++t) {
    const quant::TensorSensitivity& ts = res.table[t];
    nlohmann::json cj = nlohmann::json::array();
    md->append("| ").append(ts.name).append(" | ").append(std::to_string(ts.params)).append(" |");
    for (size_t c = 0; c < ts.candidates.size(); ++c) {
      const quant::Candidate& k = ts.candidates[c];
      cj.push_back({{"method", k.method}, {"bits", k.bits}, {"group_size", k.group}, {"bpw", k.bpw},
                    {"kl", std::isfinite(k.kl) ? nlohmann::json(k.kl) : nlohmann::json(nullptr)},
                    {"top1_agree", res.top1_agree[t][c]}});
      if (c == 0) continue;  // "kept" is KL 0 by construction
      char cell[64];
      std::snprintf(cell, sizeof cell, " %.3f (%.1f%%) |", k.kl * 1e3, 100 * res.top1_agree[t][c]);
      *md += cell;
    }
    *md += "\n";
    tensors.push_back({{"name", ts.name}, {"params", ts.params}, {"candidates", cj}});
  }
  return tensors;
}

Status write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return Status::error(path + ": cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::error(path + ": " + ec.message());
  return Status::ok();
}

// The knapsack at each target: a recipe file per target, listed in *md and returned as JSON. A
// target the knapsack cannot meet is bad input (*bad_input); a file that cannot be written is not.
Result<nlohmann::json> write_recipes(const train::SensitivityResult& res, const std::vector<double>& targets,
                                     const std::string& recipe_out, std::string* md, bool* bad_input) {
  nlohmann::json allocs = nlohmann::json::array();
  for (const double target_bpw : targets) {
    auto a = quant::allocate_bits(res.table, target_bpw);
    *bad_input = !a;
    if (!a) return a.status();
    const nlohmann::json recipe = recipe_json(res, *a);
    std::string path = recipe_out;
    if (const size_t at = path.find("{bpw}"); at != std::string::npos) {
      char v[32];
      std::snprintf(v, sizeof v, "%g", target_bpw);
      path.replace(at, 5, v);
    }
    DSPARK_RETURN_IF_ERROR(write_file_atomic(path, recipe.dump(1) + "\n"));
    allocs.push_back({{"target_bpw", target_bpw}, {"bpw", a->bpw}, {"total_kl", a->total_kl},
                      {"upgrades", a->upgrades}, {"recipe", recipe}, {"recipe_path", path}});
    char line[200];
    std::snprintf(line, sizeof line, "\nknapsack at %.2f bpw: %.3f bpw used, summed KL %.4g; recipe: %s\n", target_bpw,
                  a->bpw, a->total_kl, path.c_str());
    *md += line;
    for (size_t t = 0; t < res.table.size(); ++t)
      md->append("- ").append(res.table[t].name).append(": ").append(cand_name(res.table[t].candidates[a->choice[t]])).append("\n");
  }
  return allocs;
}

}  // namespace

int verb_sensitivity(int argc, char** argv) {
  SensitivityFlags f;
  Args args("dspark sensitivity DRAFTER_DIR --calib REGEN_DIR [--bits 2,3,4,8] [--methods affine,turbo]\n"
            "       [--target-bpw X --recipe-out FILE] [--json] [--markdown FILE]",
            "Quantization sensitivity of a DSpark drafter with the target out of the loop: the drafter runs its\n"
            "teacher-forced block forward over held-out sequences of regen shards; for every matrix and\n"
            "candidate format only that matrix is simulate-quantized (the deployment format's round trip) and\n"
            "KL(unquantized || quantized) of the draft distributions is measured (slot weights exp(-k/4)),\n"
            "with the slot-0 argmax agreement. Affine uses --affine-group, turbo --turbo-group (default 64 / 32:\n"
            "equal bits per weight, e.g. 4.5 at 4 bits). --target-bpw runs the greedy knapsack (largest KL\n"
            "reduction per extra bit first, the budget a ceiling) and writes a recipe for quantize-drafter.");
  add_sensitivity_flags(args, &f);
  const VerbError fail{"sensitivity"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (args.positional().size() != 1) return fail("expected one drafter directory");
  if (f.calib.empty()) return fail("--calib REGEN_DIR is required");
  auto targets = parse_targets(f);
  if (!targets) return fail(targets.message());
  const std::string dir = args.positional()[0];
  auto cands = candidate_formats(f);
  if (!cands) return fail(cands.message());
  auto lm = load_model(f.model_spec, f.cache);
  if (!lm) return fail(lm.message());
  bool measured = false;
  auto res = measure(f, dir, *cands, *lm, &measured);
  if (!res) return fail(res.message(), measured ? 1 : kExitBadInput);
  std::string md;
  nlohmann::json out = {{"drafter", dir}, {"calib", f.calib}, {"blocks", res->blocks}, {"slots", res->slots},
                        {"slot_weights", "exp(-k/4)"}, {"seed", f.seed}, {"tensors", describe_table(*res, *cands, dir, &md)}};
  bool bad_target = false;
  auto allocs = write_recipes(*res, *targets, f.recipe_out, &md, &bad_target);
  if (!allocs) return fail(allocs.message(), bad_target ? kExitBadInput : 1);
  if (!allocs->empty()) out["allocations"] = *allocs;
  if (!f.md_path.empty()) {
    std::ofstream file(f.md_path);
    file << md;
    if (!file) return fail(f.md_path + ": cannot write", 1);
  }
  if (f.json) std::printf("%s\n", out.dump(1).c_str());
  else std::printf("%s", md.c_str());
  return 0;
}

}  // namespace dspark::tools
