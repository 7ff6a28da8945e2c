#include "eval/speed_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/rng.h"
#include "core/threadpool.h"
#include "kernels/ops.h"

namespace dspark::eval {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

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
  // Ids from 1000 on (past a real vocabulary's special and byte tokens); a small test vocabulary from 1.
  const int64_t base = n_vocab > 2000 ? 1000 : 1;
  const uint64_t span = (uint64_t)std::max<int64_t>(1, std::min<int64_t>(200000, n_vocab - base));
  for (int64_t i = 1; i < n; ++i) ids[i] = (int32_t)base + (int32_t)(rng.next() % span);
  return ids;
}

// Per op, calls and ms per decoded token and the share of decode wall time; ops called from worker
// threads (attention) are thread time. "other" = decode time outside the timed ops on the calling
// thread (the attention phase's wall time, model code, sampling or argmax in the loop).
json profile_json(const std::vector<kernels::OpTime>& ops, double decode_ms, int64_t tokens) {
  json rows = json::array();
  double caller_ms = 0;
  for (const kernels::OpTime& t : ops) {
    if (!t.thread_time) caller_ms += t.ms;
    rows.push_back({{"op", t.op}, {"calls_per_token", (double)t.calls / (double)tokens},
                    {"ms_per_token", t.ms / (double)tokens}, {"share", t.ms / decode_ms}, {"thread_time", t.thread_time}});
  }
  return {{"decode_ms_per_token", decode_ms / (double)tokens}, {"tokens", tokens}, {"ops", rows},
          {"other_ms_per_token", (decode_ms - caller_ms) / (double)tokens}, {"other_share", (decode_ms - caller_ms) / decode_ms}};
}

// The short prompt decode runs start from.
std::vector<int32_t> decode_prompt(const runtime::LoadedModel& lm) {
  return lm.tok->encode("The history of the city begins", true, false);
}

// One measurement run's state: the model's session and everything the repeats collect.
struct Bench {
  Bench(const SpeedBenchOptions& o, const runtime::LoadedModel& m, const kernels::ProfilingBackend* p, model::Session& sess)
      : opt(o), lm(m), prof(p), s(sess) {}
  const SpeedBenchOptions& opt;
  const runtime::LoadedModel& lm;
  const kernels::ProfilingBackend* prof;
  model::Session& s;
  std::vector<double> pp_tok_s, tg_tok_s, tg_full_tok_s, tg_sampled_tok_s, row_ms;
  double decode_ms = 0;  // over every decode run (greedy and sampled), for the profile's shares
  int64_t decoded = 0;
  std::vector<float> kept_rows;  // logits rows of the first sampled run, every 8th token, for the isolated timing
  json curve = json::array(), curve_profiles = json::array();

  int64_t n_vocab() const { return lm.model->config().n_vocab; }

  // One decode run after the short prompt: greedy (argmax) or through the sampler. Sampled runs
  // append each row's sampler time (ms) to row_ms.
  Result<double> decode_run(bool use_sampler, bool full_head) {
    const model::Model& model = *lm.model;
    s.kv().clear();
    const std::vector<int32_t> prompt = decode_prompt(lm);
    const model::ForwardOptions step{model::LogitsMode::kLast, {}, !use_sampler && !full_head};
    DSPARK_RETURN_IF_ERROR(model.forward(s, prompt, step));
    sample::Sampler smp(opt.sampler, s.pool());
    if (prof) prof->start();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < opt.n_gen; ++i) {
      int32_t id;
      if (use_sampler) {
        const auto r0 = Clock::now();
        id = smp.sample(s.logits(), n_vocab());
        row_ms.push_back(ms_between(r0, Clock::now()));
        if (i % 8 == 0 && kept_rows.size() < (size_t)(16 * n_vocab()))
          kept_rows.insert(kept_rows.end(), s.logits(), s.logits() + n_vocab());
      } else {
        id = (int32_t)kernels::argmax(s.logits(), n_vocab());
      }
      DSPARK_RETURN_IF_ERROR(model.forward(s, std::span<const int32_t>(&id, 1), step));
    }
    const double ms = ms_between(t0, Clock::now());
    if (prof) prof->stop();
    decode_ms += ms;
    decoded += opt.n_gen;
    return opt.n_gen * 1e3 / ms;
  }

  // With --profile: `opt.repeats` more prefills of -p tokens with the timers on, after the timed
  // repeats (their timers would mix with decode's): where a prefill's time goes, per forward.
  Result<json> prefill_profile() {
    prof->reset();
    double total = 0;
    for (int64_t r = 0; r < opt.repeats; ++r) {
      const auto ids = synthetic_tokens(opt.n_prompt, lm.tok->bos(), 4321 + r, lm.tok->n_vocab());
      s.kv().clear();
      prof->start();
      const auto t0 = Clock::now();
      DSPARK_RETURN_IF_ERROR(lm.model->forward(s, ids, model::ForwardOptions{model::LogitsMode::kLast, {}}));
      total += ms_between(t0, Clock::now());
      prof->stop();
    }
    json pj = profile_json(prof->table(), total, opt.repeats);  // "per token" = per forward here
    pj["prefill_tokens"] = opt.n_prompt;
    return pj;
  }

  // Repeat r: prefill, then greedy and sampled (or the two heads), alternating which runs first.
  Status repeat(int64_t r) {
    if (opt.n_prompt > 0) {
      const auto ids = synthetic_tokens(opt.n_prompt, lm.tok->bos(), 1234 + r, lm.tok->n_vocab());
      s.kv().clear();
      const auto t0 = Clock::now();
      DSPARK_RETURN_IF_ERROR(lm.model->forward(s, ids, model::ForwardOptions{model::LogitsMode::kLast, {}}));
      pp_tok_s.push_back(opt.n_prompt * 1e3 / ms_between(t0, Clock::now()));
    }
    if (opt.n_gen <= 0) return Status::ok();
    std::vector<int> kinds = {0};  // 0 greedy, 1 greedy with the full head, 2 sampled
    if (opt.lm_head == LmHead::kBoth) kinds.push_back(1);
    if (opt.sampler.temperature > 0) kinds.push_back(2);
    if (r % 2 == 1) std::reverse(kinds.begin(), kinds.end());
    for (const int kind : kinds) {
      auto v = decode_run(kind == 2, kind == 1 || opt.lm_head == LmHead::kFull);
      if (!v) return v.status();
      (kind == 2 ? tg_sampled_tok_s : kind == 1 ? tg_full_tok_s : tg_tok_s).push_back(*v);
    }
    return Status::ok();
  }

  // The verify-cost curve: the median time of one forward of k new tokens after curve_ctx tokens, in
  // the steady state of repeated k-token forwards: each size runs max(kCurveMinWarmup, repeats) untimed
  // forwards before its timed ones. A forward's time depends on what ran just before it (AVX-512
  // without AMX, SmolLM2, 512 tokens of context): right after the context's prefill, the median of 5
  // one-token forwards read 4.01 ms against 3.01 for the median of 15 (a decoded token: 2.5 ms); timed
  // in passes over every size, verify(1) right after a 16-token forward read 3.6-3.9 ms against 2.9
  // in passes up to 4 tokens. --profile then profiles the first and the last size in blocks of their own.
  static constexpr int64_t kCurveMinWarmup = 5;
  Status verify_curve(const SpeedBenchProgress& progress) {
    const auto ctx_ids = synthetic_tokens(opt.curve_ctx, lm.tok->bos(), 99, lm.tok->n_vocab());
    s.kv().clear();
    DSPARK_RETURN_IF_ERROR(lm.model->forward(s, ctx_ids, model::ForwardOptions{model::LogitsMode::kLast, {}}));
    const auto new_ids = synthetic_tokens(opt.curve_max + 1, 1000, 7, lm.tok->n_vocab());
    const model::ForwardOptions all{model::LogitsMode::kAll, {}, opt.lm_head != LmHead::kFull};
    auto timed = [&](int64_t k) -> Result<double> {
      const auto t0 = Clock::now();
      DSPARK_RETURN_IF_ERROR(lm.model->forward(s, std::span<const int32_t>(new_ids.data() + 1, k), all));
      const double ms = ms_between(t0, Clock::now());
      s.kv().trim(k);
      return ms;
    };
    std::vector<std::vector<double>> ms((size_t)opt.curve_max + 1);
    const int64_t warm = std::max<int64_t>(kCurveMinWarmup, opt.repeats);
    for (int64_t k = 1; k <= opt.curve_max; ++k) {
      for (int64_t r = -warm; r < opt.repeats; ++r) {  // r < 0: untimed
        auto m = timed(k);
        if (!m) return m.status();
        if (r >= 0) ms[(size_t)k].push_back(*m);
      }
      if (progress) progress("verify curve", (uint64_t)k, (uint64_t)opt.curve_max);
    }
    const double base_ms = median(ms[1]);
    for (int64_t k = 1; k <= opt.curve_max; ++k) {
      const double m = median(ms[(size_t)k]);
      curve.push_back({{"n_tokens", k}, {"ms", m}, {"ratio_to_1", m / base_ms}});
    }
    std::vector<int64_t> profiled = {1};
    if (opt.curve_max > 1) profiled.push_back(opt.curve_max);
    if (prof)
      for (int64_t k : profiled) {
        prof->reset();
        prof->start();
        double total = 0;
        for (int64_t r = 0; r < opt.repeats; ++r) {
          auto m = timed(k);
          if (!m) return m.status();
          total += *m;
        }
        prof->stop();
        json pj = profile_json(prof->table(), total, opt.repeats);  // "per token" = per forward here
        pj["window_tokens"] = k;
        curve_profiles.push_back(pj);
      }
    return Status::ok();
  }

  void add_heads(json& j) const {
    const model::Model& model = *lm.model;
    j["argmax_head"] = model.argmax_head() != nullptr;
    if (model.argmax_head()) {
      const model::ArgmaxScratch& as = s.argmax_stats();
      j["argmax_head_bytes"] = model.argmax_head()->bytes();
      j["argmax_head_rows"] = as.rows_run;
      j["argmax_head_candidates_per_row"] =
          as.rows_run > as.fallbacks ? (double)as.candidates / (double)(as.rows_run - as.fallbacks) : 0.0;
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
  }

  // Sampled decode against greedy, and one sampled row's time in decode and back to back outside it
  // (caches warm, pool idle: the sampler alone).
  void add_sampled(json& j) {
    std::vector<double> paired;  // sampled / greedy per repeat (the two runs of a repeat are adjacent)
    for (size_t r = 0; r < tg_sampled_tok_s.size(); ++r) paired.push_back(tg_sampled_tok_s[r] / tg_tok_s[r]);
    std::vector<double> iso_ms;
    sample::Sampler smp(opt.sampler, s.pool());
    for (int rep = 0; rep < 10 && !kept_rows.empty(); ++rep)
      for (size_t r = 0; r * n_vocab() < kept_rows.size(); ++r) {
        const auto r0 = Clock::now();
        (void)smp.sample(kept_rows.data() + r * n_vocab(), n_vocab());
        iso_ms.push_back(ms_between(r0, Clock::now()));
      }
    std::vector<double> sorted_rows = row_ms;
    std::sort(sorted_rows.begin(), sorted_rows.end());
    const sample::SamplerConfig& c = opt.sampler;
    j["sample_row_isolated_ms_median"] = median(iso_ms);
    j["sampler"] = {{"temperature", c.temperature}, {"top_k", c.top_k}, {"top_p", c.top_p}, {"min_p", c.min_p}, {"seed", c.seed}};
    j["decode_sampled_tok_s"] = median(tg_sampled_tok_s);
    j["decode_sampled_runs_tok_s"] = tg_sampled_tok_s;
    j["sampled_over_greedy"] = median(paired);
    j["sample_row_ms_median"] = median(row_ms);
    j["sample_row_ms_p90"] = sorted_rows.empty() ? 0.0 : sorted_rows[(size_t)(0.9 * (double)(sorted_rows.size() - 1))];
    j["sample_row_ms_max"] = sorted_rows.empty() ? 0.0 : sorted_rows.back();
  }
};

void print_profile(std::string& out, const json& p) {
  char buf[512];
  if (p.contains("prefill_tokens"))
    std::snprintf(buf, sizeof buf,
                  "\nwhere a prefill of %lld tokens goes (%.3f ms per forward over %lld forwards, timers on; ops on the "
                  "pool's threads are thread time):\n| op | calls / forward | ms / forward | share |\n|---|---:|---:|---:|\n",
                  (long long)p["prefill_tokens"].get<int64_t>(), p["decode_ms_per_token"].get<double>(),
                  (long long)p["tokens"].get<int64_t>());
  else if (p.contains("window_tokens"))
    std::snprintf(buf, sizeof buf,
                  "\nwhere one verify forward of %d new tokens goes (%.3f ms per forward over %lld forwards, timers on):\n"
                  "| op | calls / forward | ms / forward | share |\n|---|---:|---:|---:|\n",
                  p["window_tokens"].get<int>(), p["decode_ms_per_token"].get<double>(), (long long)p["tokens"].get<int64_t>());
  else
    std::snprintf(buf, sizeof buf,
                  "\nwhere a decoded token's time goes (%.3f ms per token over %lld tokens, timers on):\n"
                  "| op | calls / token | ms / token | share |\n|---|---:|---:|---:|\n",
                  p["decode_ms_per_token"].get<double>(), (long long)p["tokens"].get<int64_t>());
  out += buf;
  for (const auto& r : p["ops"]) {
    std::snprintf(buf, sizeof buf, "| %s | %.1f | %.4f | %.1f %% |\n", r["op"].get<std::string>().c_str(),
                  r["calls_per_token"].get<double>(), r["ms_per_token"].get<double>(), 100.0 * r["share"].get<double>());
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "| other (outside the caller's timed ops: attention's wall time, model code, argmax) | | %.4f | %.1f %% |\n",
                p["other_ms_per_token"].get<double>(), 100.0 * p["other_share"].get<double>());
  out += buf;
}

}  // namespace

Result<json> run_speed_bench(const SpeedBenchOptions& opt, const runtime::LoadedModel& lm,
                             const kernels::ProfilingBackend* prof, const SpeedBenchProgress& progress) {
  const model::Model& model = *lm.model;
  const int64_t n_decode = (int64_t)decode_prompt(lm).size() + opt.n_gen;
  const int64_t n_ctx = std::max<int64_t>({opt.n_prompt, n_decode, opt.curve ? opt.curve_ctx + opt.curve_max : 0}) + 8;
  ThreadPool pool(opt.threads);
  model::Session s(model, model::SessionOptions{.n_ctx = n_ctx, .max_batch = kSpeedBenchMaxBatch}, &pool);
  Bench b(opt, lm, prof, s);
  for (int64_t r = 0; r < opt.repeats; ++r) {
    DSPARK_RETURN_IF_ERROR(b.repeat(r));
    if (progress) progress("bench", (uint64_t)r + 1, (uint64_t)opt.repeats);
  }
  // The decode profile is read before the curve, which reuses the timers per window size.
  json decode_profile;
  if (prof && b.decoded > 0) decode_profile = profile_json(prof->table(), b.decode_ms, b.decoded);
  json prefill_profile;
  if (prof && opt.n_prompt > 0) {
    auto pp = b.prefill_profile();
    if (!pp) return pp.status();
    prefill_profile = std::move(pp).value();
  }
  if (opt.curve) DSPARK_RETURN_IF_ERROR(b.verify_curve(progress));
  json j = {{"model", lm.path}, {"threads", opt.threads}, {"repeats", opt.repeats}, {"prompt_tokens", opt.n_prompt},
            {"gen_tokens", opt.n_gen}, {"prefill_tok_s", median(b.pp_tok_s)}, {"decode_tok_s", median(b.tg_tok_s)},
            {"prefill_runs_tok_s", b.pp_tok_s}, {"decode_runs_tok_s", b.tg_tok_s},
            {"peak_rss_bytes", runtime::peak_rss_bytes()}, {"kv_cache_bytes", s.kv().bytes()}};
  j["lm_head"] = lm_head_name(opt.lm_head);
  j["backend"] = model.backend().name();
  b.add_heads(j);
  if (opt.curve) {
    j["verify_curve"] = b.curve;
    j["curve_ctx"] = opt.curve_ctx;
  }
  if (!b.curve_profiles.empty()) j["verify_profiles"] = b.curve_profiles;
  if (opt.sampler.temperature > 0 && opt.n_gen > 0) b.add_sampled(j);
  if (!decode_profile.is_null()) j["profile"] = decode_profile;
  if (!prefill_profile.is_null()) j["prefill_profile"] = prefill_profile;
  return j;
}

std::string format_speed_bench(const json& j) {
  std::string out;
  char buf[1024];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  const long long n_prompt = j["prompt_tokens"].get<int64_t>(), n_gen = j["gen_tokens"].get<int64_t>();
  line("| test | tok/s (median of %lld) |\n|---|---|\n", (long long)j["repeats"].get<int64_t>());
  if (n_prompt > 0) line("| pp%lld | %.1f |\n", n_prompt, j["prefill_tok_s"].get<double>());
  if (n_gen > 0)
    line("| tg%lld%s | %.1f |\n", n_gen, j["lm_head"] == "full" ? " (full LM head)" : "", j["decode_tok_s"].get<double>());
  if (j.contains("decode_full_head_tok_s"))
    line("| tg%lld, full LM head | %.1f |\nexact greedy head / full head %.3f (median of per-repeat ratios)\n", n_gen,
         j["decode_full_head_tok_s"].get<double>(), j["argmax_over_full_head"].get<double>());
  if (j.contains("argmax_head_rows") && j["argmax_head_rows"].get<int64_t>() > 0)
    line("exact greedy head: %.1f MB, %.0f candidate rows per screened row, %lld of %lld screened rows fell back to "
         "the full head, %lld rows sent to it unscreened\n",
         j["argmax_head_bytes"].get<double>() / 1e6, j["argmax_head_candidates_per_row"].get<double>(),
         (long long)j["argmax_head_fallbacks"].get<int64_t>(), (long long)j["argmax_head_rows"].get<int64_t>(),
         (long long)j["argmax_head_unscreened_rows"].get<int64_t>());
  if (j.contains("sampler")) {
    const json& c = j["sampler"];
    line("| tg%lld sampled (T %g, top-k %d, top-p %g, min-p %g) | %.1f |\n"
         "sampled / greedy %.3f (median of per-repeat ratios); one sampled row: median %.3f ms, p90 %.3f ms, max %.3f ms "
         "(in decode), median %.3f ms (the same rows again, back to back)\n",
         n_gen, c["temperature"].get<double>(), c["top_k"].get<int>(), c["top_p"].get<double>(), c["min_p"].get<double>(),
         j["decode_sampled_tok_s"].get<double>(), j["sampled_over_greedy"].get<double>(),
         j["sample_row_ms_median"].get<double>(), j["sample_row_ms_p90"].get<double>(),
         j["sample_row_ms_max"].get<double>(), j["sample_row_isolated_ms_median"].get<double>());
  }
  line("peak RSS %.1f MB, KV cache %.1f MB, threads %lld\n", j["peak_rss_bytes"].get<double>() / 1e6,
       j["kv_cache_bytes"].get<double>() / 1e6, (long long)j["threads"].get<int64_t>());
  if (j.contains("profile")) print_profile(out, j["profile"]);
  if (j.contains("prefill_profile")) print_profile(out, j["prefill_profile"]);
  if (j.contains("verify_curve")) {
    line("\nverify curve after %lld tokens of context:\n| new tokens | ms | ratio to 1 |\n|---|---|---|\n",
         (long long)j["curve_ctx"].get<int64_t>());
    for (const auto& c : j["verify_curve"])
      line("| %d | %.2f | %.2f |\n", c["n_tokens"].get<int>(), c["ms"].get<double>(), c["ratio_to_1"].get<double>());
    if (j.contains("verify_profiles"))
      for (const auto& p : j["verify_profiles"]) print_profile(out, p);
  }
  return out;
}

}  // namespace dspark::eval
