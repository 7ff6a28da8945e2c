#include "tools/loaded_model.h"

#include <fstream>

#include "tokenizer/vocab.h"
#include "tools/registry.h"

namespace dspark::tools {

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag) {
  auto path = resolve_model_path(spec, resolve_cache_dir(cache_flag));
  if (!path) return path.status();
  LoadedModel lm;
  lm.path = *path;
  auto model = model::Gemma3Model::load(*path);
  if (!model) return model.status();
  lm.model = std::move(model).value();
  auto vocab = tokenizer::load_vocab(lm.model->file());
  if (!vocab) return vocab.status();
  if (vocab->n_vocab() != lm.model->config().n_vocab)
    return Status::error(*path + ": tokenizer has " + std::to_string(vocab->n_vocab()) +
                         " tokens but token_embd.weight has " + std::to_string(lm.model->config().n_vocab) + " rows");
  auto tok = tokenizer::SpmTokenizer::create(std::move(vocab).value());
  if (!tok) return Status::error(*path + ": " + tok.message());
  lm.tok = std::make_unique<tokenizer::SpmTokenizer>(std::move(tok).value());
  return lm;
}

size_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return (size_t)std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace dspark::tools
