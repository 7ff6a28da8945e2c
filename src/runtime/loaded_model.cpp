#include "runtime/loaded_model.h"

#include <fstream>

#include "tokenizer/vocab.h"
#include "runtime/registry.h"

namespace dspark::runtime {

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const std::string& backend) {
  auto be = kernels::find_backend(backend);
  if (!be) return be.status();
  auto path = resolve_model_path(spec, resolve_cache_dir(cache_flag));
  if (!path) return path.status();
  LoadedModel lm;
  lm.path = *path;
  auto model = model::load_model(*path, *be);
  if (!model) return model.status();
  lm.model = std::move(model).value();
  auto tok = tokenizer::load_tokenizer(lm.model->file());
  if (!tok) return Status::error(*path + ": " + tok.message());
  if (tok->n_vocab() != lm.model->config().n_vocab)
    return Status::error(*path + ": tokenizer has " + std::to_string(tok->n_vocab()) +
                         " tokens but token_embd.weight has " + std::to_string(lm.model->config().n_vocab) + " rows");
  lm.tok = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
  auto chat = tokenizer::resolve_chat_template(lm.model->file(), chat_template);
  if (!chat) return chat.status();
  lm.chat = *chat;
  return lm;
}

size_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return (size_t)std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace dspark::runtime
