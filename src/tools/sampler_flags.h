// The sampling flags, registered once for every verb that samples (generate, bench, ab):
// --temp, --top-k, --top-p, --min-p, --seed -> one sample::SamplerConfig.
#pragma once

#include <cstdint>
#include <string>

#include "sample/sampler.h"
#include "tools/args.h"

namespace dspark::tools {

struct SamplerFlags {
  double temp = 0.0, top_p = 1.0, min_p = 0.0;
  int64_t top_k = 0, seed = 0;
  sample::SamplerConfig config() const {
    return {.temperature = (float)temp, .top_k = (int32_t)top_k, .top_p = (float)top_p, .min_p = (float)min_p,
            .seed = (uint64_t)seed};
  }
};

// seed_help says what the seed drives in this verb.
void add_sampler_flags(Args& args, SamplerFlags* flags, const std::string& seed_help = "random seed of sampling");

}  // namespace dspark::tools
