// Loads a target model and its tokenizer for a verb: resolves registry names, reports errors.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/gemma3.h"
#include "tokenizer/spm.h"

namespace dspark::tools {

struct LoadedModel {
  std::string path;
  std::unique_ptr<model::Gemma3Model> model;
  std::unique_ptr<tokenizer::SpmTokenizer> tok;
};

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag);

// Peak resident set size of this process in bytes (VmHWM).
size_t peak_rss_bytes();

}  // namespace dspark::tools
