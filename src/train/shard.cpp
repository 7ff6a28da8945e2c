#include "train/shard.h"

#include <cstring>
#include <map>

#include "core/sha256.h"

namespace dspark::train {

namespace {

using formats::StDType;
using formats::StWriteTensor;

template <typename T>
StWriteTensor make_tensor(const char* name, StDType dt, std::vector<int64_t> shape, const std::vector<T>& v) {
  StWriteTensor t{name, dt, std::move(shape), {}};
  t.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

Result<std::vector<int>> parse_ids(const std::string& s) {
  std::vector<int> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    try {
      size_t used = 0;
      out.push_back(std::stoi(s.substr(p, q - p), &used));
      if (used != q - p) throw std::invalid_argument("");
    } catch (...) {
      return Status::error("bad integer list '" + s + "'");
    }
    p = q + 1;
  }
  return out;
}

// SHA-256 over the tensors' bytes in write order (the data region minus padding).
std::string content_digest(const std::vector<StWriteTensor>& ts) {
  Sha256 h;
  for (const auto& t : ts) h.update(t.bytes.data(), t.bytes.size());
  return h.hex_digest();
}

}  // namespace

Status write_shard(const std::string& path, const ShardLayout& layout, std::span<const RegenSeq> seqs) {
  const int64_t w = layout.row_width(), k = layout.top_k;
  std::vector<int64_t> seq_start{0}, prompt_index;
  std::vector<int32_t> tokens, prompt_len, dist_ids;
  std::vector<float> temperature, dist_probs;
  std::vector<uint16_t> taps;
  for (const RegenSeq& s : seqs) {
    const int64_t len = (int64_t)s.tokens.size(), resp = len - s.prompt_len;
    if (s.prompt_len < 1 || resp < 1 || (int64_t)s.taps.size() != len * w ||
        (int64_t)s.dist_ids.size() != resp * k || (int64_t)s.dist_probs.size() != resp * k)
      return Status::error(path + ": sequence of prompt " + std::to_string(s.prompt_index) +
                           " has inconsistent sizes (internal error)");
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    taps.insert(taps.end(), s.taps.begin(), s.taps.end());
    dist_ids.insert(dist_ids.end(), s.dist_ids.begin(), s.dist_ids.end());
    dist_probs.insert(dist_probs.end(), s.dist_probs.begin(), s.dist_probs.end());
    seq_start.push_back(seq_start.back() + len);
    prompt_len.push_back(s.prompt_len);
    prompt_index.push_back(s.prompt_index);
    temperature.push_back(s.temperature);
  }
  const int64_t n_seq = (int64_t)seqs.size(), n_tok = seq_start.back();
  const int64_t n_dist = (int64_t)dist_ids.size() / (k ? k : 1);
  // 8-byte types first, then 4-byte, then bf16: every tensor stays naturally aligned.
  std::vector<StWriteTensor> ts;
  ts.push_back(make_tensor("seq_start", StDType::kI64, {n_seq + 1}, seq_start));
  ts.push_back(make_tensor("prompt_index", StDType::kI64, {n_seq}, prompt_index));
  ts.push_back(make_tensor("prompt_len", StDType::kI32, {n_seq}, prompt_len));
  ts.push_back(make_tensor("temperature", StDType::kF32, {n_seq}, temperature));
  ts.push_back(make_tensor("tokens", StDType::kI32, {n_tok}, tokens));
  ts.push_back(make_tensor("dist_ids", StDType::kI32, {n_dist, k}, dist_ids));
  ts.push_back(make_tensor("dist_probs", StDType::kF32, {n_dist, k}, dist_probs));
  ts.push_back(make_tensor("taps", StDType::kBF16, {n_tok, w}, taps));
  std::map<std::string, std::string> meta{{"format", kShardFormat},
                                          {"tap_ids", join_ids(layout.tap_ids)},
                                          {"top_k", std::to_string(layout.top_k)},
                                          {"n_embd", std::to_string(layout.n_embd)},
                                          {"content_sha256", content_digest(ts)}};
  return formats::write_safetensors(path, ts, meta);
}

Result<Shard> Shard::open(const std::string& path, int64_t n_vocab, bool verify_checksum) {
  auto f = formats::SafetensorsFile::open(path);
  if (!f.is_ok()) return f.status();
  Shard sh;
  sh.file_ = std::make_unique<formats::SafetensorsFile>(std::move(f.value()));
  const formats::SafetensorsFile& file = *sh.file_;
  const auto& meta = file.metadata();
  auto field = [&](const char* key) -> std::string {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  if (field("format") != kShardFormat)
    return Status::error(path + ": not a regen shard (metadata 'format' is '" + field("format") + "', expected '" +
                         kShardFormat + "')");
  auto ids = parse_ids(field("tap_ids"));
  if (!ids.is_ok() || ids.value().empty()) return Status::error(path + ": bad metadata 'tap_ids'");
  sh.layout_.tap_ids = ids.value();
  try {
    sh.layout_.top_k = std::stoi(field("top_k"));
    sh.layout_.n_embd = std::stoll(field("n_embd"));
  } catch (...) {
    return Status::error(path + ": bad metadata 'top_k' or 'n_embd'");
  }
  if (sh.layout_.top_k < 1 || sh.layout_.n_embd < 1)
    return Status::error(path + ": bad metadata 'top_k' or 'n_embd'");

  auto get = [&](const char* name, StDType dt, size_t rank) -> Result<const formats::StTensorInfo*> {
    const formats::StTensorInfo* t = file.find(name);
    if (!t) return Status::error(path + ": tensor '" + name + "' missing");
    if (t->dtype != dt || t->shape.size() != rank)
      return Status::error(path + ": tensor '" + name + "' has dtype " + formats::st_dtype_name(t->dtype) +
                           " shape " + formats::st_shape_string(t->shape) + ", expected " +
                           formats::st_dtype_name(dt) + " of rank " + std::to_string(rank));
    if (reinterpret_cast<uintptr_t>(file.data(*t)) % formats::st_dtype_size(dt) != 0)
      return Status::error(path + ": tensor '" + name + "' is not aligned (not written by dspark regen)");
    return t;
  };
#define DSPARK_GET(var, name, dt, rank)      \
  auto var##_r = get(name, dt, rank);         \
  if (!var##_r.is_ok()) return var##_r.status(); \
  const formats::StTensorInfo* var = var##_r.value();
  DSPARK_GET(t_start, "seq_start", StDType::kI64, 1)
  DSPARK_GET(t_pidx, "prompt_index", StDType::kI64, 1)
  DSPARK_GET(t_plen, "prompt_len", StDType::kI32, 1)
  DSPARK_GET(t_temp, "temperature", StDType::kF32, 1)
  DSPARK_GET(t_tok, "tokens", StDType::kI32, 1)
  DSPARK_GET(t_did, "dist_ids", StDType::kI32, 2)
  DSPARK_GET(t_dpr, "dist_probs", StDType::kF32, 2)
  DSPARK_GET(t_taps, "taps", StDType::kBF16, 2)
#undef DSPARK_GET
  const int64_t n_seq = t_start->shape[0] - 1;
  if (n_seq < 1 || t_pidx->shape[0] != n_seq || t_plen->shape[0] != n_seq || t_temp->shape[0] != n_seq)
    return Status::error(path + ": per-sequence tensors disagree on the sequence count");
  auto copy = [&](const formats::StTensorInfo* t, auto& v) {
    v.resize(t->n_elements);
    std::memcpy(v.data(), file.data(*t), t->n_bytes);
  };
  copy(t_start, sh.seq_start_);
  copy(t_pidx, sh.prompt_index_);
  copy(t_plen, sh.prompt_len_);
  copy(t_temp, sh.temperature_);
  const int64_t n_tok = t_tok->shape[0];
  sh.dist_start_.assign(1, 0);
  if (sh.seq_start_[0] != 0) return Status::error(path + ": seq_start[0] is not 0");
  for (int64_t s = 0; s < n_seq; ++s) {
    const int64_t len = sh.seq_start_[s + 1] - sh.seq_start_[s];
    if (sh.prompt_len_[s] < 1 || len <= sh.prompt_len_[s] || sh.seq_start_[s + 1] > n_tok)
      return Status::error(path + ": sequence " + std::to_string(s) + " has bad offsets or prompt_len");
    sh.dist_start_.push_back(sh.dist_start_.back() + len - sh.prompt_len_[s]);
  }
  const int64_t k = sh.layout_.top_k, w = sh.layout_.row_width();
  if (sh.seq_start_.back() != n_tok) return Status::error(path + ": seq_start does not end at the token count");
  if (t_taps->shape[0] != n_tok || t_taps->shape[1] != w)
    return Status::error(path + ": tensor 'taps' has shape " + formats::st_shape_string(t_taps->shape) +
                         ", expected [" + std::to_string(n_tok) + ", " + std::to_string(w) + "]");
  for (auto* t : {t_did, t_dpr})
    if (t->shape[0] != sh.dist_start_.back() || t->shape[1] != k)
      return Status::error(path + ": tensor '" + t->name + "' has shape " + formats::st_shape_string(t->shape) +
                           ", expected [" + std::to_string(sh.dist_start_.back()) + ", " + std::to_string(k) + "]");
  sh.tokens_ = file.data(*t_tok);
  sh.taps_ = file.data(*t_taps);
  sh.dist_ids_ = file.data(*t_did);
  sh.dist_probs_ = file.data(*t_dpr);
  if (n_vocab > 0) {
    for (int64_t i = 0; i < n_tok; ++i)
      if ((uint32_t)sh.tokens(0)[i] >= (uint64_t)n_vocab)
        return Status::error(path + ": token " + std::to_string(i) + " is out of the vocabulary");
    for (int64_t i = 0; i < sh.n_dist() * k; ++i)
      if ((uint32_t)sh.dist_ids(0)[i] >= (uint64_t)n_vocab)
        return Status::error(path + ": dist_ids entry " + std::to_string(i) + " is out of the vocabulary");
  }
  if (verify_checksum) {
    const std::string want = field("content_sha256");
    Sha256 h;
    for (auto* t : {t_start, t_pidx, t_plen, t_temp, t_tok, t_did, t_dpr, t_taps}) h.update(file.data(*t), t->n_bytes);
    if (h.hex_digest() != want)
      return Status::error(path + ": content checksum mismatch (corrupt or partially written shard)");
  }
  return sh;
}

const int32_t* Shard::tokens(int64_t s) const {
  return reinterpret_cast<const int32_t*>(tokens_) + seq_start_[s];
}
const uint16_t* Shard::taps(int64_t s) const {
  return reinterpret_cast<const uint16_t*>(taps_) + seq_start_[s] * layout_.row_width();
}
const int32_t* Shard::dist_ids(int64_t s) const {
  return reinterpret_cast<const int32_t*>(dist_ids_) + dist_start_[s] * layout_.top_k;
}
const float* Shard::dist_probs(int64_t s) const {
  return reinterpret_cast<const float*>(dist_probs_) + dist_start_[s] * layout_.top_k;
}

}  // namespace dspark::train
