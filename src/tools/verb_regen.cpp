// dspark regen: the target answers the training prompts (batched decode), writing shards of token
// ids, tapped hidden rows and top-k next-token distributions for drafter training. The workflow
// (resume, verification, replay, manifest) is train::plan_regen / run_regen (src/train/regen_run.h);
// this verb parses flags, draws progress and prints the summary.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "core/threadpool.h"
#include "runtime/loaded_model.h"
#include "runtime/registry.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/verbs.h"
#include "train/regen_run.h"

namespace dspark::tools {

namespace {

namespace fs = std::filesystem;

struct RegenFlags {
  train::RegenRunOptions run;
  std::string model_spec = "gemma3-270m", cache, chat_template, taps = "1,4,7,10,13,16", export_ids;
  int64_t threads = ThreadPool::default_threads();
  bool json = false;
};

void add_regen_flags(Args& args, RegenFlags* f) {
  train::RegenRunOptions& r = f->run;
  add_model_flags(args, &f->model_spec, &f->cache, &f->chat_template);
  args.add("--prompts", &r.prompts_path, "training prompts JSONL (required)");
  args.add("--eval-prompts", &r.eval_path, "evaluation prompts that must not overlap");
  args.add("--out,-o", &r.out_dir, "output folder (required)");
  args.add("--taps", &f->taps, "target layers to record (-1 = embedding)");
  args.add("--top-k", &r.top_k, "distribution entries per position", 1, 4096);
  args.add("--max-new", &r.max_new, "response token limit", 1, 8192);
  args.add("--max-prompt-tokens", &r.max_prompt, "skip longer prompts", 8, 32768);
  args.add("--batch,-b", &r.batch, "sequences decoded together", 1, 1024);
  args.add("--sampled-share", &r.sampled_share, "fraction of prompts answered by sampling", 0.0, 1.0);
  args.add("--temp", &r.temp, "sampling temperature of the sampled share", 0.01, 5.0);
  args.add("--seed", &r.seed, "selects the sampled prompts and seeds their sampling", 0, INT64_MAX);
  args.add("--n-prompts", &r.n_prompts, "use only the first N prompts (0 = all)", 0, INT64_MAX);
  args.add("--shard-size", &r.shard_size, "prompts per shard", 1, 1 << 20);
  args.add("--shards", &r.max_shards, "work only on the first N shards (0 = all): a smaller dataset of the same\n"
           "settings, e.g. to compare tap layers; a later run without it continues into the rest", 0, INT64_MAX);
  add_threads_flag(args, &f->threads);
  args.add_flag("--prompt-text", &r.prompt_text, "distillation on the prompts themselves: no responses; every chat-templated\n"
                "prompt is run teacher-forced (prefill speed) and each position after BOS gets its taps and the\n"
                "target's distribution. Sequences are marked as text (temperature -1): training masks slots past\n"
                "the first token that leaves the target's own greedy path; they are never held out");
  args.add("--export-ids", &f->export_ids, "write the token ids of every finished shard of --out to FILE and stop\n"
           "(no generation; the file is small enough to keep, see --from-ids)");
  args.add("--from-ids", &r.from_ids, "rebuild shards from an --export-ids file by teacher-forced target forwards\n"
           "(prefill speed) instead of decoding; --taps / --top-k may differ from the original run");
  args.add("--skip-ids", &r.skip_ids, "leave out the shards an --export-ids file of the same settings covers: this\n"
           "folder then continues that run without first rebuilding its shards (export this folder's ids\n"
           "later; --from-ids replays both files into one folder)");
  add_json_flag(args, &f->json, "print a JSON summary on stdout");
}

// Progress bars per phase, notes on their own line.
train::RegenEvents regen_events(std::shared_ptr<std::unique_ptr<ProgressBar>> bar) {
  train::RegenEvents ev;
  ev.note = [](const std::string& line) { std::fprintf(stderr, "dspark regen: %s\n", line.c_str()); };
  ev.progress = [bar, phase = std::string()](const std::string& p, uint64_t done, uint64_t total,
                                             const std::string& rate) mutable {
    if (!*bar || p != phase) {
      *bar = std::make_unique<ProgressBar>(p, total, p == "verify" ? " shards" : " seqs");
      phase = p;
    }
    if (!rate.empty()) (*bar)->set_suffix(rate);
    (*bar)->update(done);
  };
  return ev;
}

void print_summary(const RegenFlags& f, const train::RegenSummary& s) {
  if (f.json) {
    nlohmann::json j = {{"out", f.run.out_dir}, {"sequences_run", s.sequences}, {"new_tokens_run", s.new_tokens},
                        {"prompt_tokens_run", s.prompt_tokens}, {"seconds", s.seconds},
                        {"new_tokens_per_s", s.new_tokens_per_s}, {"shards_done", s.shards_done},
                        {"shards_total", s.shards_total}, {"shards_redone", s.shards_redone},
                        {"response_tokens_total", s.response_tokens_total},
                        {"time_ms", {{"prefill", s.counters.prefill_ms}, {"decode_forward", s.counters.step_ms},
                                     {"distributions_sampling", s.counters.post_ms}}}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("regen: %lld sequences, %lld new tokens in %.1f s (%.0f new tok/s); %s now holds %lld/%lld shards\n",
                (long long)s.sequences, (long long)s.new_tokens, s.seconds, s.new_tokens_per_s, f.run.out_dir.c_str(),
                (long long)s.shards_done, (long long)s.shards_total);
  }
}

}  // namespace

int verb_regen(int argc, char** argv) {
  RegenFlags f;
  Args args("dspark regen --prompts TRAIN.jsonl --out DIR [--taps 1,4,7,10,13,16] [--top-k 32] [--batch 32]",
            "The target answers each training prompt (the model's chat template, first turn): greedy, or sampled\n"
            "at --temp for a --sampled-share of prompts (chosen by prompt index, reproducible). Writes\n"
            "DIR/shard-NNNNN.safetensors (tokens, tapped residual rows as bf16, target top-k next-token\n"
            "distributions) and DIR/manifest.json. Kill it any time: a rerun with the same flags verifies\n"
            "finished shards and continues. Refuses prompts that repeat an evaluation prompt\n"
            "(--eval-prompts, default: spec_bench_dev.jsonl beside the training file, else data/spec_bench_dev.jsonl).");
  add_regen_flags(args, &f);
  const VerbError fail{"regen"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  train::RegenRunOptions& r = f.run;
  if (r.out_dir.empty()) return fail("--out is required");
  if (!f.export_ids.empty()) {  // export mode: no model, no prompts
    if (!fs::exists(fs::path(r.out_dir) / "manifest.json"))
      return fail((fs::path(r.out_dir) / "manifest.json").string() + ": missing or not a regen manifest");
    auto ex = train::export_regen_ids(r.out_dir, f.export_ids);
    if (!ex) return fail(ex.message(), 1);
    std::printf("regen: wrote %lld sequences (%lld tokens) of %lld shards to %s\n", (long long)ex->sequences,
                (long long)ex->tokens, (long long)ex->shards, f.export_ids.c_str());
    return 0;
  }
  if (r.prompts_path.empty()) return fail("--prompts is required");
  auto taps = parse_int_list(f.taps, "--taps");
  if (!taps) return fail(taps.message());
  r.taps = *taps;
  r.threads = (int)f.threads;
  if (r.eval_path.empty()) {
    const fs::path guess = fs::path(r.prompts_path).parent_path() / "spec_bench_dev.jsonl";
    if (fs::exists(guess)) r.eval_path = guess.string();
    else if (fs::exists(runtime::default_prompt_file())) r.eval_path = runtime::default_prompt_file();
  }
  for (int i = 0; i < argc; ++i) {
    if (i) r.command += ' ';
    r.command += argv[i];
  }
  auto bar = std::make_shared<std::unique_ptr<ProgressBar>>();
  const train::RegenEvents events = regen_events(bar);
  auto prompts = train::read_training_prompts(r, events);
  if (!prompts) return fail(prompts.message());
  auto lm = runtime::load_model(f.model_spec, f.cache, f.chat_template);
  if (!lm) return fail(lm.message());
  auto plan = train::plan_regen(r, *prompts, *lm->model, *lm->tok, lm->chat, fs::path(lm->path).filename().string(), events);
  if (!plan) return fail(plan.message());
  auto sum = train::run_regen(**plan, *lm->model, *lm->tok, events);
  if (!sum) return fail(sum.message(), 1);
  print_summary(f, *sum);
  return 0;
}

}  // namespace dspark::tools
