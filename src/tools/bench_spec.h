// `dspark bench --spec`: serial vs speculative decoding on a prompt file, alternating the two
// arms prompt by prompt, reporting per-category tok/s, tau, acceptance by position and the
// speedup ratio. Both arms share the model, the thread pool and the prompt.
#pragma once

#include <string>

#include "runtime/drafter_factory.h"
#include "eval/prompts.h"
#include "runtime/registry.h"

namespace dspark::tools {

struct BenchSpecOptions {
  std::string prompts = runtime::default_prompt_file();  // data/spec_bench_dev.jsonl (Spec-Bench dev)
  int64_t n_prompts = 26;      // sampled round-robin over categories
  int64_t n_gen = 128;
  bool chat = true;
  bool json = false;
  int64_t threads = 2;
  spec::SpecConfig drafter;
  sample::SamplerConfig sampler;  // seed: prompt i uses seed + i in both arms
};

int run_bench_spec(const BenchSpecOptions& opt, const runtime::LoadedModel& lm);

}  // namespace dspark::tools
