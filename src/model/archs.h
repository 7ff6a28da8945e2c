// The architectures load_model() knows: one row per architecture, one file each (model/<arch>.cpp).
// Adding an architecture = its file + a row in kArchitectures (model.cpp).
#pragma once

#include <memory>

#include "core/status.h"
#include "formats/gguf.h"
#include "kernels/backend.h"

namespace dspark::model {

class Model;

// Reads the config, binds the weights and builds the model; errors name the file and key/tensor.
// be: the backend the model runs on (weights are prepared for it at load).
using ArchLoader = Result<std::unique_ptr<Model>> (*)(formats::GgufFile file, const kernels::Backend& be);

struct ArchEntry {
  const char* name;  // general.architecture value
  ArchLoader load;
};

Result<std::unique_ptr<Model>> load_gemma3(formats::GgufFile file, const kernels::Backend& be);
Result<std::unique_ptr<Model>> load_llama(formats::GgufFile file, const kernels::Backend& be);

}  // namespace dspark::model
