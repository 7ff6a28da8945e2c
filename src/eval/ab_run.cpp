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
  const speculative::SpecStats& s = run.stats;
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

void note(const AbEvents& ev, const std::string& line) {
  if (ev.note) ev.note(line);
}

// The prompts, encoded; those too long for the context are skipped (counted in the report).
Status encode_prompts(AbPlan& p) {
  const AbSettings& set = p.opt.settings;
  auto prompts = load_prompts(p.opt.prompts, p.opt.n_prompts);
  if (!prompts) return prompts.status();
  for (const Prompt& pr : *prompts) {
    auto t = encode_prompt(*p.lm->tok, p.lm->chat, pr.text, set.chat);
    if (!t) return t.status();
    if ((int64_t)t->size() + set.max_tokens > set.n_ctx) {
      ++p.report.skipped;
      continue;
    }
    p.report.prompts.push_back({pr.category, (int64_t)t->size()});
    p.ids.push_back(std::move(t).value());
  }
  if (p.ids.empty())
    return Status::error("every prompt is longer than the context (--ctx " + std::to_string(set.n_ctx) + ", -n " +
                         std::to_string(set.max_tokens) + ")");
  return Status::ok();
}

// A drafter path that does not exist, or a suffix index that does not open for this target, is bad
// input: said before anything is timed.
Status check_arm_files(AbPlan& p) {
  for (const ArmSpec& a : p.opt.arms) {
    if (a.serial) continue;
    if (!a.drafter.model.empty())
      if (auto k = detect_draft_kind(a.drafter.model); !k) return Status::error("arm " + a.name + ": " + k.message());
    if (!a.drafter.suffix_index.empty()) {
      auto ix = open_suffix_index(a.drafter.suffix_index, *p.lm);
      if (!ix) return Status::error("arm " + a.name + ": " + ix.message());
      p.indexes.push_back(std::move(ix).value());
    }
  }
  return Status::ok();
}

// The verify-cost table (the cost-aware schedule's, the governor's prior) is measured once and
// shared by every arm: the target is the same, and per-arm start-up timings differ by noise alone,
// which would make the arms draft to different lengths for no reason of their own. Returns it with
// index 0 unused (empty when no arm needs one).
Result<std::vector<double>> shared_verify_table(AbPlan& p, const AbEvents& ev) {
  constexpr int kMinTableTokens = 7;  // the table covers at least a 7-slot block (gamma 0 = whole block)
  const std::vector<double>& given = p.opt.verify_table_ms;
  int table_n = 0;
  for (const ArmSpec& a : p.opt.arms)
    if (!a.serial && (a.drafter.cost_schedule() || a.drafter.governor))
      table_n = std::max(table_n, std::max(a.drafter.gamma, kMinTableTokens) + 1);
  if (table_n == 0) {
    if (!given.empty()) note(ev, "note: --verify-table unused (no arm has a cost-aware draft-schedule)");
    return std::vector<double>{};
  }
  std::vector<double> table;
  if (!given.empty()) {
    if ((int)given.size() < table_n)
      return Status::error("--verify-table gives ms for 1.." + std::to_string(given.size()) +
                           " tokens; the cost-aware arms need 1.." + std::to_string(table_n));
    table.assign(1, 0.0);
    table.insert(table.end(), given.begin(), given.begin() + table_n);
  } else {
    table = measure_verify_ms(*p.lm->model, table_n, p.pool.get());
  }
  p.report.verify_ms.assign(table.begin() + 1, table.end());
  p.report.verify_ms_given = !given.empty();
  std::string curve;
  char buf[48];
  for (size_t n = 1; n < table.size(); ++n) {
    std::snprintf(buf, sizeof buf, " %zu:%.2f", n, table[n]);
    curve += buf;
  }
  note(ev, std::string("verify cost shared by the cost-aware arms (") + (given.empty() ? "measured" : "--verify-table") +
               "), ms by tokens:" + curve);
  return table;
}

// One drafter per arm, loaded before any timing; begin() resets it for every prompt.
Status mount_arms(AbPlan& p, const std::vector<double>& verify_ms, const AbEvents& ev) {
  p.mounts.resize(p.opt.arms.size());
  for (size_t k = 0; k < p.opt.arms.size(); ++k) {
    AbArm arm{p.opt.arms[k]};
    if (!arm.spec.serial) {
      const speculative::SpecConfig& d = arm.spec.drafter;
      const MountOptions mo{.n_ctx = p.opt.settings.n_ctx, .cache_dir = resolve_cache_dir(""),
                            .verify_ms = d.cost_schedule() || d.governor ? verify_ms : std::vector<double>{},
                            .verbose = false, .note = [&ev](const std::string& s) { note(ev, s); }};
      auto m = mount_drafter(d, mo, *p.lm, p.pool.get());
      if (!m) return Status::error("arm " + arm.spec.name + ": " + m.message());
      p.mounts[k] = std::move(m).value();
      if (!p.mounts[k]->quant_note.empty()) note(ev, "arm " + arm.spec.name + ": " + p.mounts[k]->quant_note);
      arm.kind = p.mounts[k]->kind();
      arm.gamma = p.mounts[k]->gamma();
    }
    p.report.arms.push_back(std::move(arm));
  }
  return Status::ok();
}

// At temperature 0 every arm's output must equal arm 0's: a difference is reported (the first few).
void check_identical(AbReport& report, const std::vector<std::vector<int32_t>>& first_out, size_t i, int* n_mismatch,
                     const AbEvents& ev) {
  for (size_t k = 0; k < first_out.size(); ++k) {
    const int64_t diff = first_difference(first_out[0], first_out[k]);
    report.identical[k][i] = diff < 0;
    if (diff >= 0 && report.settings.sampler.temperature == 0 && k > 0 && (*n_mismatch)++ < kMaxMismatchLines)
      note(ev, "prompt " + std::to_string(i) + " (" + report.prompts[i].category + "): " + report.arms[k].spec.name +
                   " differs from " + report.arms[0].spec.name + " at new token " + std::to_string(diff) +
                   " (temperature 0 should be lossless)");
  }
}

}  // namespace

Result<std::unique_ptr<AbPlan>> plan_ab(const AbOptions& opt, const LoadedModel& lm, const AbEvents& events) {
  auto p = std::make_unique<AbPlan>();
  p->opt = opt;
  p->lm = &lm;
  p->report.settings = opt.settings;
  p->report.settings.model = lm.path;
  p->report.settings.prompts_file = opt.prompts;
  DSPARK_RETURN_IF_ERROR(encode_prompts(*p));
  p->pool = std::make_unique<ThreadPool>((int)opt.settings.threads);
  DSPARK_RETURN_IF_ERROR(check_arm_files(*p));
  auto table = shared_verify_table(*p, events);
  if (!table) return table.status();
  DSPARK_RETURN_IF_ERROR(mount_arms(*p, *table, events));
  return p;
}

Result<AbReport> run_ab(AbPlan& p, const AbEvents& events) {
  const AbSettings& set = p.opt.settings;
  AbReport& report = p.report;
  model::Session session(*p.lm->model, {.n_ctx = set.n_ctx, .max_batch = 512}, p.pool.get());
  generate::GenerateParams gp;
  gp.max_tokens = (int32_t)set.max_tokens;
  gp.ignore_eos = !set.stop_at_eos;  // default: stop at EOS, as a served request (--ignore-eos: fixed length)
  gp.sampler = set.sampler;
  const size_t n_arms = report.arms.size(), n_prompts = p.ids.size();
  report.records.assign(n_arms, std::vector<PromptRecord>(n_prompts));
  report.identical.assign(n_arms, std::vector<uint8_t>(n_prompts, 0));
  std::vector<std::vector<int32_t>> first_out(n_arms);  // [n_arms] tokens of repeat 0
  int n_mismatch = 0;
  const uint64_t total = (uint64_t)(n_prompts * set.repeats * n_arms);
  uint64_t done = 0;
  for (size_t i = 0; i < n_prompts; ++i) {
    for (int64_t r = 0; r < set.repeats; ++r) {
      const uint64_t t = (uint64_t)i * (uint64_t)set.repeats + (uint64_t)r;
      gp.sampler.seed = set.sampler.seed + t;  // common random numbers: every arm gets the same seed here
      for (size_t j = 0; j < n_arms; ++j) {
        const size_t k = (j + t) % n_arms;  // rotate the order: AB, BA, AB, ... for two arms
        gp.full_lm_head = report.arms[k].spec.full_lm_head;
        auto run = run_arm(*p.lm, session, p.ids[i], gp, p.mounts[k] ? &p.mounts[k]->bundle : nullptr);
        if (!run) return Status::error("arm " + report.arms[k].spec.name + ", prompt " + std::to_string(i) + ": " + run.message());
        add_run(report.records[k][i], *run);
        if (run->speculative) {
          report.arms[k].governor.merge(run->stats.governor);
          report.arms[k].tree_rounds += run->stats.tree_rounds;
          report.arms[k].tree_rows += run->stats.tree_rows;
          report.arms[k].tree_branch_taken += run->stats.tree_branch_taken;
        }
        if (r == 0) first_out[k] = std::move(run->tokens);
        if (events.progress) events.progress(++done, total);
      }
    }
    check_identical(report, first_out, i, &n_mismatch, events);
  }
  if (n_mismatch > kMaxMismatchLines) note(events, "... " + std::to_string(n_mismatch) + " output mismatches in all");
  for (size_t k = 0; k < n_arms; ++k)
    if (p.mounts[k]) report.arms[k].drafter_stats = p.mounts[k]->drafter().stats();
  DSPARK_RETURN_IF_ERROR(compare_arms(report));
  return report;
}

std::string plot_ab(const AbOptions& opt, const nlohmann::json& j) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dspark-ab-XXXXXX.json").string();
  const int fd = mkstemps(tmpl.data(), 5);
  if (fd < 0) return "warning: no plot (cannot create a temporary file)";
  close(fd);
  { std::ofstream(tmpl) << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"; }
  auto rc = run_plot(opt.python, opt.plot_script, tmpl, opt.plot_path);
  std::filesystem::remove(tmpl);
  if (!rc) return "warning: no plot: " + rc.message();
  if (*rc == 3) return "warning: no plot: matplotlib is missing for " + opt.python + " (--python)";
  if (*rc != 0) return "warning: no plot: " + opt.plot_script + " exited with " + std::to_string(*rc);
  return "plot written to " + opt.plot_path;
}

}  // namespace dspark::eval
