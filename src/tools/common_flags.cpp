#include "tools/common_flags.h"

#include "kernels/backend.h"

namespace dspark::tools {

void add_model_flags(Args& args, std::string* model, std::string* cache, std::string* chat_template) {
  args.add("--model,-m", model, "target: registry name (dspark get --list) or GGUF path");
  args.add("--cache-dir", cache, "model cache folder (else $DSPARK_CACHE, else ~/.cache/dspark)");
  if (chat_template)
    args.add("--chat-template", chat_template,
             "gemma|chatml|llama3: chat template to use (default: detected from the GGUF's tokenizer.chat_template)");
}

void add_backend_flag(Args& args, std::string* backend, std::string* kernel_plan) {
  std::string names = "auto";  // every registered name: asking each whether it runs here would start CUDA
  for (const kernels::BackendInfo& b : kernels::backends()) names += std::string("|") + b.name;
  args.add("--backend", backend,
           names + ": compute backend of the target (auto = the CPU's best kernels; one this machine cannot run\n"
                   "says why)");
  if (kernel_plan)
    args.add("--kernel-plan", kernel_plan,
             "auto|off|FILE: on the auto CPU backend, run each weight type at each token count on the matmul path\n"
             "timed fastest on this CPU (planned at the first load, about a second; kept under the cache dir,\n"
             "or in FILE, when other processes left the CPUs idle while it was timed); off = the fixed rule");
}

void add_verbose_flag(Args& args, bool* verbose) {
  args.add_flag("--verbose,-v", verbose, "print the backend and the kernel each weight type runs on (stderr)");
}

void add_threads_flag(Args& args, int64_t* threads) {
  args.add("--threads,-t", threads, "worker threads", 1, 256);
}

void add_json_flag(Args& args, bool* json, const std::string& what) { args.add_flag("--json", json, what); }

}  // namespace dspark::tools
