// The flags most verbs share, registered by one function each so their names, help and defaults
// agree everywhere: --model/-m and --cache-dir (the target), --threads/-t, --json. Sampling flags
// (--temp ... --seed) are tools/sampler_flags.h; speculative ones tools/spec_flags.h.
#pragma once

#include <cstdint>
#include <string>

#include "tools/args.h"

namespace dspark::tools {

// --model/-m (registry name or GGUF path; default as *model holds) and --cache-dir; with
// chat_template, also --chat-template (verbs that render chat turns).
void add_model_flags(Args& args, std::string* model, std::string* cache, std::string* chat_template = nullptr);
// --backend: the compute backend the target runs on (kernels::backends(); default auto = the best);
// with kernel_plan, also --kernel-plan auto|off|FILE (runtime/kernel_plan_file.h; default as
// *kernel_plan holds, "auto" in the verbs that load a target).
void add_backend_flag(Args& args, std::string* backend, std::string* kernel_plan = nullptr);
// --verbose/-v: say on stderr which backend and kernels run the target's weights (a weight type with
// no SIMD kernel is named: it runs the scalar reference path). Print it with print_verbose_load.
void add_verbose_flag(Args& args, bool* verbose);
// --threads/-t in [1, 256] (default as *threads holds; verbs start from ThreadPool::default_threads()).
void add_threads_flag(Args& args, int64_t* threads);
// --json: `what` says what the verb prints.
void add_json_flag(Args& args, bool* json, const std::string& what = "print one JSON object");

}  // namespace dspark::tools
