// `dspark bench --spec`: serial vs speculative decoding on a prompt file, alternating the two
// arms prompt by prompt, reporting per-category tok/s, tau, acceptance by position and the
// speedup ratio. Both arms share the model, the thread pool and the prompt.
#pragma once

#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "runtime/drafter_factory.h"
#include "eval/prompts.h"
#include "runtime/registry.h"

namespace dspark::eval {

struct BenchSpecOptions {
  std::string prompts = runtime::default_prompt_file();  // data/spec_bench_dev.jsonl (Spec-Bench dev)
  int64_t n_prompts = 26;      // sampled round-robin over categories
  int64_t n_gen = 128;
  bool chat = true;
  int64_t threads = 2;
  speculative::SpecConfig drafter;
  sample::SamplerConfig sampler;  // seed: prompt i uses seed + i in both arms
  NoteFn note;                    // remarks of mounting the drafter (core/note.h)
};

// Runs both arms on every prompt that fits; returns one JSON object (`dspark bench --spec --json`
// prints it). progress: prompts done of total. Errors: a bad prompt file or drafter.
Result<nlohmann::json> run_bench_spec(const BenchSpecOptions& opt, const runtime::LoadedModel& lm,
                                      const std::function<void(uint64_t done, uint64_t total)>& progress);

// The run as markdown (what `dspark bench --spec` prints without --json).
std::string format_bench_spec(const nlohmann::json& j);

}  // namespace dspark::eval
