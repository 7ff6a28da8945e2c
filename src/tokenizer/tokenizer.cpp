#include "tokenizer/tokenizer.h"

#include "formats/gguf.h"

namespace dspark::tokenizer {

Result<Tokenizer> load_tokenizer(const formats::GgufFile& file) {
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) return Status::error(model.message());
  if (*model == "gpt2") {
    auto t = load_bpe_tokenizer(file);
    if (!t) return t.status();
    return Tokenizer(std::move(t).value());
  }
  auto t = load_spm_tokenizer(file);  // "llama"; other values are refused by load_vocab, naming the key
  if (!t) return t.status();
  return Tokenizer(std::move(t).value());
}

}  // namespace dspark::tokenizer
