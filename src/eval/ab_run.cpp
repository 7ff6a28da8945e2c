#include "eval/ab_run.h"

#include <algorithm>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/threadpool.h"
#include "eval/arm_run.h"
#include "runtime/drafter_mount.h"
#include "core/progress.h"

extern char** environ;

namespace dspark::eval {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

constexpr int kMaxMismatchLines = 10;

// Index of the first differing token, or -1 when equal.
int64_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (int64_t)i;
  return a.size() == b.size() ? -1 : (int64_t)n;
}

void add_run(PromptRecord& rec, const ArmRun& run) {
  rec.tokens += (int64_t)run.tokens.size();
  rec.ms += run.ms;
  rec.prefill_ms += run.prefill_ms;
  if (!run.speculative) {
    rec.rounds += (int64_t)run.tokens.size();  // one target forward per token
    return;
  }
  const spec::SpecStats& s = run.stats;
  rec.drafted += s.drafted;
  rec.accepted += s.accepted;
  rec.rounds += s.rounds;
  if (rec.drafted_by_pos.size() < s.drafted_by_pos.size()) rec.drafted_by_pos.resize(s.drafted_by_pos.size(), 0);
  if (rec.accepted_by_pos.size() < s.accepted_by_pos.size()) rec.accepted_by_pos.resize(s.accepted_by_pos.size(), 0);
  for (size_t i = 0; i < s.drafted_by_pos.size(); ++i) rec.drafted_by_pos[i] += s.drafted_by_pos[i];
  for (size_t i = 0; i < s.accepted_by_pos.size(); ++i) rec.accepted_by_pos[i] += s.accepted_by_pos[i];
}

// Runs `python script json png` with the child's stdout sent to stderr (stdout may carry --json).
// Returns the child's exit status, or an error if it could not start.
Result<int> run_plot(const std::string& python, const std::string& script, const std::string& json_path,
                     const std::string& png_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  std::vector<std::string> args = {python, script, json_path, png_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Status::error("cannot run '" + python + "' (--python)");
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return Status::error("waiting for the plotting script failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Writes the JSON to a temporary file and calls the plotting script; warnings only.
void plot(const AbOptions& opt, const nlohmann::json& j) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dspark-ab-XXXXXX.json").string();
  const int fd = mkstemps(tmpl.data(), 5);
  if (fd < 0) { std::fprintf(stderr, "dspark ab: warning: no plot (cannot create a temporary file)\n"); return; }
  close(fd);
  { std::ofstream(tmpl) << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"; }
  auto rc = run_plot(opt.python, opt.plot_script, tmpl, opt.plot_path);
  std::filesystem::remove(tmpl);
  if (!rc) std::fprintf(stderr, "dspark ab: warning: no plot: %s\n", rc.message().c_str());
  else if (*rc == 3) std::fprintf(stderr, "dspark ab: warning: no plot: matplotlib is missing for %s (--python)\n", opt.python.c_str());
  else if (*rc != 0) std::fprintf(stderr, "dspark ab: warning: no plot: %s exited with %d\n", opt.plot_script.c_str(), *rc);
  else std::fprintf(stderr, "dspark ab: plot written to %s\n", opt.plot_path.c_str());
}

}  // namespace

int run_ab(const AbOptions& opt, const LoadedModel& lm) {
  const AbSettings& set = opt.settings;
  auto prompts = load_prompts(opt.prompts, opt.n_prompts);
  if (!prompts) { std::fprintf(stderr, "dspark ab: %s\n", prompts.message().c_str()); return kExitBadInput; }

  AbReport report;
  report.settings = set;
  report.settings.model = lm.path;
  report.settings.prompts_file = opt.prompts;
  std::vector<std::vector<int32_t>> ids;  // [n_prompts][prompt_tokens]
  for (const Prompt& p : *prompts) {
    auto t = encode_prompt(*lm.tok, lm.chat, p.text, set.chat);
    if (!t) { std::fprintf(stderr, "dspark ab: %s\n", t.message().c_str()); return kExitBadInput; }
    if ((int64_t)t->size() + set.max_tokens > set.n_ctx) { ++report.skipped; continue; }
    report.prompts.push_back({p.category, (int64_t)t->size()});
    ids.push_back(std::move(t).value());
  }
  if (ids.empty()) {
    std::fprintf(stderr, "dspark ab: every prompt is longer than the context (--ctx %lld, -n %lld)\n",
                 (long long)set.n_ctx, (long long)set.max_tokens);
    return kExitBadInput;
  }

  ThreadPool pool((int)set.threads);
  model::Session session(*lm.model, {.n_ctx = set.n_ctx, .max_batch = 512}, &pool);
  generate::GenerateParams gp;
  gp.max_tokens = (int32_t)set.max_tokens;
  gp.ignore_eos = !set.stop_at_eos;  // default: stop at EOS, as a served request (--ignore-eos: fixed length)
  gp.sampler = set.sampler;

  // One drafter per arm, loaded before any timing; begin() resets it for every prompt.
  const size_t n_arms = opt.arms.size(), n_prompts = ids.size();
  std::vector<std::unique_ptr<MountedDrafter>> mounts(n_arms);  // one drafter state per arm, reused prompt after prompt
  // A drafter path that does not exist is bad input: said before anything is timed.
  for (const ArmSpec& a : opt.arms)
    if (!a.serial && !a.drafter.model.empty())
      if (auto k = detect_draft_kind(a.drafter.model); !k) {
        std::fprintf(stderr, "dspark ab: arm %s: %s\n", a.name.c_str(), k.message().c_str());
        return kExitBadInput;
      }
  // So is a suffix index that does not open for this target (held open until the arms are built).
  std::vector<std::shared_ptr<const spec::SuffixIndex>> indexes;
  for (const ArmSpec& a : opt.arms)
    if (!a.serial && !a.drafter.suffix_index.empty()) {
      auto ix = open_suffix_index(a.drafter.suffix_index, lm);
      if (!ix) {
        std::fprintf(stderr, "dspark ab: arm %s: %s\n", a.name.c_str(), ix.message().c_str());
        return kExitBadInput;
      }
      indexes.push_back(std::move(ix).value());
    }
  // The verify-cost table (the cost-aware schedule's, the governor's prior) is measured once and
  // shared by every arm: the target is the same, and per-arm start-up timings differ by noise
  // alone, which would make the arms draft to different lengths for no reason of their own.
  constexpr int kMinTableTokens = 7;  // the table covers at least a 7-slot block (gamma 0 = whole block)
  int table_n = 0;
  for (const ArmSpec& a : opt.arms)
    if (!a.serial && (a.drafter.cost_schedule() || a.drafter.governor))
      table_n = std::max(table_n, std::max(a.drafter.gamma, kMinTableTokens) + 1);
  std::vector<double> shared_verify_ms;  // [table_n + 1], index 0 unused
  if (table_n > 0 && !opt.verify_table_ms.empty()) {
    if ((int)opt.verify_table_ms.size() < table_n) {
      std::fprintf(stderr, "dspark ab: --verify-table gives ms for 1..%zu tokens; the cost-aware arms need 1..%d\n",
                   opt.verify_table_ms.size(), table_n);
      return kExitBadInput;
    }
    shared_verify_ms.assign(1, 0.0);
    shared_verify_ms.insert(shared_verify_ms.end(), opt.verify_table_ms.begin(), opt.verify_table_ms.begin() + table_n);
  } else if (!opt.verify_table_ms.empty()) {
    std::fprintf(stderr, "dspark ab: note: --verify-table unused (no arm has a cost-aware draft-schedule)\n");
  }
  if (table_n > 0) {
    if (shared_verify_ms.empty()) shared_verify_ms = measure_verify_ms(*lm.model, table_n, &pool);
    report.verify_ms.assign(shared_verify_ms.begin() + 1, shared_verify_ms.end());
    report.verify_ms_given = !opt.verify_table_ms.empty();
    std::string curve;
    char buf[48];
    for (size_t n = 1; n < shared_verify_ms.size(); ++n) {
      std::snprintf(buf, sizeof buf, " %zu:%.2f", n, shared_verify_ms[n]);
      curve += buf;
    }
    std::fprintf(stderr, "dspark ab: verify cost shared by the cost-aware arms (%s), ms by tokens:%s\n",
                 report.verify_ms_given ? "--verify-table" : "measured", curve.c_str());
  }
  for (size_t k = 0; k < n_arms; ++k) {
    AbArm arm{opt.arms[k]};
    if (!arm.spec.serial) {
      const spec::SpecConfig& d = arm.spec.drafter;
      const MountOptions mo{.n_ctx = set.n_ctx, .cache_dir = resolve_cache_dir(""),
                            .verify_ms = d.cost_schedule() || d.governor ? shared_verify_ms : std::vector<double>{},
                            .verbose = false};
      auto m = mount_drafter(d, mo, lm, &pool);
      if (!m) { std::fprintf(stderr, "dspark ab: arm %s: %s\n", arm.spec.name.c_str(), m.message().c_str()); return kExitBadInput; }
      mounts[k] = std::move(m).value();
      if (!mounts[k]->quant_note.empty())
        std::fprintf(stderr, "dspark ab: arm %s: %s\n", arm.spec.name.c_str(), mounts[k]->quant_note.c_str());
      arm.kind = mounts[k]->kind();
      arm.gamma = mounts[k]->gamma();
    }
    report.arms.push_back(std::move(arm));
  }

  report.records.assign(n_arms, std::vector<PromptRecord>(n_prompts));
  report.identical.assign(n_arms, std::vector<uint8_t>(n_prompts, 0));
  std::vector<std::vector<int32_t>> first_out(n_arms);  // [n_arms] tokens of repeat 0
  int n_mismatch = 0;
  ProgressBar bar("ab", (uint64_t)(n_prompts * set.repeats * n_arms), " runs");
  uint64_t done = 0;
  for (size_t i = 0; i < n_prompts; ++i) {
    for (int64_t r = 0; r < set.repeats; ++r) {
      const uint64_t t = (uint64_t)i * (uint64_t)set.repeats + (uint64_t)r;
      gp.sampler.seed = set.sampler.seed + t;  // common random numbers: every arm gets the same seed here
      for (size_t j = 0; j < n_arms; ++j) {
        const size_t k = (j + t) % n_arms;  // rotate the order: AB, BA, AB, ... for two arms
        gp.full_lm_head = report.arms[k].spec.full_lm_head;
        auto run = run_arm(lm, session, ids[i], gp, mounts[k] ? &mounts[k]->bundle : nullptr);
        if (!run) {
          std::fprintf(stderr, "\ndspark ab: arm %s, prompt %zu: %s\n", report.arms[k].spec.name.c_str(), i,
                       run.message().c_str());
          return 1;
        }
        add_run(report.records[k][i], *run);
        if (run->speculative) report.arms[k].governor.merge(run->stats.governor);
        if (r == 0) first_out[k] = std::move(run->tokens);
        bar.update(++done);
      }
    }
    for (size_t k = 0; k < n_arms; ++k) {
      const int64_t diff = first_difference(first_out[0], first_out[k]);
      report.identical[k][i] = diff < 0;
      if (diff >= 0 && set.sampler.temperature == 0 && k > 0 && n_mismatch++ < kMaxMismatchLines)
        std::fprintf(stderr, "\rdspark ab: prompt %zu (%s): %s differs from %s at new token %lld "
                     "(temperature 0 should be lossless)\n", i, report.prompts[i].category.c_str(),
                     report.arms[k].spec.name.c_str(), report.arms[0].spec.name.c_str(), (long long)diff);
    }
  }
  if (n_mismatch > kMaxMismatchLines)
    std::fprintf(stderr, "dspark ab: ... %d output mismatches in all\n", n_mismatch);

  for (size_t k = 0; k < n_arms; ++k)
    if (mounts[k]) report.arms[k].drafter_stats = mounts[k]->drafter().stats();
  if (Status st = compare_arms(report); !st) { std::fprintf(stderr, "dspark ab: %s\n", st.message().c_str()); return 1; }
  const nlohmann::json j = to_json(report);
  const std::string md = to_markdown(report);
  if (opt.json) std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else std::printf("%s", md.c_str());
  std::fflush(stdout);
  if (!opt.markdown_path.empty()) {
    std::ofstream out(opt.markdown_path);
    if (!(out << md)) std::fprintf(stderr, "dspark ab: warning: cannot write %s\n", opt.markdown_path.c_str());
  }
  if (!opt.plot_path.empty()) plot(opt, j);
  return report.pass() ? 0 : 1;
}

}  // namespace dspark::eval
