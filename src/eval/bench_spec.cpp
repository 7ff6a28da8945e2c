#include "eval/bench_spec.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "generate/generate.h"
#include "runtime/drafter_mount.h"
#include "eval/arm_run.h"
#include "eval/prompts.h"

namespace dspark::eval {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

struct Arm {
  double ms = 0;
  int64_t tokens = 0;
  double tok_s() const { return ms > 0 ? tokens * 1e3 / ms : 0; }
};

}  // namespace

Result<nlohmann::json> run_bench_spec(const BenchSpecOptions& opt, const LoadedModel& lm,
                                      const std::function<void(uint64_t done, uint64_t total)>& progress) {
  auto prompts = load_prompts(opt.prompts, opt.n_prompts);
  if (!prompts) return prompts.status();
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
      opt.drafter, {.n_ctx = 4096, .cache_dir = resolve_cache_dir(""), .verify_ms = {}, .verbose = false, .note = opt.note}, lm, &pool);
  if (!mount) return mount.status();
  runtime::DrafterBundle& bundle = (*mount)->bundle;
  const std::string kind = bundle.kind;

  std::map<std::string, Arm> serial_by_cat, spec_by_cat;
  std::map<std::string, speculative::SpecStats> stats_by_cat;
  speculative::SpecStats total_stats;
  int identical = 0, n_run = 0;
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
      if (!r) return r.status();
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
    if (progress) progress(i + 1, prompts->size());
  }

  nlohmann::json cats = nlohmann::json::object();
  Arm serial_all, spec_all;
  for (const auto& [cat, s] : serial_by_cat) {
    const Arm& sp = spec_by_cat[cat];
    const speculative::SpecStats& st = stats_by_cat[cat];
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
  return j;
}

std::string format_bench_spec(const nlohmann::json& j) {
  std::string out;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  const nlohmann::json& sm = j["sampler"];
  const bool greedy = sm["temperature"].get<double>() <= 0;
  line("serial vs %s (gamma %d, temperature %g, top-k %d, top-p %g, min-p %g), %d prompts x %lld tokens, %lld threads, "
       "arms alternated per prompt\n\n",
       j["drafter"].get<std::string>().c_str(), j["gamma"].get<int>(), sm["temperature"].get<double>(),
       sm["top_k"].get<int>(), sm["top_p"].get<double>(), sm["min_p"].get<double>(), j["prompts"].get<int>(),
       (long long)j["gen_tokens"].get<int64_t>(), (long long)j["threads"].get<int64_t>());
  out += "| category | serial tok/s | spec tok/s | speedup | tau | acceptance |\n|---|---|---|---|---|---|\n";
  for (const auto& [cat, c] : j["per_category"].items())
    line("| %s | %.1f | %.1f | %.2fx | %.2f | %.1f%% |\n", cat.c_str(), c["serial_tok_s"].get<double>(),
         c["spec_tok_s"].get<double>(), c["speedup"].get<double>(), c["tau"].get<double>(),
         100 * c["acceptance_rate"].get<double>());
  const nlohmann::json& st = j["spec"];
  line("| **all** | %.1f | %.1f | %.2fx | %.2f | %.1f%% |\n", j["serial_tok_s"].get<double>(), j["spec_tok_s"].get<double>(),
       j["speedup"].get<double>(), st["tau"].get<double>(), 100 * st["acceptance_rate"].get<double>());
  out += "\nacceptance by position (accepted / drafted):";
  const auto& drafted = st["drafted_by_pos"];
  for (size_t i = 0; i < drafted.size(); ++i) {
    const double d = drafted[i].get<double>();
    line(" %zu: %.2f", i, d > 0 ? st["accepted_by_pos"][i].get<double>() / d : 0.0);
  }
  if (greedy) line("\noutputs identical to serial: %d / %d\n", j["identical_outputs"].get<int>(), j["prompts"].get<int>());
  else line("\nsampled at temperature %g (outputs differ by design; the distribution is the target's)\n",
            sm["temperature"].get<double>());
  const nlohmann::json& t = st["time_ms"];
  line("time: draft %.0f ms, verify %.0f ms, accept %.0f ms, commit %.0f ms over %lld rounds\n", t["draft"].get<double>(),
       t["verify"].get<double>(), t["accept"].get<double>(), t["commit"].get<double>(),
       (long long)st["rounds"].get<int64_t>());
  return out;
}

}  // namespace dspark::eval
