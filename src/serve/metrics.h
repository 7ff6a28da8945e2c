// Server counters since start: requests, tokens, latencies, speculation (acceptance by draft
// position) and the prompt cache. Rendered as Prometheus text (/metrics) and JSON (/stats).
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "speculative/telemetry.h"

namespace dspark::serve {

// Cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double x);
  // Prometheus lines for `name` (_bucket{le=...}, _sum, _count).
  std::string render(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;   // per bound, non-cumulative
  int64_t count_ = 0;
  double sum_ = 0;
};

// What a finished generation contributes.
struct JobSummary {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;  // a hit: cached_tokens > 1 (beyond the BOS)
  const speculative::SpecStats* spec = nullptr;  // when a drafter ran
  bool cancelled = false, failed = false;
  double queue_s = 0, ttft_s = 0, total_s = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void record_job(const JobSummary& j);

  // `gauges`: {"queue": n, "slots_busy": n, "slots": n, "cache": {"entries", "bytes", ...}}.
  std::string prometheus(const nlohmann::json& gauges) const;
  nlohmann::json totals() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t jobs_ = 0, jobs_cancelled_ = 0, jobs_failed_ = 0;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0, cache_hits_ = 0;
  int64_t spec_jobs_ = 0;
  speculative::SpecStats spec_;
  Histogram latency_, ttft_, queue_;
};

}  // namespace dspark::serve
