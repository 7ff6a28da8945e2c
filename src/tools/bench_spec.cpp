#include "tools/bench_spec.h"

#include "tools/spec_flags.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "generate/generate.h"
#include "runtime/drafter_mount.h"
#include "eval/arm_run.h"
#include "core/progress.h"
#include "eval/prompts.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory
using namespace dspark::eval;     // arm runs, evaluation prompts

namespace {

struct Arm {
  double ms = 0;
  int64_t tokens = 0;
  double tok_s() const { return ms > 0 ? tokens * 1e3 / ms : 0; }
};

}  // namespace

int run_bench_spec(const BenchSpecOptions& opt, const LoadedModel& lm) {
  auto prompts = load_prompts(opt.prompts, opt.n_prompts);
  if (!prompts) { std::fprintf(stderr, "dspark bench: %s\n", prompts.message().c_str()); return kExitBadInput; }
  ThreadPool pool((int)opt.threads);
  const int64_t n_ctx = 4096;
  model::Session session(*lm.model, {.n_ctx = n_ctx, .max_batch = 512}, &pool);
  generate::GenerateParams gp;
  gp.max_tokens = (int32_t)opt.n_gen;
  // Fixed-length runs: both arms generate exactly n_gen tokens, so their times compare.
  gp.ignore_eos = true;
  gp.sampler = opt.sampler;
  const bool greedy = opt.sampler.temperature <= 0;

  // One drafter per run: begin() resets its state for every prompt, weights load once.
  auto mount = runtime::mount_drafter(
      opt.drafter, {.n_ctx = 4096, .cache_dir = resolve_cache_dir(""), .verify_ms = {}, .verbose = false}, lm, &pool);
  if (!mount) { std::fprintf(stderr, "dspark bench: %s\n", mount.message().c_str()); return kExitBadInput; }
  runtime::DrafterBundle& bundle = (*mount)->bundle;
  const std::string kind = bundle.kind;

  std::map<std::string, Arm> serial_by_cat, spec_by_cat;
  std::map<std::string, spec::SpecStats> stats_by_cat;
  spec::SpecStats total_stats;
  int identical = 0, n_run = 0;
  ProgressBar bar("bench --spec", prompts->size(), " prompts");
  for (size_t i = 0; i < prompts->size(); ++i) {
    const Prompt& p = (*prompts)[i];
    auto ids = encode_prompt(*lm.tok, lm.chat, p.text, opt.chat);
    if (!ids || (int64_t)ids->size() + opt.n_gen > n_ctx) continue;
    std::vector<int32_t> serial_tokens, spec_tokens;
    gp.sampler.seed = opt.sampler.seed + i;  // the same seed for both arms of a prompt
    // Alternate which arm runs first so drift in machine load hits both equally.
    for (int k = 0; k < 2; ++k) {
      const bool run_spec = (k == 1) == (i % 2 == 0);
      auto r = run_arm(lm, session, *ids, gp, run_spec ? &bundle : nullptr);
      if (!r) { std::fprintf(stderr, "dspark bench: %s\n", r.message().c_str()); return 1; }
      Arm& arm = (run_spec ? spec_by_cat : serial_by_cat)[p.category];
      arm.ms += r->ms;
      arm.tokens += (int64_t)r->tokens.size();
      if (run_spec) {
        stats_by_cat[p.category].merge(r->stats);
        total_stats.merge(r->stats);
        spec_tokens = std::move(r->tokens);
      } else {
        serial_tokens = std::move(r->tokens);
      }
    }
    identical += serial_tokens == spec_tokens;
    ++n_run;
    bar.update(i + 1);
  }

  nlohmann::json cats = nlohmann::json::object();
  Arm serial_all, spec_all;
  for (const auto& [cat, s] : serial_by_cat) {
    const Arm& sp = spec_by_cat[cat];
    const spec::SpecStats& st = stats_by_cat[cat];
    serial_all.ms += s.ms; serial_all.tokens += s.tokens;
    spec_all.ms += sp.ms; spec_all.tokens += sp.tokens;
    cats[cat] = {{"serial_tok_s", s.tok_s()}, {"spec_tok_s", sp.tok_s()}, {"speedup", s.ms / sp.ms},
                 {"tau", st.tau()}, {"acceptance_rate", st.acceptance_rate()}};
  }
  nlohmann::json j = {{"drafter", kind}, {"gamma", bundle.gamma}, {"prompts", n_run}, {"gen_tokens", opt.n_gen},
                      {"threads", opt.threads}, {"serial_tok_s", serial_all.tok_s()}, {"spec_tok_s", spec_all.tok_s()},
                      {"speedup", serial_all.ms / spec_all.ms}, {"identical_outputs", greedy ? nlohmann::json(identical) : nlohmann::json()},
                      {"sampler", {{"temperature", opt.sampler.temperature}, {"top_k", opt.sampler.top_k},
                                   {"top_p", opt.sampler.top_p}, {"min_p", opt.sampler.min_p}, {"seed", opt.sampler.seed}}},
                      {"per_category", cats}, {"spec", total_stats.to_json()}};
  if (opt.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("serial vs %s (gamma %d, temperature %g, top-k %d, top-p %g, min-p %g), %d prompts x %lld tokens, %lld threads, arms alternated per prompt\n\n",
              kind.c_str(), bundle.gamma, opt.sampler.temperature, opt.sampler.top_k, opt.sampler.top_p,
              opt.sampler.min_p, n_run, (long long)opt.n_gen, (long long)opt.threads);
  std::printf("| category | serial tok/s | spec tok/s | speedup | tau | acceptance |\n|---|---|---|---|---|---|\n");
  for (const auto& [cat, c] : cats.items())
    std::printf("| %s | %.1f | %.1f | %.2fx | %.2f | %.1f%% |\n", cat.c_str(), c["serial_tok_s"].get<double>(),
                c["spec_tok_s"].get<double>(), c["speedup"].get<double>(), c["tau"].get<double>(),
                100 * c["acceptance_rate"].get<double>());
  std::printf("| **all** | %.1f | %.1f | %.2fx | %.2f | %.1f%% |\n", serial_all.tok_s(), spec_all.tok_s(),
              serial_all.ms / spec_all.ms, total_stats.tau(), 100 * total_stats.acceptance_rate());
  std::printf("\nacceptance by position (accepted / drafted):");
  for (size_t i = 0; i < total_stats.drafted_by_pos.size(); ++i)
    std::printf(" %zu: %.2f", i, total_stats.drafted_by_pos[i] ? (double)total_stats.accepted_by_pos[i] / total_stats.drafted_by_pos[i] : 0.0);
  if (greedy) std::printf("\noutputs identical to serial: %d / %d\n", identical, n_run);
  else std::printf("\nsampled at temperature %g (outputs differ by design; the distribution is the target's)\n",
                   opt.sampler.temperature);
  std::printf("time: draft %.0f ms, verify %.0f ms, accept %.0f ms, commit %.0f ms over %lld rounds\n",
              total_stats.draft_ms, total_stats.verify_ms, total_stats.accept_ms, total_stats.commit_ms,
              (long long)total_stats.rounds);
  return 0;
}

}  // namespace dspark::tools
