#include "tokenizer/vocab.h"

#include <cmath>
#include <limits>

#include "formats/gguf.h"
#include "tokenizer/pretokenize.h"

namespace dspark::tokenizer {
namespace {

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyPre = "tokenizer.ggml.pre";
constexpr const char* kKeyMerges = "tokenizer.ggml.merges";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyScores = "tokenizer.ggml.scores";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kKeyEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kKeyUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kKeyPad = "tokenizer.ggml.padding_token_id";
constexpr const char* kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kKeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix";

Status check_special_id(const char* name, int32_t id, int32_t n_vocab) {
  if (id < -1 || id >= n_vocab) {
    return Status::error(std::string(name) + ": token id " + std::to_string(id) +
                         " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
  }
  return Status::ok();
}

// Reads an optional token id key into `out` (kept when the key is absent).
Status read_id(const formats::GgufFile& file, const char* key, int32_t n_vocab, int32_t* out) {
  if (!file.has(key)) return Status::ok();
  Result<int64_t> v = file.get_int(key);
  if (!v) return v.status();
  if (*v < 0 || *v >= n_vocab) {
    return Status::error(file.path() + ": " + key + ": token id " + std::to_string(*v) +
                         " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
  }
  *out = static_cast<int32_t>(*v);
  return Status::ok();
}

Status read_flag(const formats::GgufFile& file, const char* key, bool* out) {
  if (!file.has(key)) return Status::ok();
  Result<bool> v = file.get_bool(key);
  if (!v) return v.status();
  *out = *v;
  return Status::ok();
}

}  // namespace

Status validate_vocab(const Vocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return Status::error("tokens: the vocabulary is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::error("tokens: " + std::to_string(n) + " tokens do not fit in int32 ids");
  }
  if (vocab.scores.size() != n) {
    return Status::error("scores: " + std::to_string(vocab.scores.size()) + " entries for " +
                         std::to_string(n) + " tokens");
  }
  if (vocab.types.size() != n) {
    return Status::error("types: " + std::to_string(vocab.types.size()) + " entries for " +
                         std::to_string(n) + " tokens");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(vocab.scores[i])) {
      return Status::error("scores: entry " + std::to_string(i) + " is not finite");
    }
  }
  const int32_t n_vocab = vocab.n_vocab();
  DSPARK_RETURN_IF_ERROR(check_special_id("bos", vocab.bos, n_vocab));
  DSPARK_RETURN_IF_ERROR(check_special_id("eos", vocab.eos, n_vocab));
  DSPARK_RETURN_IF_ERROR(check_special_id("unk", vocab.unk, n_vocab));
  DSPARK_RETURN_IF_ERROR(check_special_id("pad", vocab.pad, n_vocab));
  if (vocab.add_bos && vocab.bos < 0) return Status::error("add_bos is set but there is no bos token");
  if (vocab.add_eos && vocab.eos < 0) return Status::error("add_eos is set but there is no eos token");
  return Status::ok();
}

Result<Vocab> load_vocab(const formats::GgufFile& file) {
  Result<std::string> model = file.get_string(kKeyModel);
  if (!model) return model.status();
  const bool bpe = *model == "gpt2";
  if (!bpe && *model != "llama") {
    return Status::error(file.path() + ": " + kKeyModel + ": tokenizer model \"" + *model +
                         "\" is not supported (only \"llama\", SentencePiece, and \"gpt2\", "
                         "byte-level BPE)");
  }
  Vocab vocab;
  vocab.model = *model;
  if (file.has(kKeyPre)) {
    // SentencePiece ignores the key (llama.cpp too), so only BPE insists that it is a string.
    Result<std::string> pre = file.get_string(kKeyPre);
    if (pre) {
      vocab.pre = std::move(*pre);
    } else if (bpe) {
      return pre.status();
    }
  }
  if (bpe) {
    // llama.cpp's BPE defaults; the pre-tokenizer decides add_bos (llama3 family: on).
    Result<PreTokenizerSpec> spec = find_pre_tokenizer(vocab.pre);
    if (!spec) return Status::error(file.path() + ": " + spec.message());
    vocab.bos = 11;
    vocab.eos = 11;
    vocab.unk = -1;
    vocab.pad = -1;
    vocab.add_bos = spec->default_add_bos;
    vocab.add_eos = false;
    vocab.add_space_prefix = false;
    if (!file.has(kKeyMerges)) {
      return Status::error(file.path() + ": " + kKeyMerges + ": missing (required by " + kKeyModel +
                           " = \"gpt2\")");
    }
    Result<std::vector<std::string>> merges = file.get_string_array(kKeyMerges);
    if (!merges) return merges.status();
    vocab.merges = std::move(*merges);
  }

  Result<std::vector<std::string>> tokens = file.get_string_array(kKeyTokens);
  if (!tokens) return tokens.status();
  vocab.tokens = std::move(*tokens);
  const size_t n = vocab.tokens.size();
  if (n == 0) return Status::error(file.path() + ": " + kKeyTokens + ": empty array");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::error(file.path() + ": " + kKeyTokens + ": " + std::to_string(n) +
                         " tokens do not fit in int32 ids");
  }
  const int32_t n_vocab = static_cast<int32_t>(n);
  if (bpe) {
    // llama.cpp disables a default special id that does not fit (bos / eos 11 of a small file).
    for (int32_t* id : {&vocab.bos, &vocab.eos}) {
      if (*id >= n_vocab) *id = -1;
    }
  }

  if (file.has(kKeyScores)) {
    Result<std::vector<float>> scores = file.get_float_array(kKeyScores);
    if (!scores) return scores.status();
    if (scores->size() != n) {
      return Status::error(file.path() + ": " + kKeyScores + ": " + std::to_string(scores->size()) +
                           " entries for " + std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite((*scores)[i])) {
        return Status::error(file.path() + ": " + kKeyScores + ": entry " + std::to_string(i) +
                             " is not finite");
      }
    }
    vocab.scores = std::move(*scores);
  } else {
    vocab.scores.assign(n, 0.0f);
  }

  if (file.has(kKeyTypes)) {
    Result<std::vector<int64_t>> types = file.get_int_array(kKeyTypes);
    if (!types) return types.status();
    if (types->size() != n) {
      return Status::error(file.path() + ": " + kKeyTypes + ": " + std::to_string(types->size()) +
                           " entries for " + std::to_string(n) + " tokens");
    }
    vocab.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      if (t < std::numeric_limits<int32_t>::min() || t > std::numeric_limits<int32_t>::max()) {
        return Status::error(file.path() + ": " + kKeyTypes + ": entry " + std::to_string(i) +
                             " = " + std::to_string(t) + " does not fit in int32");
      }
      vocab.types[i] = static_cast<int32_t>(t);
    }
  } else {
    vocab.types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  }

  DSPARK_RETURN_IF_ERROR(read_id(file, kKeyBos, n_vocab, &vocab.bos));
  DSPARK_RETURN_IF_ERROR(read_id(file, kKeyEos, n_vocab, &vocab.eos));
  DSPARK_RETURN_IF_ERROR(read_id(file, kKeyUnk, n_vocab, &vocab.unk));
  DSPARK_RETURN_IF_ERROR(read_id(file, kKeyPad, n_vocab, &vocab.pad));
  DSPARK_RETURN_IF_ERROR(read_flag(file, kKeyAddBos, &vocab.add_bos));
  DSPARK_RETURN_IF_ERROR(read_flag(file, kKeyAddEos, &vocab.add_eos));
  DSPARK_RETURN_IF_ERROR(read_flag(file, kKeyAddSpacePrefix, &vocab.add_space_prefix));

  // Defaults that do not fit a small vocabulary (bos 1 / eos 2 of a 1-token file) are errors too.
  Status st = validate_vocab(vocab);
  if (!st) return Status::error(file.path() + ": tokenizer: " + st.message());
  return vocab;
}

}  // namespace dspark::tokenizer
