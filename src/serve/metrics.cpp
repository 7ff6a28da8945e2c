#include "serve/metrics.h"

#include <cstdio>
#include <vector>

namespace dspark::serve {

using nlohmann::json;

namespace {

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double v) { out += name + " " + num(v) + "\n"; }

// One unlabelled series: its HELP/TYPE header and value.
void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  sample(out, name, v);
}

// A counter with one series per 1-based draft position.
void per_position(std::string& out, const char* name, const char* help, const std::vector<int64_t>& counts) {
  header(out, name, "counter", help);
  for (size_t i = 0; i < counts.size(); ++i)
    out += std::string(name) + "{position=\"" + std::to_string(i + 1) + "\"} " + std::to_string(counts[i]) + "\n";
}

// Label values are route names and numbers here; escape anyway (Prometheus text format).
std::string label(const std::string& v) {
  std::string s;
  for (char c : v) {
    if (c == '\\' || c == '"') s += '\\';
    if (c == '\n') { s += "\\n"; continue; }
    s += c;
  }
  return s;
}

}  // namespace

void Histogram::observe(double x) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (x <= bounds_[i]) { ++counts_[i]; break; }
  ++count_;
  sum_ += x;
}

std::string Histogram::render(const std::string& name) const {
  std::string out;
  int64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
  return out;
}

Metrics::Metrics()
    : latency_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      queue_({0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lk(mu_);
  ++requests_[{route, status}];
}

void Metrics::record_job(const JobSummary& j) {
  std::lock_guard lk(mu_);
  ++jobs_;
  if (j.cancelled) ++jobs_cancelled_;
  if (j.failed) ++jobs_failed_;
  prompt_tokens_ += j.prompt_tokens;
  completion_tokens_ += j.completion_tokens;
  cached_tokens_ += j.cached_tokens;
  if (j.cached_tokens > 1) ++cache_hits_;  // more than the BOS every prompt shares
  if (j.spec) {
    ++spec_jobs_;
    spec_.merge(*j.spec);
  }
  latency_.observe(j.total_s);
  queue_.observe(j.queue_s);
  if (j.completion_tokens > 0) ttft_.observe(j.ttft_s);
}

std::string Metrics::prometheus(const json& g) const {
  std::lock_guard lk(mu_);
  std::string o;
  header(o, "dspark_requests_total", "counter", "HTTP requests by route and status code.");
  for (const auto& [k, n] : requests_)
    o += "dspark_requests_total{route=\"" + label(k.first) + "\",code=\"" + std::to_string(k.second) + "\"} " +
         std::to_string(n) + "\n";
  metric(o, "dspark_generations_total", "counter", "Generations run (finished, cancelled or failed).", (double)jobs_);
  metric(o, "dspark_generations_cancelled_total", "counter", "Generations stopped early (client gone, shutdown).", (double)jobs_cancelled_);
  metric(o, "dspark_generations_failed_total", "counter", "Generations that failed with an error.", (double)jobs_failed_);
  metric(o, "dspark_prompt_tokens_total", "counter", "Prompt tokens of all generations.", (double)prompt_tokens_);
  metric(o, "dspark_completion_tokens_total", "counter", "Generated tokens.", (double)completion_tokens_);
  metric(o, "dspark_prompt_cache_hits_total", "counter", "Generations that reused a cached KV prefix longer than the BOS.", (double)cache_hits_);
  metric(o, "dspark_prompt_cache_reused_tokens_total", "counter", "Prompt tokens whose KV came from the cache.", (double)cached_tokens_);
  header(o, "dspark_request_duration_seconds", "histogram", "Generation time from submit to the last token.");
  o += latency_.render("dspark_request_duration_seconds");
  header(o, "dspark_time_to_first_token_seconds", "histogram", "Time from submit to the first generated text.");
  o += ttft_.render("dspark_time_to_first_token_seconds");
  header(o, "dspark_queue_wait_seconds", "histogram", "Time a generation waited for a slot.");
  o += queue_.render("dspark_queue_wait_seconds");
  metric(o, "dspark_spec_draft_tokens_total", "counter", "Draft tokens proposed.", (double)spec_.drafted);
  metric(o, "dspark_spec_accepted_tokens_total", "counter", "Draft tokens accepted by the target.", (double)spec_.accepted);
  metric(o, "dspark_spec_rounds_total", "counter", "Speculative rounds (one target forward each).", (double)spec_.rounds);
  metric(o, "dspark_spec_generated_tokens_total", "counter", "Tokens emitted by generations that ran a drafter.", (double)spec_.generated);
  per_position(o, "dspark_spec_drafted_tokens_per_pos_total",
               "Rounds that drafted a token at this position (1-based).", spec_.drafted_by_pos);
  per_position(o, "dspark_spec_accepted_tokens_per_pos_total",
               "Rounds that accepted the draft at this position (1-based).", spec_.accepted_by_pos);
  header(o, "dspark_spec_governor_rounds_total", "counter",
         "Rounds of generations that ran a drafter, by the draft-length governor's reason (plain: drafted nothing by "
         "decision).");
  for (size_t i = 0; i < spec_.governor.rounds.size(); ++i)
    o += std::string("dspark_spec_governor_rounds_total{reason=\"") +
         speculative::governor_reason_name((speculative::GovernorReason)i) + "\"} " + std::to_string(spec_.governor.rounds[i]) + "\n";
  metric(o, "dspark_queue_length", "gauge", "Requests waiting for a slot.", g.value("queue", 0.0));
  header(o, "dspark_slots", "gauge", "Generation slots by state.");
  const double busy = g.value("slots_busy", 0.0), total = g.value("slots", 0.0);
  o += "dspark_slots{state=\"busy\"} " + num(busy) + "\n";
  o += "dspark_slots{state=\"idle\"} " + num(total - busy) + "\n";
  const json cache = g.value("cache", json::object());
  metric(o, "dspark_prompt_cache_entries", "gauge", "Sequence snapshots in the host-side prompt cache.", cache.value("entries", 0.0));
  metric(o, "dspark_prompt_cache_bytes", "gauge", "Bytes of KV and drafter tap rows the snapshots hold.", cache.value("bytes", 0.0));
  metric(o, "dspark_prompt_cache_restores_total", "counter", "Snapshots restored into a slot.", cache.value("restores", 0.0));
  metric(o, "dspark_prompt_cache_slot_tokens", "gauge", "Tokens the idle slots keep in place for reuse.", cache.value("slot_tokens", 0.0));
  const json answers = g.contains("answer_cache") && g["answer_cache"].is_object() ? g["answer_cache"] : json::object();
  if (!answers.empty()) {
    metric(o, "dspark_answer_cache_answers_total", "counter", "Answers stored in the cross-request answer cache.", answers.value("answers", 0.0));
    metric(o, "dspark_answer_cache_tokens", "gauge", "Tokens the answer cache holds (capped at its capacity).", answers.value("tokens", 0.0));
    metric(o, "dspark_answer_cache_queries_total", "counter", "Drafter lookups in the answer cache.", answers.value("queries", 0.0));
    metric(o, "dspark_answer_cache_hits_total", "counter", "Lookups the answer cache continued.", answers.value("hits", 0.0));
  }
  return o;
}

json Metrics::totals() const {
  std::lock_guard lk(mu_);
  json req = json::object();
  int64_t n_req = 0;
  for (const auto& [k, n] : requests_) {
    req[k.first][std::to_string(k.second)] = n;
    n_req += n;
  }
  json spec = spec_.to_json();
  spec.erase("time_ms");
  spec["generations"] = spec_jobs_;
  return {{"requests", n_req},
          {"requests_by_route", req},
          {"generations", jobs_},
          {"cancelled", jobs_cancelled_},
          {"failed", jobs_failed_},
          {"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"prompt_cache", {{"hits", cache_hits_}, {"reused_tokens", cached_tokens_}}},
          {"speculation", spec}};
}

}  // namespace dspark::serve
