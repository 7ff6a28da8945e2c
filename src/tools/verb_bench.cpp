// dspark bench: llama-bench-style prefill (pp) and decode (tg) speed, median of repeats, and
// the verify-cost curve (eval::run_speed_bench); with --spec, serial vs speculative on a prompt file
// (run_bench_spec). This verb parses flags, mounts the target and prints.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "core/threadpool.h"
#include "eval/bench_spec.h"
#include "eval/speed_bench.h"
#include "kernels/profiling_backend.h"
#include "runtime/loaded_model.h"
#include "sample/sampler.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/sampler_flags.h"
#include "tools/spec_flags.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

struct BenchFlags {
  std::string model_spec = "gemma3-270m", cache, chat_template, backend, kernel_plan = "auto", lm_head = "argmax";
  int64_t threads = ThreadPool::default_threads();
  eval::SpeedBenchOptions speed;
  bool json = false, spec_mode = false, no_chat = false, verbose = false, profile = false;
  eval::BenchSpecOptions sopt;
  SpecFlags spec_flags;  // --spec: the drafter; n-gram unless told otherwise, checkpoints as given
  int64_t n_spec_prompts = eval::BenchSpecOptions{}.n_prompts;
  SamplerFlags sf;
};

void add_bench_flags(Args& args, BenchFlags* f) {
  eval::SpeedBenchOptions& o = f->speed;
  add_model_flags(args, &f->model_spec, &f->cache, &f->chat_template);
  add_backend_flag(args, &f->backend, &f->kernel_plan);
  add_verbose_flag(args, &f->verbose);
  args.add("--n-prompt,-p", &o.n_prompt, "prefill length in tokens (0 = skip)", 0, 1 << 16);
  args.add("--n-gen,-n", &o.n_gen, "decode length in tokens (0 = skip)", 0, 1 << 16);
  add_threads_flag(args, &f->threads);
  args.add("--repeats,-r", &o.repeats, "repeats per measurement", 1, 1000);
  args.add_flag("--verify-curve", &o.curve, "also measure the verify-cost curve");
  args.add_flag("--profile", &f->profile,
                "time every backend op during the decode runs (matmuls by weight type and shape, attention, norms, ...)\n"
                "and print where a decoded token's time goes (the timers slow decode slightly); then -r more prefills of\n"
                "-p tokens with the timers on (where a prefill's time goes); with --verify-curve also for the verify\n"
                "forwards of 1 and --curve-max new tokens");
  args.add("--curve-ctx", &o.curve_ctx, "context length before the curve's forwards", 1, 1 << 16);
  args.add("--curve-max", &o.curve_max, "largest number of new tokens on the curve", 1, 64);
  args.add("--lm-head", &f->lm_head,
           "argmax (default): greedy decode and the verify curve read only each row's argmax, through the\n"
           "model's exact greedy head where it has one (as generate and serve do at temperature 0); full: every\n"
           "logit computed (as llama-bench does); both: greedy decode with each head, alternating per repeat");
  add_sampler_flags(args, &f->sf);
  add_json_flag(args, &f->json, "print one JSON object");
  args.add_flag("--spec", &f->spec_mode, "serial vs speculative on a prompt file, per category (-n tokens per prompt)");
  args.add("--prompts", &f->sopt.prompts, "--spec: JSONL with {category, turns: [text]}");
  args.add("--n-prompts", &f->n_spec_prompts, "--spec: prompts to run, round robin over categories", 1, 100000);
  args.add_flag("--no-chat", &f->no_chat, "--spec: feed prompts raw instead of chat-templated");
  add_spec_flags(args, &f->spec_flags, /*no_spec_flag=*/false);  // used by --spec
}

// Checks what the flags alone can tell (before a model is loaded).
Status check_bench_flags(BenchFlags& f) {
  auto head = parse_lm_head(f.lm_head, /*allow_both=*/true);
  if (!head) return Status::error("--" + head.message());
  f.speed.lm_head = *head;
  f.speed.sampler = f.sf.config();
  f.speed.threads = (int)f.threads;
  DSPARK_RETURN_IF_ERROR(sample::validate(f.speed.sampler));
  if (!f.spec_mode) return Status::ok();
  SpecFlags& sp = f.spec_flags;
  if (sp.given.count("draft-model") && !sp.given.count("draft-kind")) sp.config.kind = "auto";
  if (Status st = speculative::check_spec(sp.config); !st) return Status::error("--" + st.message());
  return Status::ok();
}

}  // namespace

int verb_bench(int argc, char** argv) {
  BenchFlags f;
  f.spec_flags.config.kind = "ngram";
  f.spec_flags.config.quant = speculative::DraftQuant::kNone;
  Args args("dspark bench --model M -p 512 -n 128 --threads 2 [--repeats R] [--json] [--verify-curve]",
            "Prefill speed over -p synthetic tokens and decode speed over -n greedy tokens after a short\n"
            "prompt; medians of --repeats runs. --verify-curve also times one forward of 1..K new tokens\n"
            "(all-position logits, as speculative verify needs) after --curve-ctx tokens of context.\n"
            "With --temp > 0 each repeat also decodes the same prompt sampled (greedy and sampled alternate\n"
            "which runs first), and the time of one sampled row (softmax, truncation, draw) is reported\n"
            "apart from the forward.");
  add_bench_flags(args, &f);
  const VerbError fail{"bench"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (Status st = check_bench_flags(f); !st) return fail(st.message());
  // The target's backend (with its kernel plan) first, so --profile can wrap it.
  auto model_path = resolve_model_path(f.model_spec, resolve_cache_dir(f.cache));
  if (!model_path) return fail(model_path.message());
  auto tb = target_backend(*model_path, resolve_cache_dir(f.cache),
                           BackendFlags{f.backend, f.kernel_plan, (int)f.threads, eval::kSpeedBenchMaxBatch, print_note, {}});
  if (!tb) return fail(tb.message());
  const kernels::ProfilingBackend prof(*tb->backend);  // used only with --profile
  auto lm = load_model(*model_path, f.cache, f.chat_template, f.profile ? prof : *tb->backend);
  if (!lm) return fail(lm.message());
  if (f.verbose) std::fputs((runtime::plan_report(*tb) + runtime::kernel_report(*lm->model)).c_str(), stderr);
  if (f.spec_mode) {
    eval::BenchSpecOptions& so = f.sopt;
    so.n_gen = f.speed.n_gen;
    so.n_prompts = f.n_spec_prompts;
    so.chat = !f.no_chat;
    so.threads = f.threads;
    so.sampler = f.speed.sampler;
    so.drafter = f.spec_flags.config;
    so.note = print_note;
    auto bar = std::make_shared<ProgressBar>("bench --spec", 0, " prompts");
    auto j = eval::run_bench_spec(so, *lm, [&bar](uint64_t done, uint64_t total) {
      if (done == 1) bar = std::make_shared<ProgressBar>("bench --spec", total, " prompts");
      bar->update(done);
    });
    if (!j) return fail(j.message());
    if (f.json) std::printf("%s\n", j->dump().c_str());
    else std::fputs(eval::format_bench_spec(*j).c_str(), stdout);
    return 0;
  }
  auto bar = std::make_shared<std::unique_ptr<ProgressBar>>();
  auto j = eval::run_speed_bench(f.speed, *lm, f.profile ? &prof : nullptr,
                                 [bar](const std::string& phase, uint64_t done, uint64_t total) {
                                   if (!*bar || done == 1) *bar = std::make_unique<ProgressBar>(phase, total);
                                   (*bar)->update(done);
                                 });
  if (!j) return fail(j.message(), 1);
  (*j)["kernel_plan"] = tb->plan_status;
  if (f.json) std::printf("%s\n", j->dump().c_str());  // one line: easy to parse from scripts
  else std::fputs(eval::format_speed_bench(*j).c_str(), stdout);
  return 0;
}

}  // namespace dspark::tools
