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

}  // namespace

int verb_sensitivity(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, bits_s = "2,3,4,8", methods_s = "affine,turbo", md_path, recipe_out;
  std::vector<std::string> calib;
  int64_t affine_group = 64, turbo_group = 32, seqs = 24, anchors = 16, seed = 1, heldout_mod = 50;
  int64_t threads = ThreadPool::default_threads();
  std::string target_bpw_s;
  bool json = false;
  Args args("dspark sensitivity DRAFTER_DIR --calib REGEN_DIR [--bits 2,3,4,8] [--methods affine,turbo]\n"
            "       [--target-bpw X --recipe-out FILE] [--json] [--markdown FILE]",
            "Quantization sensitivity of a DSpark drafter with the target out of the loop: the drafter runs its\n"
            "teacher-forced block forward over held-out sequences of regen shards; for every matrix and\n"
            "candidate format only that matrix is simulate-quantized (the deployment format's round trip) and\n"
            "KL(unquantized || quantized) of the draft distributions is measured (slot weights exp(-k/4)),\n"
            "with the slot-0 argmax agreement. Affine uses --affine-group, turbo --turbo-group (default 64 / 32:\n"
            "equal bits per weight, e.g. 4.5 at 4 bits). --target-bpw runs the greedy knapsack (largest KL\n"
            "reduction per extra bit first, the budget a ceiling) and writes a recipe for quantize-drafter.");
  add_model_flags(args, &model_spec, &cache);
  args.add_list("--calib", &calib, "regen output folder (repeatable); its held-out split is used");
  args.add("--bits", &bits_s, "candidate bit widths (turbo takes 2, 3, 4 only)");
  args.add("--methods", &methods_s, "candidate methods: affine, turbo");
  args.add("--affine-group", &affine_group, "affine group size", 32, 128);
  args.add("--turbo-group", &turbo_group, "turbo group size", 32, 128);
  args.add("--seqs", &seqs, "held-out sequences in the calibration batch", 1, 100000);
  args.add("--anchors", &anchors, "anchor blocks per sequence", 1, 4096);
  args.add("--seed", &seed, "batch seed and turbo rotation seed (as quantize-drafter --seed)", 0, INT64_MAX);
  args.add("--heldout-mod", &heldout_mod, "held-out prompts: index % N == 0 (as train-drafter)", 2, 1000000);
  args.add("--target-bpw", &target_bpw_s, "run the knapsack for these bits per weight (a ceiling; list: 3,3.5,4)");
  args.add("--recipe-out", &recipe_out, "where the knapsack writes its recipe (JSON); with several targets a\n"
           "path containing {bpw}, e.g. recipes/mix-{bpw}.json");
  args.add("--markdown", &md_path, "also write the table as markdown");
  add_threads_flag(args, &threads);
  add_json_flag(args, &json, "print the table (and allocation) as JSON");
  auto fail = [](const std::string& m, int code = kExitBadInput) {
    std::fprintf(stderr, "dspark sensitivity: %s\n", m.c_str());
    return code;
  };
  if (Status st = args.parse(argc, argv, 2); !st) return fail(st.message());
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (args.positional().size() != 1) return fail("expected one drafter directory");
  if (calib.empty()) return fail("--calib REGEN_DIR is required");
  std::vector<double> targets;
  for (size_t from = 0; !target_bpw_s.empty() && from <= target_bpw_s.size();) {
    size_t to = target_bpw_s.find(',', from);
    if (to == std::string::npos) to = target_bpw_s.size();
    const std::string item = target_bpw_s.substr(from, to - from);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !(v > 0 && v <= 32)) return fail("--target-bpw: '" + item + "' is not a number in (0, 32]");
    targets.push_back(v);
    from = to + 1;
  }
  if (!targets.empty() && recipe_out.empty()) return fail("--target-bpw needs --recipe-out FILE");
  if (!recipe_out.empty() && targets.empty()) return fail("--recipe-out needs --target-bpw X");
  if (targets.size() > 1 && recipe_out.find("{bpw}") == std::string::npos)
    return fail("--recipe-out must contain {bpw} when --target-bpw lists several targets");
  const std::string dir = args.positional()[0];
  auto bits = parse_int_list(bits_s, "--bits");
  if (!bits) return fail(bits.message());
  std::vector<std::string> methods;
  for (size_t from = 0; from <= methods_s.size();) {
    size_t to = methods_s.find(',', from);
    if (to == std::string::npos) to = methods_s.size();
    const std::string m = methods_s.substr(from, to - from);
    if (m != "affine" && m != "turbo") return fail("--methods: '" + m + "' is not affine or turbo");
    methods.push_back(m);
    from = to + 1;
  }
  std::vector<quant::Candidate> cands;
  for (const std::string& m : methods)
    for (int b : *bits) {
      quant::QuantSpec s;
      s.method = m == "affine" ? quant::Method::kAffine : quant::Method::kTurbo;
      s.bits = b;
      s.group_size = (int)(m == "affine" ? affine_group : turbo_group);
      if (m == "turbo" && (b < 2 || b > 4)) continue;  // Lloyd-Max codebooks exist for 2, 3, 4 bits
      if (Status st = quant::check_spec(s, "--bits " + std::to_string(b) + " (" + m + ")"); !st) return fail(st.message());
      cands.push_back({m, b, s.group_size, quant::spec_bpw(s), 0.0});
    }
  if (cands.empty()) return fail("no candidate formats (check --bits / --methods)");

  auto lm = load_model(model_spec, cache);
  if (!lm) return fail(lm.message());
  const model::ModelConfig& tc = lm->model->config();
  auto p = train::load_checkpoint_params(dir, tc);
  if (!p) return fail(p.message());
  auto ds = train::Dataset::open(calib, tc.n_vocab, heldout_mod);
  if (!ds) return fail(ds.message());
  if (ds->heldout().empty()) return fail("the calibration shards have no held-out sequences (--heldout-mod)");
  auto cols = ds->tap_columns(p->cfg.target_layer_ids);
  if (!cols) return fail(cols.message());
  train::gemm_set_threads((int)threads);
  train::FrozenTables frozen = train::make_frozen_tables(lm->model->weights().token_embd, p->d2t, tc.n_embd);
  train::TrainBatch batch;
  Rng rng((uint64_t)seed);
  ds->make_batch(rng, seqs, anchors, p->cfg.block_size, *cols, &batch, &ds->heldout(), train::block_inputs_of(p->cfg));

  ProgressBar bar("sensitivity", (uint64_t)(train::sensitivity_units(*p, frozen).size() * cands.size()), " runs");
  auto fq = [&](const std::string& tensor, const quant::Candidate& c, float* w, int64_t rows, int64_t n_cols) {
    quant::QuantSpec s;
    s.method = c.method == "affine" ? quant::Method::kAffine : quant::Method::kTurbo;
    s.bits = c.bits;
    s.group_size = c.group;
    return quant::fake_quantize(s, quant::module_of(tensor), (uint64_t)seed, w, rows, n_cols);
  };
  auto res = train::measure_sensitivity(*p, frozen, batch, cands, fq,
                                        [&](int64_t done, int64_t) { bar.update((uint64_t)done); });
  if (!res) return fail(res.message(), 1);
  // The draft LM head kept as is means the target's rows in the target's encoding.
  const double head_bpw = 8.0 * (double)row_bytes(lm->model->weights().token_embd.type, tc.n_embd) / (double)tc.n_embd;
  for (quant::TensorSensitivity& t : res->table)
    if (t.name == "lm_head.weight") t.candidates[0].bpw = head_bpw;

  nlohmann::json tensors = nlohmann::json::array();
  std::string md = "## dspark sensitivity: " + dir + "\n\n" + std::to_string(res->blocks) + " held-out blocks, " +
                   std::to_string(res->slots) + " slots; KL(unquantized || quantized) x 1e3 (slot-0 argmax agreement)\n\n"
                   "| tensor | params |";
  std::string rule = "|---|---|";
  for (const quant::Candidate& c : cands) {
    md.append(" ").append(cand_name(c)).append(" (").append(std::to_string(c.bpw).substr(0, 4)).append(" bpw) |");
    rule += "---|";
  }
  md.append("\n").append(rule).append("\n");
  for (size_t t = 0; t < res->table.size(); ++t) {
    const quant::TensorSensitivity& ts = res->table[t];
    nlohmann::json cj = nlohmann::json::array();
    md.append("| ").append(ts.name).append(" | ").append(std::to_string(ts.params)).append(" |");
    for (size_t c = 0; c < ts.candidates.size(); ++c) {
      const quant::Candidate& k = ts.candidates[c];
      cj.push_back({{"method", k.method}, {"bits", k.bits}, {"group_size", k.group}, {"bpw", k.bpw},
                    {"kl", std::isfinite(k.kl) ? nlohmann::json(k.kl) : nlohmann::json(nullptr)},
                    {"top1_agree", res->top1_agree[t][c]}});
      if (c == 0) continue;  // "kept" is KL 0 by construction
      char cell[64];
      std::snprintf(cell, sizeof cell, " %.3f (%.1f%%) |", k.kl * 1e3, 100 * res->top1_agree[t][c]);
      md += cell;
    }
    md += "\n";
    tensors.push_back({{"name", ts.name}, {"params", ts.params}, {"candidates", cj}});
  }
  nlohmann::json out = {{"drafter", dir}, {"calib", calib}, {"blocks", res->blocks}, {"slots", res->slots},
                        {"slot_weights", "exp(-k/4)"}, {"seed", seed}, {"tensors", tensors}};
  nlohmann::json allocs = nlohmann::json::array();
  for (const double target_bpw : targets) {
    auto a = quant::allocate_bits(res->table, target_bpw);
    if (!a) return fail(a.message());
    const nlohmann::json recipe = recipe_json(*res, *a);
    std::string path = recipe_out;
    if (const size_t at = path.find("{bpw}"); at != std::string::npos) {
      char v[32];
      std::snprintf(v, sizeof v, "%g", target_bpw);
      path.replace(at, 5, v);
    }
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      f << recipe.dump(1) << "\n";
      if (!f) return fail(path + ": cannot write", 1);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) return fail(path + ": " + ec.message(), 1);
    allocs.push_back({{"target_bpw", target_bpw}, {"bpw", a->bpw}, {"total_kl", a->total_kl},
                      {"upgrades", a->upgrades}, {"recipe", recipe}, {"recipe_path", path}});
    char line[200];
    std::snprintf(line, sizeof line, "\nknapsack at %.2f bpw: %.3f bpw used, summed KL %.4g; recipe: %s\n", target_bpw,
                  a->bpw, a->total_kl, path.c_str());
    md += line;
    for (size_t t = 0; t < res->table.size(); ++t)
      md.append("- ").append(res->table[t].name).append(": ").append(cand_name(res->table[t].candidates[a->choice[t]])).append("\n");
  }
  if (!allocs.empty()) out["allocations"] = allocs;
  if (!md_path.empty()) {
    std::ofstream f(md_path);
    f << md;
    if (!f) return fail(md_path + ": cannot write", 1);
  }
  if (json) std::printf("%s\n", out.dump(1).c_str());
  else std::printf("%s", md.c_str());
  return 0;
}

}  // namespace dspark::tools
