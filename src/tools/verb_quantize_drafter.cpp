// dspark quantize-drafter: a dense DSpark checkpoint -> a quantized sibling directory (src/quant/,
// docs/QUANT-FORMAT.md), reloaded against the target and drafted once before it is renamed into place.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "quant/convert.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/drafter_smoke.h"
#include "core/progress.h"
#include "runtime/registry.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

struct QuantizeFlags {
  std::string method = "affine", recipe, out, model_spec = "gemma3-270m", cache;
  int64_t bits = 4, group = 64, seed = 1, threads = ThreadPool::default_threads();
  bool json = false, no_check = false;
};

constexpr const char* kQuantizeHelp =
    "Writes a quantized copy of the DSpark drafter checkpoint DIR (default DIR-<method><bits>g<group>):\n"
    "every 2-D weight matrix (attention, MLP, fc, lm_head, markov_w2, the gather tables markov_w1 and\n"
    "embed_tokens) is quantized; norms, layer_scalar, biases, d2t and the confidence head are copied.\n"
    "affine = MLX affine groups (bits 2 3 4 5 6 8; bf16 scale + bias per group: bits + 32/G bpw);\n"
    "turbo = randomized Hadamard rotation of the input dim + Lloyd-Max N(0,1) codebook (bits 2 3 4;\n"
    "one bf16 scale per group: bits + 16/G bpw; turbo G/2 has the bpw of affine G, e.g. --method turbo\n"
    "--bits 4 --group 32 matches affine 4-bit g64 at 4.5 bpw). A draft LM head taken from the target\n"
    "(d2t, no lm_head tensor) is written as an explicit lm_head.weight [V_d, H] and quantized.\n"
    "--recipe: JSON {\"tensor or module\": {\"method\": .., \"bits\": .., \"group_size\": ..} | false}.\n"
    "The result is written to a staging folder, reloaded against the target (--model) and drafted once,\n"
    "then renamed into place. Refuses an existing output, an already quantized checkpoint, a group size\n"
    "that does not divide a tensor's input dim, and recipe entries that name no tensor. Format:\n"
    "docs/QUANT-FORMAT.md.";

void add_quantize_flags(Args& args, QuantizeFlags* f) {
  args.add("--method", &f->method, "affine or turbo");
  args.add("--bits", &f->bits, "bits per weight code (affine 2 3 4 5 6 8; turbo 2 3 4)", 1, 8);
  args.add("--group", &f->group, "group size along the input dim (32, 64, 128)", 1, 4096);
  args.add("--recipe", &f->recipe, "per-tensor overrides (JSON file)");
  args.add("--out,-o", &f->out, "output directory (default DIR-<method><bits>g<group>)");
  add_model_flags(args, &f->model_spec, &f->cache);
  args.add("--seed", &f->seed, "turbo: seed of the per-tensor rotation signs", 0, INT64_MAX);
  add_threads_flag(args, &f->threads);
  args.add_flag("--no-check", &f->no_check, "skip the reload + draft check (the target is still read for E3 heads)");
  add_json_flag(args, &f->json, "print the report as one JSON object");
}

// The conversion's options from the flags (the default format checked).
Result<quant::ConvertOptions> convert_options(const QuantizeFlags& f, const std::string& src) {
  quant::ConvertOptions opt;
  opt.src_dir = src;
  if (!quant::method_from_name(f.method, &opt.defaults.method))
    return Status::error("--method must be affine or turbo, got '" + f.method + "'");
  opt.defaults.bits = (int)f.bits;
  opt.defaults.group_size = (int)f.group;
  DSPARK_RETURN_IF_ERROR(quant::check_spec(opt.defaults, "--method/--bits/--group"));
  opt.out_dir = f.out.empty() ? quant::default_out_dir(opt.src_dir, opt.defaults) : f.out;
  opt.recipe_path = f.recipe;
  opt.seed = (uint64_t)f.seed;
  return opt;
}

void print_report(const QuantizeFlags& f, const quant::ConvertReport& rep, const runtime::SmokeResult& smoke) {
  if (f.json) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& x : rep.tensors)
      t.push_back({{"name", x.name}, {"shape", x.shape}, {"source", x.source}, {"spec", quant::spec_string(x.spec)},
                   {"bytes_before", x.bytes_before}, {"bytes_after", x.bytes_after}, {"nmse", x.nmse}});
    nlohmann::json j = {{"out", rep.out_dir}, {"bytes_before", rep.bytes_before}, {"bytes_after", rep.bytes_after},
                        {"params_quantized", rep.params_quantized}, {"bpw_quantized", rep.bpw_quantized},
                        {"bpw_model", rep.bpw_model}, {"lm_head_materialized", rep.lm_head_materialized},
                        {"tensors", t}};
    if (!f.no_check) j["check"] = {{"tokens", smoke.tokens}, {"draft_ms", smoke.draft_ms}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%-36s %-13s %-11s %-30s %10s %10s %9s\n", "tensor", "shape", "from", "to", "bytes in", "bytes out", "nmse");
  for (const auto& x : rep.tensors) {
    const std::string shape = formats::st_shape_string(x.shape);
    if (x.spec.quantized())
      std::printf("%-36s %-13s %-11s %-30s %10llu %10llu %9.2e\n", x.name.c_str(), shape.c_str(), x.source.c_str(),
                  quant::spec_string(x.spec).c_str(), (unsigned long long)x.bytes_before, (unsigned long long)x.bytes_after,
                  x.nmse);
  }
  std::printf("quantize-drafter: %s\n  tensor bytes %llu -> %llu (%.1f%%)%s\n  %.3f bits per weight over %lld quantized "
              "weights, %.3f over the whole checkpoint\n",
              rep.out_dir.c_str(), (unsigned long long)rep.bytes_before, (unsigned long long)rep.bytes_after,
              100.0 * (double)rep.bytes_after / (double)std::max<uint64_t>(rep.bytes_before, 1),
              rep.lm_head_materialized ? " (lm_head written from the target's rows)" : "", rep.bpw_quantized,
              (long long)rep.params_quantized, rep.bpw_model);
  if (!f.no_check) {
    std::printf("  reload check: drafted %zu tokens in %.2f ms:", smoke.tokens.size(), smoke.draft_ms);
    for (int32_t t : smoke.tokens) std::printf(" %d", t);
    std::printf("\n");
  }
}

}  // namespace

int verb_quantize_drafter(int argc, char** argv) {
  QuantizeFlags f;
  Args args("dspark quantize-drafter DIR [--method affine|turbo] [--bits B] [--group G] [--recipe FILE] [--out DIR2]\n"
            "       [--model M] [--json]",
            kQuantizeHelp);
  add_quantize_flags(args, &f);
  const VerbError fail{"quantize-drafter"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (args.positional().size() != 1) return fail("expected one checkpoint directory (see --help)");
  auto opt = convert_options(f, args.positional()[0]);
  if (!opt) return fail(opt.message());
  auto path = resolve_model_path(f.model_spec, resolve_cache_dir(f.cache));
  if (!path) return fail(path.message());
  auto target = model::load_model(*path);
  if (!target) return fail(target.message());
  opt->target_lm_head = &(*target)->weights().output;  // the target's LM head
  ThreadPool pool((int)f.threads);
  bool check_failed = false;
  runtime::SmokeResult smoke;
  if (!f.no_check)
    opt->check = [&](const std::string& dir) {
      std::fprintf(stderr, "quantize-drafter: reloading %s against %s and drafting once\n", dir.c_str(), path->c_str());
      auto r = smoke_check_drafter(dir, **target, &pool);
      if (!r) {
        check_failed = true;
        return Status::error("reload check failed: " + r.message());
      }
      smoke = r.value();
      return Status::ok();
    };
  std::unique_ptr<ProgressBar> bar;
  opt->progress = [&](const std::string& name, int64_t i, int64_t n) {
    if (!bar) bar = std::make_unique<ProgressBar>("quantize-drafter", (uint64_t)n, " tensors");
    bar->set_suffix(name);
    bar->update((uint64_t)i);
    if (i + 1 == n) bar->update((uint64_t)n);
  };
  auto rep = quant::quantize_checkpoint(*opt);
  if (!rep) return fail(rep.message(), check_failed ? 1 : kExitBadInput);
  print_report(f, *rep, smoke);
  return 0;
}

}  // namespace dspark::tools
