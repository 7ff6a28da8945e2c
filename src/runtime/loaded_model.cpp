#include "runtime/loaded_model.h"

#include <cstdio>
#include <fstream>

#include "tokenizer/vocab.h"
#include "runtime/registry.h"

namespace dspark::runtime {

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const std::string& backend) {
  auto be = kernels::find_backend(backend);
  if (!be) return be.status();
  return load_model(spec, cache_flag, chat_template, **be);
}

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const BackendFlags& flags) {
  const std::string cache = resolve_cache_dir(cache_flag);
  auto path = resolve_model_path(spec, cache);
  if (!path) return path.status();
  auto tb = target_backend(*path, cache, flags);
  if (!tb) return tb.status();
  auto lm = load_model(*path, cache_flag, chat_template, *tb->backend);
  if (!lm) return lm.status();
  lm->backend = std::move(tb).value();
  return lm;
}

Result<LoadedModel> load_model(const std::string& spec, const std::string& cache_flag, const std::string& chat_template,
                               const kernels::Backend& backend) {
  auto path = resolve_model_path(spec, resolve_cache_dir(cache_flag));
  if (!path) return path.status();
  LoadedModel lm;
  lm.path = *path;
  lm.backend.backend = &backend;
  lm.backend.plan_status = "off";
  auto model = model::load_model(*path, &backend);
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

std::string kernel_report(const model::Model& m) {
  std::string out = "dspark: backend " + m.backend().name() + "\n", slow;
  size_t copies = 0;
  for (const kernels::Buffer& b : m.weights().prepared) copies += b.bytes();
  const size_t screen = m.argmax_head() ? m.argmax_head()->bytes() : 0;  // its Q5_0 screen (packed or not) and bounds
  char cb[160];
  std::snprintf(cb, sizeof cb, "dspark: weight copies made at load: %.1f MB of packed matrices, %.1f MB greedy-head screen\n",
                (double)copies / 1e6, (double)screen / 1e6);
  out += cb;
  char mb[32];
  for (const model::KernelUse& u : model::kernel_use(m.weights(), m.backend())) {
    std::snprintf(mb, sizeof mb, "%.1f MB", (double)u.bytes / 1e6);
    out += "dspark: " + u.type + " x " + std::to_string(u.matrices) + " matrices (" + mb + "): " + u.kernel + "\n";
    if (!u.simd) slow += (slow.empty() ? "" : ", ") + u.type;
  }
  if (!slow.empty())
    out += "dspark: note: no SIMD kernel for " + slow + " on this backend: those weights run the scalar reference path (correct, slow)\n";
  return out;
}

size_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return (size_t)std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace dspark::runtime
