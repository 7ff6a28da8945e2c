// dspark ab: parses the flags into AbOptions and runs the acceptance A/B harness (ab_run.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "core/progress.h"
#include "core/threadpool.h"
#include "eval/ab_run.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/registry.h"
#include "tools/sampler_flags.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory
using namespace dspark::eval;     // A/B harness, bench --spec, held-out evaluation

namespace {

// The folder that will hold `path` must exist (checked before the long run, not after).
Status check_output_path(const std::string& flag, const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return Status::error(flag + ": folder " + parent.string() + " does not exist");
  if (std::filesystem::is_directory(path, ec)) return Status::error(flag + ": " + path + " is a folder");
  return Status::ok();
}

// "2.9,3.1,3.3": ms for 1, 2, 3 tokens; each a finite number > 0, none below the one before (a
// forward over more tokens never costs less, as measure_verify_ms's fit also ensures).
Result<std::vector<double>> parse_verify_table(const std::string& text) {
  std::vector<double> v;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    char* stop = nullptr;
    const double ms = std::strtod(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !std::isfinite(ms) || ms <= 0)
      return Status::error("--verify-table: entry " + std::to_string(v.size() + 1) + " '" + item +
                           "' is not a number of ms > 0 (expected MS,MS,... for 1, 2, ... tokens)");
    if (!v.empty() && ms < v.back())
      return Status::error("--verify-table: entry " + std::to_string(v.size() + 1) + " (" + item +
                           " ms) is below the one before: a forward over more tokens never costs less");
    v.push_back(ms);
    start = end + 1;
  }
  return v;
}

const VerbError bad{"ab"};

constexpr const char* kAbHelp =
    "Acceptance A/B harness: runs the same prompts under every arm (the target is loaded once, the\n"
    "arm order alternates per prompt and repeat) and compares each arm with A: pooled acceptance\n"
    "and acceptance by draft position, tau (tokens per target round), tok/s, and a paired bootstrap\n"
    "over prompts giving 95% CIs for the acceptance change (points) and the speed ratio B/A.\n"
    "Verdict: an arm passes if the acceptance-change CI lower bound >= --min-accept-delta and the\n"
    "speed-ratio CI lower bound > --min-speed-ratio (speed rule only when an arm is serial).\n"
    "Exit code: 0 every arm passes, 1 one fails, 2 bad input.\n\n"
    "SPEC is 'serial' or comma-separated drafter settings with generate's flag names (without --):\n"
    "  draft-kind=auto|ngram|suffix|draft-model|dspark, draft-model=PATH, suffix-index=PATH (draft-kind\n"
    "  suffix, alone it implies it; with a DSpark drafter, its copy head's third source), num-draft-tokens=G (0 = the drafter's\n"
    "  default: a DSpark block, else 5), draft-threshold=T, draft-schedule=fixed|cost|cost-static|cost-gated,\n"
    "  draft-copy=auto|on|off|only|first, draft-quant=none|auto (default none: the checkpoint as given),\n"
    "  draft-governor=on|pooled|off (default on: each round's draft length, 0 = plain, from measured tokens\n"
    "  per ms, by draft class), draft-sure=on|off (default on: plain rounds still take copies the drafter is\n"
    "  sure of)\n"
    "Either may end with ',lm-head=full': every logit computed at T 0 instead of the exact greedy head\n"
    "  (same tokens; measures that head), e.g. --arm sfull=serial,lm-head=full\n"
    "e.g. --a serial --b draft-kind=ngram,num-draft-tokens=3\n"
    "     --a draft-model=ckpt_v1 --b draft-model=ckpt_v2,draft-threshold=0.3";

struct AbFlags {
  std::string model_spec = "gemma3-270m", cache, chat_template, spec_a, spec_b, backend, kernel_plan = "auto";
  std::string verify_table;
  std::vector<std::string> named_arms;
  AbOptions opt;
  SamplerFlags sf;
  int64_t max_tokens = opt.settings.max_tokens, repeats = 1, threads = ThreadPool::default_threads();
  int64_t n_ctx = opt.settings.n_ctx, n_boot = opt.settings.bootstrap.n_boot;
  double min_accept = opt.settings.rule.min_accept_delta_pts, min_speed = opt.settings.rule.min_speed_ratio;
  bool no_chat = false, ignore_eos = false, verbose = false;
};

void add_ab_flags(Args& args, AbFlags* f) {
  AbOptions& opt = f->opt;
  add_model_flags(args, &f->model_spec, &f->cache, &f->chat_template);
  add_backend_flag(args, &f->backend, &f->kernel_plan);
  add_verbose_flag(args, &f->verbose);
  args.add("--a", &f->spec_a, "arm A (the baseline): SPEC");
  args.add("--b", &f->spec_b, "arm B: SPEC");
  args.add_list("--arm", &f->named_arms, "another arm, NAME=SPEC (repeatable; without --a, the first is the baseline)");
  args.add("--prompts", &opt.prompts, "JSONL with {category, turns: [text]}");
  args.add("--n-prompts", &opt.n_prompts, "prompts to run, round robin over categories; 0 = all", 0, 1000000);
  args.add("--max-tokens,-n", &f->max_tokens, "new tokens per prompt", 1, 1 << 16);
  args.add_flag("--ignore-eos", &f->ignore_eos,
                "keep generating past end-of-sequence: exactly -n tokens per prompt (default: a prompt ends at its\n"
                "EOS or after -n tokens, as a server request does; past EOS an instruction model writes text no\n"
                "user sees and no drafter trained on)");
  args.add_flag("--no-chat", &f->no_chat, "feed prompts raw instead of chat-templated");
  add_sampler_flags(args, &f->sf, "seed of sampling (per prompt: seed + index) and of the bootstrap; at --temp 0\n"
                    "outputs must match across arms");
  args.add("--repeats,-r", &f->repeats, "runs of each prompt per arm, summed (order alternates per repeat)", 1, 1000);
  add_threads_flag(args, &f->threads);
  args.add("--ctx", &f->n_ctx, "context size in tokens; longer prompts are skipped", 16, 1 << 20);
  args.add("--verify-table", &f->verify_table,
           "MS,MS,...: the cost-aware arms' verify-cost table, ms of one target forward over 1, 2, ... tokens\n"
           "(at least 8 entries, or num-draft-tokens + 1), instead of one measured at start-up: runs that give the\n"
           "same table draft alike, so binaries or sessions compare on speed, not on the table's noise (each run\n"
           "prints its table on stderr and in --json as verify_table_ms)");
  args.add("--bootstrap", &f->n_boot, "bootstrap resamples", 1, 10000000);
  args.add("--min-accept-delta", &f->min_accept, "verdict: lowest allowed acceptance-change CI lower bound, points",
           -100.0, 100.0);
  args.add("--min-speed-ratio", &f->min_speed, "verdict: the speed-ratio CI lower bound must exceed this", 0.0, 1000.0);
  add_json_flag(args, &opt.json, "print one JSON object (per arm, comparisons, per prompt) instead of markdown");
  args.add("--markdown", &opt.markdown_path, "also write the markdown tables to this file");
  args.add("--plot", &opt.plot_path, "write a PNG of acceptance by position (runs --plot-script)");
  args.add("--python", &opt.python, "python for --plot, looked up in PATH; needs matplotlib");
  args.add("--plot-script", &opt.plot_script, "the plotting script");
}

// The arms: --a / --b, then the named --arm ones (names unique).
Status parse_arms(AbFlags& f) {
  AbOptions& opt = f.opt;
  if (!f.spec_a.empty()) {
    auto a = parse_arm_spec("A", f.spec_a);
    if (!a) return a.status();
    opt.arms.push_back(std::move(a).value());
  }
  if (!f.spec_b.empty()) {
    if (f.spec_a.empty()) return Status::error("--b needs --a (the baseline)");
    auto b = parse_arm_spec("B", f.spec_b);
    if (!b) return b.status();
    opt.arms.push_back(std::move(b).value());
  }
  std::set<std::string> names;
  for (const ArmSpec& a : opt.arms) names.insert(a.name);
  for (const std::string& text : f.named_arms) {
    auto a = parse_named_arm(text);
    if (!a) return a.status();
    if (!names.insert(a->name).second) return Status::error("two arms are named '" + a->name + "'");
    opt.arms.push_back(std::move(a).value());
  }
  if (opt.arms.size() < 2) return Status::error("need two arms: --a SPEC --b SPEC, or --arm NAME=SPEC twice (see --help)");
  return Status::ok();
}

// Everything the flags alone can tell, and the settings they give.
Status check_ab_flags(const Args& args, AbFlags& f) {
  AbOptions& opt = f.opt;
  if (!args.positional().empty()) return Status::error("unexpected argument '" + args.positional()[0] + "'");
  DSPARK_RETURN_IF_ERROR(parse_arms(f));
  if (!f.verify_table.empty()) {
    auto t = parse_verify_table(f.verify_table);
    if (!t) return t.status();
    opt.verify_table_ms = std::move(t).value();
  }
  if (!opt.markdown_path.empty()) DSPARK_RETURN_IF_ERROR(check_output_path("--markdown", opt.markdown_path));
  if (!opt.plot_path.empty()) DSPARK_RETURN_IF_ERROR(check_output_path("--plot", opt.plot_path));
  AbSettings& s = opt.settings;
  s.max_tokens = f.max_tokens;
  s.sampler = f.sf.config();
  DSPARK_RETURN_IF_ERROR(sample::validate(s.sampler));
  s.repeats = f.repeats;
  s.threads = f.threads;
  s.n_ctx = f.n_ctx;
  s.chat = !f.no_chat;
  s.stop_at_eos = !f.ignore_eos;
  s.bootstrap.n_boot = f.n_boot;
  s.bootstrap.seed = s.sampler.seed;
  s.rule = {.min_accept_delta_pts = f.min_accept, .min_speed_ratio = f.min_speed};
  return Status::ok();
}

// Notes on stderr, progress as a bar.
AbEvents ab_events(std::shared_ptr<ProgressBar>* bar) {
  AbEvents ev;
  ev.note = [](const std::string& line) { std::fprintf(stderr, "dspark ab: %s\n", line.c_str()); };
  ev.progress = [bar](uint64_t done, uint64_t total) {
    if (!*bar) *bar = std::make_shared<ProgressBar>("ab", total, " runs");
    (*bar)->update(done);
  };
  return ev;
}

// The report on stdout (markdown or JSON), the markdown file and the plot.
void print_ab(const AbOptions& opt, const AbReport& report) {
  const nlohmann::json j = to_json(report);
  const std::string md = to_markdown(report);
  if (opt.json) std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else std::printf("%s", md.c_str());
  std::fflush(stdout);
  if (!opt.markdown_path.empty()) {
    std::ofstream out(opt.markdown_path);
    if (!(out << md)) std::fprintf(stderr, "dspark ab: warning: cannot write %s\n", opt.markdown_path.c_str());
  }
  if (!opt.plot_path.empty()) std::fprintf(stderr, "dspark ab: %s\n", plot_ab(opt, j).c_str());
}

}  // namespace

int verb_ab(int argc, char** argv) {
  AbFlags f;
  f.opt.plot_script = find_shipped("scripts", "plot_ab.py");
  if (f.opt.plot_script.empty()) f.opt.plot_script = "scripts/plot_ab.py";
  Args args(
      "dspark ab --a SPEC --b SPEC [--arm NAME=SPEC ...] [--prompts FILE] [--n-prompts N] [-n N]\n"
      "       [--temp T] [--top-k K] [--top-p P] [--min-p M] [--seed S] [--repeats R] [--json] [--markdown FILE] [--plot PNG]",
      kAbHelp);
  add_ab_flags(args, &f);
  if (auto rc = parse_verb_args(args, argc, argv, bad)) return *rc;
  if (Status st = check_ab_flags(args, f); !st) return bad(st.message());
  auto lm = load_model(f.model_spec, f.cache, f.chat_template,
                       BackendFlags{f.backend, f.kernel_plan, (int)f.threads, model::SessionOptions{}.max_batch, print_note, {}});
  if (!lm) return bad(lm.message());
  if (f.verbose) std::fputs(runtime::kernel_report(*lm->model).c_str(), stderr);
  if (f.n_ctx > lm->model->config().n_ctx_train)
    return bad("--ctx " + std::to_string(f.n_ctx) + " exceeds the model's training context " +
               std::to_string(lm->model->config().n_ctx_train));
  std::shared_ptr<ProgressBar> bar;
  const AbEvents events = ab_events(&bar);
  auto plan = plan_ab(f.opt, *lm, events);
  if (!plan) return bad(plan.message());
  auto report = run_ab(**plan, events);
  if (!report) return bad(report.message(), 1);
  print_ab(f.opt, *report);
  return report->pass() ? 0 : 1;  // exit code: 0 every comparison passes, 1 one fails
}

}  // namespace dspark::tools
