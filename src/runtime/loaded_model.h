// Loads a target model and its tokenizer for a verb: resolves registry names, reports errors.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/model.h"
#include "runtime/kernel_plan_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark::runtime {

struct LoadedModel {
  std::string path;
  TargetBackend backend;  // owns a planned backend (declared before the model, so it outlives it)
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  tokenizer::ChatTemplate chat;  // the model's chat template (or --chat-template's)
};

// chat_template: a --chat-template value ("" = from the GGUF, see resolve_chat_template);
// backend: a --backend value ("" / "auto" = kernels::default_backend()).
Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag,
                               const std::string& chat_template = "", const std::string& backend = "");
// The same with --backend and --kernel-plan (runtime/kernel_plan_file.h): the model runs on the
// planned backend when it gets a plan (one line on stderr when a plan file is rejected).
Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const BackendFlags& flags);
// The same on a given backend (it must outlive the model), e.g. a kernels::ProfilingBackend.
Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const kernels::Backend& backend);

// --verbose: the target's backend and, per weight type, the kernel its matrices run on, one line
// each ("dspark: ..."); a type with no SIMD kernel is named as running the scalar reference path.
std::string kernel_report(const model::Model& m);

// Peak resident set size of this process in bytes (VmHWM).
size_t peak_rss_bytes();

}  // namespace dspark::runtime
