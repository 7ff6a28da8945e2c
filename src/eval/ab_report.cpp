#include "eval/ab_report.h"

#include <algorithm>
#include <cstdio>

namespace dspark::eval {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

nlohmann::json opt_json(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); }

nlohmann::json interval_json(const Interval& iv, double level) {
  return {{"point", iv.point}, {"lo", iv.lo}, {"hi", iv.hi}, {"level", level}, {"n_valid", iv.n_valid}};
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string pct(const std::optional<double>& x) { return x ? fmt("%.1f%%", 100 * *x) : "n/a"; }

// Markdown cells must not contain '|'.
std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

}  // namespace

// Prompt indices per category, categories in first-seen order.
std::vector<std::pair<std::string, std::vector<size_t>>> by_category(const AbReport& r) {
  std::vector<std::pair<std::string, std::vector<size_t>>> out;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& c) { return c.first == r.prompts[i].category; });
    if (it == out.end()) out.push_back({r.prompts[i].category, {i}});
    else it->second.push_back(i);
  }
  return out;
}

ArmSummary summarize_subset(const std::vector<PromptRecord>& records, const std::vector<size_t>& idx) {
  std::vector<PromptRecord> sub;
  for (size_t i : idx) sub.push_back(records[i]);
  return summarize(sub);
}

nlohmann::json per_category_json(const AbComparison& c, double level) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, st] : c.per_category)
    out.push_back({{"category", name}, {"n_prompts", st.n_prompts}, {"speed_ratio", interval_json(st.speed_ratio, level)},
                   {"decode_speed_ratio", st.decode_speed_ratio ? interval_json(*st.decode_speed_ratio, level)
                                                                : nlohmann::json(nullptr)}});
  return out;
}

bool AbReport::pass() const {
  return std::all_of(comparisons.begin(), comparisons.end(), [](const AbComparison& c) { return c.verdict.pass; });
}

Status compare_arms(AbReport& report) {
  report.comparisons.clear();
  if (report.arms.size() < 2) return Status::error("ab: need at least two arms");
  if (report.records.size() != report.arms.size()) return Status::error("ab: records do not match the arms");
  for (size_t k = 1; k < report.arms.size(); ++k) {
    AbComparison c;
    c.arm = k;
    c.compare_acceptance = !report.arms[0].spec.serial && !report.arms[k].spec.serial;
    auto stats = paired_bootstrap(report.records[0], report.records[k], c.compare_acceptance, report.settings.bootstrap);
    if (!stats) return stats.status();
    c.stats = std::move(stats).value();
    c.verdict = decide(c.stats, c.compare_acceptance, report.settings.rule);
    const auto cats = by_category(report);
    if (cats.size() > 1) {
      for (const auto& [name, idx] : cats) {
        std::vector<PromptRecord> a, b;
        for (size_t i : idx) {
          a.push_back(report.records[0][i]);
          b.push_back(report.records[k][i]);
        }
        auto cs = paired_bootstrap(a, b, c.compare_acceptance, report.settings.bootstrap);
        if (!cs) return cs.status();
        c.per_category.emplace_back(name, std::move(cs).value());
      }
    }
    if (report.settings.sampler.temperature == 0 && k < report.identical.size())
      c.identical = std::count(report.identical[k].begin(), report.identical[k].end(), 1);
    report.comparisons.push_back(std::move(c));
  }
  return Status::ok();
}

nlohmann::json to_json(const AbReport& r) {
  const AbSettings& s = r.settings;
  nlohmann::json arms = nlohmann::json::array();
  for (size_t k = 0; k < r.arms.size(); ++k) {
    const ArmSummary sum = summarize(r.records[k]);
    nlohmann::json by_pos = nlohmann::json::array();
    for (const auto& p : sum.acceptance_by_pos()) by_pos.push_back(opt_json(p));
    arms.push_back({{"name", r.arms[k].spec.name}, {"spec", r.arms[k].spec.text}, {"kind", r.arms[k].kind},
                    {"gamma", r.arms[k].gamma}, {"tokens", sum.tokens}, {"ms", sum.ms}, {"tok_s", sum.tok_s()},
                    {"prefill_ms", sum.prefill_ms}, {"decode_tok_s", sum.decode_tok_s()},
                    {"tau", sum.tau()}, {"acceptance", opt_json(sum.acceptance())}, {"drafted", sum.drafted},
                    {"accepted", sum.accepted}, {"rounds", sum.rounds}, {"acceptance_by_pos", by_pos},
                    {"drafted_by_pos", sum.drafted_by_pos}, {"accepted_by_pos", sum.accepted_by_pos},
                    {"drafter_stats", r.arms[k].drafter_stats.is_null() ? nlohmann::json::object()
                                                                         : r.arms[k].drafter_stats},
                    {"governor", r.arms[k].governor.to_json()},
                    {"tree", {{"rounds", r.arms[k].tree_rounds}, {"rows", r.arms[k].tree_rows},
                              {"branch_taken", r.arms[k].tree_branch_taken}}}});
  }
  nlohmann::json comps = nlohmann::json::array();
  for (const AbComparison& c : r.comparisons) {
    comps.push_back(
        {{"arm", r.arms[c.arm].spec.name}, {"baseline", r.arms[0].spec.name},
         {"acceptance_delta_pts", c.stats.accept_delta_pts ? interval_json(*c.stats.accept_delta_pts, s.bootstrap.level)
                                                           : nlohmann::json(nullptr)},
         {"speed_ratio", interval_json(c.stats.speed_ratio, s.bootstrap.level)},
         {"decode_speed_ratio", c.stats.decode_speed_ratio ? interval_json(*c.stats.decode_speed_ratio, s.bootstrap.level)
                                                           : nlohmann::json(nullptr)},
         {"identical_outputs", c.identical ? nlohmann::json(*c.identical) : nlohmann::json(nullptr)},
         {"per_category", per_category_json(c, s.bootstrap.level)},
         {"verdict", {{"pass", c.verdict.pass}, {"acceptance_checked", c.verdict.acceptance_checked},
                      {"reason", c.verdict.reason}}}});
  }
  nlohmann::json per_prompt = nlohmann::json::array();
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    nlohmann::json pa = nlohmann::json::array();
    for (size_t k = 0; k < r.arms.size(); ++k) {
      const PromptRecord& p = r.records[k][i];
      nlohmann::json e = {{"tokens", p.tokens}, {"ms", p.ms}, {"prefill_ms", p.prefill_ms}, {"drafted", p.drafted}, {"accepted", p.accepted},
                          {"rounds", p.rounds}};
      if (s.sampler.temperature == 0 && k > 0 && k < r.identical.size()) e["identical"] = (bool)r.identical[k][i];
      pa.push_back(std::move(e));
    }
    per_prompt.push_back({{"category", r.prompts[i].category}, {"prompt_tokens", r.prompts[i].prompt_tokens},
                          {"arms", pa}});
  }
  nlohmann::json cats = nlohmann::json::array();
  for (const auto& [name, idx] : by_category(r)) {
    nlohmann::json ca = nlohmann::json::array();
    for (size_t k = 0; k < r.arms.size(); ++k) {
      const ArmSummary a = summarize_subset(r.records[k], idx);
      ca.push_back({{"name", r.arms[k].spec.name}, {"tok_s", a.tok_s()}, {"tau", a.tau()},
                    {"acceptance", opt_json(a.acceptance())}});
    }
    cats.push_back({{"category", name}, {"n_prompts", idx.size()}, {"arms", ca}});
  }
  return {{"model", s.model},
          {"prompts_file", s.prompts_file},
          {"n_prompts", r.prompts.size()},
          {"skipped_prompts", r.skipped},
          {"max_tokens", s.max_tokens},
          {"stop_at_eos", s.stop_at_eos},
          {"chat", s.chat},
          {"temperature", s.sampler.temperature},
          {"top_k", s.sampler.top_k},
          {"top_p", s.sampler.top_p},
          {"min_p", s.sampler.min_p},
          {"seed", s.sampler.seed},
          {"repeats", s.repeats},
          {"threads", s.threads},
          {"verify_table_ms", r.verify_ms.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.verify_ms)},
          {"verify_table_source", r.verify_ms.empty() ? nlohmann::json(nullptr)
                                                      : nlohmann::json(r.verify_ms_given ? "given" : "measured")},
          {"bootstrap", {{"resamples", s.bootstrap.n_boot}, {"level", s.bootstrap.level}}},
          {"rule", {{"min_accept_delta_pts", s.rule.min_accept_delta_pts}, {"min_speed_ratio", s.rule.min_speed_ratio}}},
          {"arms", arms},
          {"comparisons", comps},
          {"per_category", cats},
          {"pass", r.pass()},
          {"per_prompt", per_prompt}};
}

std::string to_markdown(const AbReport& r) {
  const AbSettings& s = r.settings;
  std::string md = "## dspark ab: " + std::to_string(r.prompts.size()) + " prompts x " +
                   std::to_string(s.max_tokens) + " new tokens" + (s.stop_at_eos ? " at most" : "") +
                   ", temperature " + fmt("%g", s.sampler.temperature) +
                   (s.sampler.top_k > 0 ? ", top-k " + std::to_string(s.sampler.top_k) : std::string()) +
                   (s.sampler.top_p < 1 ? ", top-p " + fmt("%g", s.sampler.top_p) : std::string()) +
                   (s.sampler.min_p > 0 ? ", min-p " + fmt("%g", s.sampler.min_p) : std::string()) + ", " + std::to_string(s.repeats) +
                   " repeat(s), " + std::to_string(s.threads) + " threads, arms alternated per prompt\n\n";
  if (r.skipped) md += std::to_string(r.skipped) + " prompt(s) skipped: longer than the context.\n\n";
  if (!r.verify_ms.empty()) {
    md += "Verify-cost table of the cost-aware arms (";
    md += r.verify_ms_given ? "--verify-table" : "measured at start-up";
    md += "), ms for 1.." + std::to_string(r.verify_ms.size()) + " tokens:";
    for (double ms : r.verify_ms) md.append(" ").append(fmt("%.2f", ms));
    md += "\n\n";
  }
  md += "| arm | spec | tok/s | decode tok/s (after prefill) | tau | acceptance | drafted | accepted | rounds |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  size_t max_gamma = 0;
  std::vector<ArmSummary> sums;
  for (size_t k = 0; k < r.arms.size(); ++k) {
    sums.push_back(summarize(r.records[k]));
    const ArmSummary& a = sums.back();
    max_gamma = std::max(max_gamma, a.drafted_by_pos.size());
    md += "| " + cell(r.arms[k].spec.name) + " | " + cell(r.arms[k].spec.text) + " | " + fmt("%.1f", a.tok_s()) +
          " | " + fmt("%.1f", a.decode_tok_s()) + " | " + fmt("%.2f", a.tau()) + " | " + pct(a.acceptance()) + " | " + std::to_string(a.drafted) + " | " +
          std::to_string(a.accepted) + " | " + std::to_string(a.rounds) + " |\n";
  }
  if (max_gamma > 0) {
    md += "\nacceptance by draft position (rounds that accepted positions 1..i / rounds that drafted i):\n\n| arm |";
    std::string rule = "|---|";
    for (size_t i = 0; i < max_gamma; ++i) { md.append(" ").append(std::to_string(i + 1)).append(" |"); rule += "---|"; }
    md += "\n" + rule + "\n";
    for (size_t k = 0; k < r.arms.size(); ++k) {
      if (sums[k].drafted_by_pos.empty()) continue;
      const auto by_pos = sums[k].acceptance_by_pos();
      md += "| " + cell(r.arms[k].spec.name) + " |";
      for (size_t i = 0; i < max_gamma; ++i) md.append(" ").append(i < by_pos.size() ? pct(by_pos[i]) : "").append(" |");
      md += "\n";
    }
    md += "\ndraft-length governor: rounds by reason (plain: drafted nothing by decision)\n\n| arm | plain | drafting |";
    std::string rule2 = "|---|---|---|";
    for (size_t i = 0; i < (size_t)speculative::GovernorReason::kCount; ++i) {
      md.append(" ").append(speculative::governor_reason_name((speculative::GovernorReason)i)).append(" |");
      rule2 += "---|";
    }
    md += "\n" + rule2 + "\n";
    for (size_t k = 0; k < r.arms.size(); ++k) {
      if (r.arms[k].spec.serial) continue;
      const speculative::GovernorStats& g = r.arms[k].governor;
      md += "| " + cell(r.arms[k].spec.name) + " | " + std::to_string(g.plain_rounds) + " | " +
            std::to_string(g.drafting_rounds) + " |";
      for (int64_t n : g.rounds) md.append(" ").append(std::to_string(n)).append(" |");
      md += "\n";
    }
  }
  const auto cats = by_category(r);
  if (cats.size() > 1 && r.arms.size() > 1) {
    md += "\nper category: speed ratio to " + cell(r.arms[0].spec.name) +
          " (aggregate tokens / time) [paired bootstrap CI of the same, whole call] and tau\n\n"
          "| category | prompts |";
    std::string rule = "|---|---|";
    for (size_t k = 1; k < r.arms.size(); ++k) {
      md.append(" ").append(cell(r.arms[k].spec.name)).append(" |");  // (append: GCC 12 -Wrestrict false positive)
      rule += "---|";
    }
    md.append("\n").append(rule).append("\n");
    for (size_t ci = 0; ci < cats.size(); ++ci) {
      const auto& [name, idx] = cats[ci];
      const double base = summarize_subset(r.records[0], idx).tok_s();
      md.append("| ").append(cell(name)).append(" | ").append(std::to_string(idx.size())).append(" |");
      for (size_t k = 1; k < r.arms.size(); ++k) {
        const ArmSummary a = summarize_subset(r.records[k], idx);
        md.append(" ").append(fmt("%.2fx", base > 0 ? a.tok_s() / base : 0.0));
        for (const AbComparison& c : r.comparisons)
          if (c.arm == k && ci < c.per_category.size()) {
            const Interval& iv = c.per_category[ci].second.speed_ratio;
            md.append(" [").append(fmt("%.2f", iv.lo)).append(", ").append(fmt("%.2f", iv.hi)).append("]");
          }
        md.append(" (tau ");
        md.append(fmt("%.2f", a.tau())).append(") |");
      }
      md += "\n";
    }
  }
  const int level = (int)(100 * s.bootstrap.level + 0.5);
  md += "\n| comparison | acceptance change, points [" + std::to_string(level) + "% CI] | speed ratio [" +
        std::to_string(level) + "% CI] | decode speed ratio [" + std::to_string(level) + "% CI] | identical outputs | verdict |\n|---|---|---|---|---|---|\n";
  for (const AbComparison& c : r.comparisons) {
    const auto& d = c.stats.accept_delta_pts;
    const std::string acc = d ? fmt("%+.2f", d->point) + " [" + fmt("%+.2f", d->lo) + ", " + fmt("%+.2f", d->hi) + "]"
                              : (c.compare_acceptance ? "undefined (no drafts)" : "n/a (serial arm)");
    const Interval& sr = c.stats.speed_ratio;
    const auto& dr = c.stats.decode_speed_ratio;
    md += "| " + cell(r.arms[c.arm].spec.name) + " vs " + cell(r.arms[0].spec.name) + " | " + acc + " | " +
          fmt("%.3f", sr.point) + " [" + fmt("%.3f", sr.lo) + ", " + fmt("%.3f", sr.hi) + "] | " +
          (dr ? fmt("%.3f", dr->point) + " [" + fmt("%.3f", dr->lo) + ", " + fmt("%.3f", dr->hi) + "]" : std::string("n/a")) + " | " +
          (c.identical ? std::to_string(*c.identical) + " / " + std::to_string(r.prompts.size()) : "n/a (T > 0)") +
          " | " + (c.verdict.pass ? "PASS" : "FAIL") + " |\n";
  }
  md += "\n";
  for (const AbComparison& c : r.comparisons)
    md += "verdict " + r.arms[c.arm].spec.name + " vs " + r.arms[0].spec.name + ": " +
          (c.verdict.pass ? "PASS" : "FAIL") + ": " + c.verdict.reason + "\n";
  md += std::string("overall: ") + (r.pass() ? "PASS" : "FAIL") + "\n";
  return md;
}

}  // namespace dspark::eval
