#include "tools/sampler_flags.h"

namespace dspark::tools {

void add_sampler_flags(Args& args, SamplerFlags* f, const std::string& seed_help) {
  args.add("--temp", &f->temp, "sampling temperature; 0 = greedy", 0.0, 100.0);
  args.add("--top-k", &f->top_k, "keep the k most likely tokens; 0 = off", 0, 1 << 30);
  args.add("--top-p", &f->top_p, "nucleus sampling mass (after top-k, on temperature-1 probabilities); 1 = off", 1e-6,
           1.0);
  args.add("--min-p", &f->min_p, "drop tokens below min_p * p(top); 0 = off", 0.0, 1.0);
  args.add("--seed", &f->seed, seed_help, 0, INT64_MAX);
}

}  // namespace dspark::tools
