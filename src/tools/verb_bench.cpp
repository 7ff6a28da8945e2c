// dspark bench: llama-bench-style prefill (pp) and decode (tg) speed, median of repeats, and
// the verify-cost curve: time of one forward over 1..K new tokens after a fixed context, which
// decides whether speculative decoding can pay.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/rng.h"
#include "core/threadpool.h"
#include "kernels/ops.h"
#include "kernels/profiling_backend.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "sample/sampler.h"
#include "tools/bench_spec.h"
#include "tools/sampler_flags.h"
#include "tools/spec_flags.h"
#include "runtime/loaded_model.h"
#include "core/progress.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory
using namespace dspark::eval;     // A/B harness, bench --spec, held-out evaluation

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBenchMaxBatch = 512;  // the session's forward chunk, and the kernel plan's last bucket

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Deterministic token ids away from the special/control range (like llama-bench's random tokens):
// ids in [1000, 1000 + min(200000, n_vocab - 1000)), the same ids for every vocabulary of >= 201,000.
std::vector<int32_t> synthetic_tokens(int64_t n, int32_t bos, uint64_t seed, int64_t n_vocab) {
  Rng rng(seed);
  std::vector<int32_t> ids(n);
  ids[0] = bos;
  const uint64_t span = (uint64_t)std::max<int64_t>(1, std::min<int64_t>(200000, n_vocab - 1000));
  for (int64_t i = 1; i < n; ++i) ids[i] = 1000 + (int32_t)(rng.next() % span);
  return ids;
}

// --profile: per op, calls and ms per decoded token and the share of decode wall time; ops called
// from worker threads (attention) are thread time. "other" = decode time outside the timed ops on
// the calling thread (the attention phase's wall time, model code, sampling or argmax in the loop).
nlohmann::json profile_json(const std::vector<kernels::OpTime>& ops, double decode_ms, int64_t tokens) {
  nlohmann::json rows = nlohmann::json::array();
  double caller_ms = 0;
  for (const kernels::OpTime& t : ops) {
    if (!t.thread_time) caller_ms += t.ms;
    rows.push_back({{"op", t.op}, {"calls_per_token", (double)t.calls / (double)tokens},
                    {"ms_per_token", t.ms / (double)tokens}, {"share", t.ms / decode_ms}, {"thread_time", t.thread_time}});
  }
  return {{"decode_ms_per_token", decode_ms / (double)tokens}, {"tokens", tokens}, {"ops", rows},
          {"other_ms_per_token", (decode_ms - caller_ms) / (double)tokens}, {"other_share", (decode_ms - caller_ms) / decode_ms}};
}

void print_profile(const nlohmann::json& p) {
  if (p.contains("window_tokens"))
    std::printf("\nwhere one verify forward of %d new tokens goes (%.3f ms per forward over %lld forwards, timers on):\n"
                "| op | calls / forward | ms / forward | share |\n|---|---:|---:|---:|\n",
                p["window_tokens"].get<int>(), p["decode_ms_per_token"].get<double>(), (long long)p["tokens"].get<int64_t>());
  else
    std::printf("\nwhere a decoded token's time goes (%.3f ms per token over %lld tokens, timers on):\n"
                "| op | calls / token | ms / token | share |\n|---|---:|---:|---:|\n",
                p["decode_ms_per_token"].get<double>(), (long long)p["tokens"].get<int64_t>());
  for (const auto& r : p["ops"])
    std::printf("| %s | %.1f | %.4f | %.1f %% |\n", r["op"].get<std::string>().c_str(), r["calls_per_token"].get<double>(),
                r["ms_per_token"].get<double>(), 100.0 * r["share"].get<double>());
  std::printf("| other (outside the caller's timed ops: attention's wall time, model code, argmax) | | %.4f | %.1f %% |\n",
              p["other_ms_per_token"].get<double>(), 100.0 * p["other_share"].get<double>());
}

}  // namespace

int verb_bench(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, chat_template;
  int64_t n_prompt = 512, n_gen = 128, threads = ThreadPool::default_threads(), repeats = 5;
  int64_t curve_ctx = 512, curve_max = 16;
  bool json = false, curve = false, spec_mode = false, no_chat = false, verbose = false, profile = false;
  BenchSpecOptions sopt;
  SpecFlags spec_flags;  // --spec: the drafter; n-gram unless told otherwise, checkpoints as given
  spec_flags.config.kind = "ngram";
  spec_flags.config.quant = spec::DraftQuant::kNone;
  int64_t n_spec_prompts = sopt.n_prompts;
  SamplerFlags sf;
  Args args("dspark bench --model M -p 512 -n 128 --threads 2 [--repeats R] [--json] [--verify-curve]",
            "Prefill speed over -p synthetic tokens and decode speed over -n greedy tokens after a short\n"
            "prompt; medians of --repeats runs. --verify-curve also times one forward of 1..K new tokens\n"
            "(all-position logits, as speculative verify needs) after --curve-ctx tokens of context.\n"
            "With --temp > 0 each repeat also decodes the same prompt sampled (greedy and sampled alternate\n"
            "which runs first), and the time of one sampled row (softmax, truncation, draw) is reported\n"
            "apart from the forward.");
  std::string backend, kernel_plan = "auto", lm_head = "argmax";
  add_model_flags(args, &model_spec, &cache, &chat_template);
  add_backend_flag(args, &backend, &kernel_plan);
  add_verbose_flag(args, &verbose);
  args.add("--n-prompt,-p", &n_prompt, "prefill length in tokens (0 = skip)", 0, 1 << 16);
  args.add("--n-gen,-n", &n_gen, "decode length in tokens (0 = skip)", 0, 1 << 16);
  add_threads_flag(args, &threads);
  args.add("--repeats,-r", &repeats, "repeats per measurement", 1, 1000);
  args.add_flag("--verify-curve", &curve, "also measure the verify-cost curve");
  args.add_flag("--profile", &profile,
                "time every backend op during the decode runs (matmuls by weight type and shape, attention, norms, ...)\n"
                "and print where a decoded token's time goes (the timers slow decode slightly); with --verify-curve\n"
                "also for the verify forwards of 1 and --curve-max new tokens");
  args.add("--curve-ctx", &curve_ctx, "context length before the curve's forwards", 1, 1 << 16);
  args.add("--curve-max", &curve_max, "largest number of new tokens on the curve", 1, 64);
  args.add("--lm-head", &lm_head,
           "argmax (default): greedy decode and the verify curve read only each row's argmax, through the\n"
           "model's exact greedy head where it has one (as generate and serve do at temperature 0); full: every\n"
           "logit computed (as llama-bench does); both: greedy decode with each head, alternating per repeat");
  add_sampler_flags(args, &sf);
  add_json_flag(args, &json, "print one JSON object");
  args.add_flag("--spec", &spec_mode, "serial vs speculative on a prompt file, per category (-n tokens per prompt)");
  args.add("--prompts", &sopt.prompts, "--spec: JSONL with {category, turns: [text]}");
  args.add("--n-prompts", &n_spec_prompts, "--spec: prompts to run, round robin over categories", 1, 100000);
  args.add_flag("--no-chat", &no_chat, "--spec: feed prompts raw instead of chat-templated");
  add_spec_flags(args, &spec_flags, /*no_spec_flag=*/false);  // used by --spec
  if (Status st = args.parse(argc, argv, 2); !st) {
    std::fprintf(stderr, "dspark bench: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (lm_head != "argmax" && lm_head != "full" && lm_head != "both") {
    std::fprintf(stderr, "dspark bench: --lm-head must be argmax, full or both, not '%s'\n", lm_head.c_str());
    return kExitBadInput;
  }
  if (spec_mode) {
    if (spec_flags.given.count("draft-model") && !spec_flags.given.count("draft-kind")) spec_flags.config.kind = "auto";
    if (Status st = spec::check_spec(spec_flags.config); !st) {
      std::fprintf(stderr, "dspark bench: --%s\n", st.message().c_str());
      return kExitBadInput;
    }
  }
  // The target's backend (with its kernel plan) first, so --profile can wrap it.
  auto model_path = resolve_model_path(model_spec, resolve_cache_dir(cache));
  if (!model_path) { std::fprintf(stderr, "dspark bench: %s\n", model_path.message().c_str()); return kExitBadInput; }
  auto tb = target_backend(*model_path, resolve_cache_dir(cache),
                           BackendFlags{backend, kernel_plan, (int)threads, kBenchMaxBatch});
  if (!tb) { std::fprintf(stderr, "dspark bench: %s\n", tb.message().c_str()); return kExitBadInput; }
  const kernels::ProfilingBackend prof(*tb->backend);  // used only with --profile
  auto lm = load_model(*model_path, cache, chat_template, profile ? prof : *tb->backend);
  if (!lm) { std::fprintf(stderr, "dspark bench: %s\n", lm.message().c_str()); return kExitBadInput; }
  if (verbose) std::fputs((runtime::plan_report(*tb) + runtime::kernel_report(*lm->model)).c_str(), stderr);
  if (spec_mode) {
    sopt.n_gen = n_gen;
    sopt.n_prompts = n_spec_prompts;
    sopt.chat = !no_chat;
    sopt.json = json;
    sopt.threads = threads;
    sopt.sampler = sf.config();
    if (Status st = sample::validate(sopt.sampler); !st) { std::fprintf(stderr, "dspark bench: %s\n", st.message().c_str()); return kExitBadInput; }
    sopt.drafter = spec_flags.config;
    return run_bench_spec(sopt, *lm);
  }
  const auto& model = *lm->model;
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t n_ctx = std::max<int64_t>({n_prompt, 8 + n_gen, curve ? curve_ctx + curve_max : 0}) + 8;
  ThreadPool pool((int)threads);
  model::Session s(model, model::SessionOptions{.n_ctx = n_ctx, .max_batch = kBenchMaxBatch}, &pool);
  const model::ForwardOptions last{model::LogitsMode::kLast, {}};

  std::vector<double> pp_tok_s, tg_tok_s, tg_full_tok_s, tg_sampled_tok_s, row_ms;
  const sample::SamplerConfig scfg = sf.config();
  if (Status st = sample::validate(scfg); !st) { std::fprintf(stderr, "dspark bench: %s\n", st.message().c_str()); return kExitBadInput; }
  const bool sampled = scfg.temperature > 0;
  // One decode run after the short prompt: greedy (argmax) or through the sampler. Returns tok/s;
  // sampled runs append each row's sampler time (ms) to row_ms.
  double decode_ms = 0;  // over every decode run (greedy and sampled), for --profile's shares
  int64_t decoded = 0;
  std::vector<float> kept_rows;  // logits rows of the first sampled run, every 8th token, for the isolated timing
  auto decode_run = [&](bool use_sampler, bool full_head, double* tok_s) -> Status {
    s.kv().clear();
    const auto prompt = lm->tok->encode("The history of the city begins", true, false);
    const model::ForwardOptions step{model::LogitsMode::kLast, {}, !use_sampler && !full_head};
    DSPARK_RETURN_IF_ERROR(model.forward(s, prompt, step));
    sample::Sampler smp(scfg, s.pool());
    if (profile) prof.start();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n_gen; ++i) {
      int32_t id;
      if (use_sampler) {
        const auto r0 = Clock::now();
        id = smp.sample(s.logits(), n_vocab);
        row_ms.push_back(ms_between(r0, Clock::now()));
        if (i % 8 == 0 && kept_rows.size() < (size_t)(16 * n_vocab))
          kept_rows.insert(kept_rows.end(), s.logits(), s.logits() + n_vocab);
      } else {
        id = (int32_t)kernels::argmax(s.logits(), n_vocab);
      }
      DSPARK_RETURN_IF_ERROR(model.forward(s, std::span<const int32_t>(&id, 1), step));
    }
    const double ms = ms_between(t0, Clock::now());
    if (profile) prof.stop();
    decode_ms += ms;
    decoded += n_gen;
    *tok_s = n_gen * 1e3 / ms;
    return Status::ok();
  };
  ProgressBar bar("bench", (uint64_t)repeats);
  for (int64_t r = 0; r < repeats; ++r) {
    if (n_prompt > 0) {
      const auto ids = synthetic_tokens(n_prompt, lm->tok->bos(), 1234 + r, lm->tok->n_vocab());
      s.kv().clear();
      const auto t0 = Clock::now();
      if (Status st = model.forward(s, ids, last); !st) { std::fprintf(stderr, "%s\n", st.message().c_str()); return 1; }
      pp_tok_s.push_back(n_prompt * 1e3 / ms_between(t0, Clock::now()));
    }
    if (n_gen > 0) {
      // Greedy and sampled (or the two heads) alternate which runs first, repeat by repeat.
      const bool both = lm_head == "both";
      std::vector<int> kinds = {0};  // 0 greedy, 1 greedy with the full head, 2 sampled
      if (both) kinds.push_back(1);
      if (sampled) kinds.push_back(2);
      if (r % 2 == 1) std::reverse(kinds.begin(), kinds.end());
      for (const int kind : kinds) {
        const bool use_sampler = kind == 2, full = kind == 1 || lm_head == "full";
        double v = 0;
        if (Status st = decode_run(use_sampler, full, &v); !st) { std::fprintf(stderr, "%s\n", st.message().c_str()); return 1; }
        (kind == 2 ? tg_sampled_tok_s : kind == 1 ? tg_full_tok_s : tg_tok_s).push_back(v);
      }
    }
    bar.update((uint64_t)r + 1);
  }

  // The decode profile is read before the curve, which reuses the timers per window size.
  nlohmann::json decode_profile;
  if (profile && decoded > 0) decode_profile = profile_json(prof.table(), decode_ms, decoded);
  nlohmann::json curve_json = nlohmann::json::array();
  nlohmann::json curve_profiles = nlohmann::json::array();  // --profile: windows of 1 and curve_max tokens
  if (curve) {
    const auto ctx_ids = synthetic_tokens(curve_ctx, lm->tok->bos(), 99, lm->tok->n_vocab());
    s.kv().clear();
    if (Status st = model.forward(s, ctx_ids, last); !st) { std::fprintf(stderr, "%s\n", st.message().c_str()); return 1; }
    const auto new_ids = synthetic_tokens(curve_max + 1, 1000, 7, lm->tok->n_vocab());
    const model::ForwardOptions all{model::LogitsMode::kAll, {}, lm_head != "full"};
    double base_ms = 0;
    ProgressBar cbar("verify curve", (uint64_t)curve_max);
    for (int64_t k = 1; k <= curve_max; ++k) {
      std::vector<double> ms;
      const bool prof_k = profile && (k == 1 || k == curve_max);
      if (prof_k) {
        prof.reset();
        prof.start();
      }
      for (int64_t r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        if (Status st = model.forward(s, std::span<const int32_t>(new_ids.data() + 1, k), all); !st) {
          std::fprintf(stderr, "%s\n", st.message().c_str());
          return 1;
        }
        ms.push_back(ms_between(t0, Clock::now()));
        s.kv().trim(k);
      }
      if (prof_k) {
        prof.stop();
        double total = 0;
        for (double v : ms) total += v;
        nlohmann::json pj = profile_json(prof.table(), total, repeats);  // "per token" = per forward here
        pj["window_tokens"] = k;
        curve_profiles.push_back(pj);
      }
      const double m = median(ms);
      if (k == 1) base_ms = m;
      curve_json.push_back({{"n_tokens", k}, {"ms", m}, {"ratio_to_1", m / base_ms}});
      cbar.update((uint64_t)k);
    }
  }

  nlohmann::json j = {{"model", lm->path}, {"threads", threads}, {"repeats", repeats},
                      {"prompt_tokens", n_prompt}, {"gen_tokens", n_gen},
                      {"prefill_tok_s", median(pp_tok_s)}, {"decode_tok_s", median(tg_tok_s)},
                      {"prefill_runs_tok_s", pp_tok_s}, {"decode_runs_tok_s", tg_tok_s},
                      {"peak_rss_bytes", peak_rss_bytes()}, {"kv_cache_bytes", s.kv().bytes()}};
  j["lm_head"] = lm_head;
  j["backend"] = model.backend().name();
  j["kernel_plan"] = tb->plan_status;
  j["argmax_head"] = model.argmax_head() != nullptr;
  if (model.argmax_head()) {
    const model::ArgmaxScratch& as = s.argmax_stats();
    j["argmax_head_bytes"] = model.argmax_head()->bytes();
    j["argmax_head_rows"] = as.rows_run;
    j["argmax_head_candidates_per_row"] = as.rows_run > as.fallbacks ? (double)as.candidates / (double)(as.rows_run - as.fallbacks) : 0.0;
    j["argmax_head_fallbacks"] = as.fallbacks;
    j["argmax_head_unscreened_rows"] = as.full_rows;
  }
  if (!tg_full_tok_s.empty()) {
    std::vector<double> ratio;  // argmax head / full head per repeat (adjacent runs)
    for (size_t r = 0; r < tg_full_tok_s.size(); ++r) ratio.push_back(tg_tok_s[r] / tg_full_tok_s[r]);
    j["decode_full_head_tok_s"] = median(tg_full_tok_s);
    j["decode_full_head_runs_tok_s"] = tg_full_tok_s;
    j["argmax_over_full_head"] = median(ratio);
  }
  if (curve) j["verify_curve"] = curve_json;
  if (!curve_profiles.empty()) j["verify_profiles"] = curve_profiles;
  std::vector<double> paired;  // sampled / greedy per repeat (the two runs of a repeat are adjacent)
  for (size_t r = 0; r < tg_sampled_tok_s.size(); ++r) paired.push_back(tg_sampled_tok_s[r] / tg_tok_s[r]);
  // The same rows again, back to back outside decode (caches warm, pool idle): the sampler alone.
  std::vector<double> iso_ms;
  if (sampled && !kept_rows.empty()) {
    sample::Sampler smp(scfg, s.pool());
    for (int rep = 0; rep < 10; ++rep)
      for (size_t r = 0; r * n_vocab < kept_rows.size(); ++r) {
        const auto r0 = Clock::now();
        (void)smp.sample(kept_rows.data() + r * n_vocab, n_vocab);
        iso_ms.push_back(ms_between(r0, Clock::now()));
      }
  }
  if (sampled && n_gen > 0) {
    j["sample_row_isolated_ms_median"] = median(iso_ms);
    std::vector<double> sorted_rows = row_ms;
    std::sort(sorted_rows.begin(), sorted_rows.end());
    j["sampler"] = {{"temperature", scfg.temperature}, {"top_k", scfg.top_k}, {"top_p", scfg.top_p},
                    {"min_p", scfg.min_p}, {"seed", scfg.seed}};
    j["decode_sampled_tok_s"] = median(tg_sampled_tok_s);
    j["decode_sampled_runs_tok_s"] = tg_sampled_tok_s;
    j["sampled_over_greedy"] = median(paired);
    j["sample_row_ms_median"] = median(row_ms);
    j["sample_row_ms_p90"] = sorted_rows[(size_t)(0.9 * (double)(sorted_rows.size() - 1))];
    j["sample_row_ms_max"] = sorted_rows.back();
  }
  if (!decode_profile.is_null()) j["profile"] = decode_profile;
  if (json) {
    std::printf("%s\n", j.dump().c_str());  // one line: easy to parse from scripts
    return 0;
  }
  std::printf("| test | tok/s (median of %lld) |\n|---|---|\n", (long long)repeats);
  if (n_prompt > 0) std::printf("| pp%lld | %.1f |\n", (long long)n_prompt, median(pp_tok_s));
  if (n_gen > 0) std::printf("| tg%lld%s | %.1f |\n", (long long)n_gen, lm_head == "full" ? " (full LM head)" : "", median(tg_tok_s));
  if (!tg_full_tok_s.empty())
    std::printf("| tg%lld, full LM head | %.1f |\nexact greedy head / full head %.3f (median of per-repeat ratios)\n",
                (long long)n_gen, median(tg_full_tok_s), j["argmax_over_full_head"].get<double>());
  if (j.contains("argmax_head_rows") && j["argmax_head_rows"].get<int64_t>() > 0)
    std::printf("exact greedy head: %.1f MB, %.0f candidate rows per screened row, %lld of %lld screened rows fell back to "
                "the full head, %lld rows sent to it unscreened\n",
                j["argmax_head_bytes"].get<double>() / 1e6, j["argmax_head_candidates_per_row"].get<double>(),
                (long long)j["argmax_head_fallbacks"].get<int64_t>(), (long long)j["argmax_head_rows"].get<int64_t>(),
                (long long)j["argmax_head_unscreened_rows"].get<int64_t>());
  if (sampled && n_gen > 0)
    std::printf("| tg%lld sampled (T %g, top-k %d, top-p %g, min-p %g) | %.1f |\n"
                "sampled / greedy %.3f (median of per-repeat ratios); one sampled row: median %.3f ms, p90 %.3f ms, max %.3f ms "
                "(in decode), median %.3f ms (the same rows again, back to back)\n",
                (long long)n_gen, scfg.temperature, scfg.top_k, scfg.top_p, scfg.min_p, median(tg_sampled_tok_s),
                median(paired), j["sample_row_ms_median"].get<double>(), j["sample_row_ms_p90"].get<double>(),
                j["sample_row_ms_max"].get<double>(), j["sample_row_isolated_ms_median"].get<double>());
  std::printf("peak RSS %.1f MB, KV cache %.1f MB, threads %lld\n", peak_rss_bytes() / 1e6, s.kv().bytes() / 1e6,
              (long long)threads);
  if (j.contains("profile")) print_profile(j["profile"]);
  if (curve) {
    std::printf("\nverify curve after %lld tokens of context:\n| new tokens | ms | ratio to 1 |\n|---|---|---|\n",
                (long long)curve_ctx);
    for (const auto& c : curve_json)
      std::printf("| %d | %.2f | %.2f |\n", c["n_tokens"].get<int>(), c["ms"].get<double>(), c["ratio_to_1"].get<double>());
    if (j.contains("verify_profiles"))
      for (const auto& p : j["verify_profiles"]) print_profile(p);
  }
  return 0;
}

}  // namespace dspark::tools
