#include "train/regen_ids.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/f16.h"
#include "core/sha256.h"

namespace dspark::train {

namespace {

using formats::StDType;
using formats::StWriteTensor;

template <typename T>
StWriteTensor tensor(const char* name, StDType dt, int64_t n, const std::vector<T>& v) {
  StWriteTensor t{name, dt, {n}, {}};
  t.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

constexpr const char* kNames[] = {"seq_start", "prompt_index", "prompt_len", "temperature", "tokens"};

}  // namespace

Status write_ids_file(const std::string& path, const std::string& settings_json, std::span<const Shard* const> shards) {
  std::vector<int64_t> seq_start{0}, prompt_index;
  std::vector<int32_t> prompt_len, tokens;
  std::vector<float> temperature;
  for (const Shard* sh : shards)
    for (int64_t s = 0; s < sh->n_seq(); ++s) {
      const int32_t* t = sh->tokens(s);
      tokens.insert(tokens.end(), t, t + sh->seq_len(s));
      seq_start.push_back((int64_t)tokens.size());
      prompt_index.push_back(sh->prompt_index(s));
      prompt_len.push_back(sh->prompt_len(s));
      temperature.push_back(sh->temperature(s));
    }
  const int64_t n = (int64_t)prompt_len.size();
  if (n == 0) return Status::error(path + ": no sequences to write");
  std::vector<StWriteTensor> ts;
  ts.push_back(tensor(kNames[0], StDType::kI64, n + 1, seq_start));
  ts.push_back(tensor(kNames[1], StDType::kI64, n, prompt_index));
  ts.push_back(tensor(kNames[2], StDType::kI32, n, prompt_len));
  ts.push_back(tensor(kNames[3], StDType::kF32, n, temperature));
  ts.push_back(tensor(kNames[4], StDType::kI32, (int64_t)tokens.size(), tokens));
  Sha256 h;
  for (const auto& t : ts) h.update(t.bytes.data(), t.bytes.size());
  const std::string tmp = path + ".tmp";
  DSPARK_RETURN_IF_ERROR(formats::write_safetensors(
      tmp, ts, {{"format", kIdsFormat}, {"settings", settings_json}, {"content_sha256", h.hex_digest()}}));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::error(path + ": rename failed");
  return Status::ok();
}

Result<IdsFile> read_ids_file(const std::string& path, int64_t n_vocab) {
  auto f = formats::SafetensorsFile::open(path);
  if (!f) return f.status();
  const auto& meta = f->metadata();
  auto field = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  if (field("format") != kIdsFormat)
    return Status::error(path + ": not a regen ids file (metadata 'format' is '" + field("format") + "', expected '" +
                         kIdsFormat + "')");
  const StDType want[] = {StDType::kI64, StDType::kI64, StDType::kI32, StDType::kF32, StDType::kI32};
  const formats::StTensorInfo* t[5];
  Sha256 h;
  for (int i = 0; i < 5; ++i) {
    t[i] = f->find(kNames[i]);
    if (!t[i]) return Status::error(path + ": tensor '" + kNames[i] + "' missing");
    if (t[i]->dtype != want[i] || t[i]->shape.size() != 1)
      return Status::error(path + ": tensor '" + kNames[i] + "' has dtype " + formats::st_dtype_name(t[i]->dtype) +
                           " shape " + formats::st_shape_string(t[i]->shape) + ", expected " +
                           formats::st_dtype_name(want[i]) + " of rank 1");
    h.update(f->data(*t[i]), t[i]->n_bytes);
  }
  if (h.hex_digest() != field("content_sha256"))
    return Status::error(path + ": content checksum mismatch (corrupt, truncated or altered ids file)");
  const int64_t n = t[0]->shape[0] - 1;
  if (n < 1 || t[1]->shape[0] != n || t[2]->shape[0] != n || t[3]->shape[0] != n)
    return Status::error(path + ": per-sequence tensors disagree on the sequence count");
  auto get = [&](int i, auto* out) {
    out->resize((size_t)t[i]->n_elements);
    std::memcpy(out->data(), f->data(*t[i]), t[i]->n_bytes);
  };
  std::vector<int64_t> start, pidx;
  std::vector<int32_t> plen, tok;
  std::vector<float> temp;
  get(0, &start);
  get(1, &pidx);
  get(2, &plen);
  get(3, &temp);
  get(4, &tok);
  IdsFile out;
  out.settings_json = field("settings");
  if (start[0] != 0 || start.back() != (int64_t)tok.size())
    return Status::error(path + ": seq_start does not span the tokens");
  for (int64_t s = 0; s < n; ++s) {
    const int64_t len = start[(size_t)s + 1] - start[(size_t)s];
    if (len < 2 || plen[(size_t)s] < 1 || plen[(size_t)s] >= len)
      return Status::error(path + ": sequence " + std::to_string(s) + " has bad offsets or prompt_len");
    IdsSeq q;
    q.prompt_index = pidx[(size_t)s];
    q.prompt_len = plen[(size_t)s];
    q.temperature = temp[(size_t)s];
    q.tokens.assign(tok.begin() + start[(size_t)s], tok.begin() + start[(size_t)s + 1]);
    for (int32_t id : q.tokens)
      if (id < 0 || (n_vocab > 0 && id >= n_vocab))
        return Status::error(path + ": sequence " + std::to_string(s) + " has token id " + std::to_string(id) +
                             " outside the target's vocabulary of " + std::to_string(n_vocab) +
                             " (an ids file for another tokenizer?)");
    out.seqs.push_back(std::move(q));
  }
  return out;
}

Status replay_sequences(const model::Model& model, const RegenConfig& cfg, std::span<const IdsSeq> seqs,
                        ThreadPool* pool, const std::function<Status(RegenSeq&&)>& on_done) {
  const model::ModelConfig& mc = model.config();
  const int64_t H = mc.n_embd, V = mc.n_vocab;
  const size_t n_taps = cfg.tap_ids.size();
  int64_t max_len = 2;
  for (const IdsSeq& s : seqs) max_len = std::max<int64_t>(max_len, (int64_t)s.tokens.size());
  model::SessionOptions so;
  so.n_ctx = max_len + 1;
  so.max_batch = std::min<int64_t>(256, max_len);
  const model::ForwardOptions opt{model::LogitsMode::kAll, cfg.tap_ids};
  model::Session session(model, so, pool);
  std::vector<float> exps;
  std::vector<int32_t> cand;
  for (const IdsSeq& in : seqs) {
    session.kv().clear();
    RegenSeq out;
    out.prompt_index = in.prompt_index;
    out.prompt_len = in.prompt_len;
    out.temperature = in.temperature;
    out.tokens = in.tokens;
    const int64_t len = (int64_t)in.tokens.size(), resp = len - in.prompt_len;
    out.taps.assign((size_t)(len * (int64_t)n_taps * H), 0);
    out.dist_ids.resize((size_t)(resp * cfg.top_k));
    out.dist_probs.resize((size_t)(resp * cfg.top_k));
    // Positions 0 .. len-2 are run; the last token's row stays zero (regen never runs it either).
    for (int64_t p0 = 0; p0 < len - 1; p0 += so.max_batch) {
      const int64_t n = std::min<int64_t>(so.max_batch, len - 1 - p0);
      DSPARK_RETURN_IF_ERROR(model.forward(session, std::span(in.tokens).subspan((size_t)p0, (size_t)n), opt));
      for (int64_t r = 0; r < n; ++r) {
        uint16_t* dst = &out.taps[(size_t)((p0 + r) * (int64_t)n_taps * H)];
        for (size_t t = 0; t < n_taps; ++t) {
          const float* src = session.tap(t).data() + r * H;
          for (int64_t c = 0; c < H; ++c) *dst++ = fp32_to_bf16(src[c]);
        }
        const int64_t pos = p0 + r, row = pos - (in.prompt_len - 1);
        if (row < 0) continue;
        softmax_top_k(session.logits() + r * V, V, cfg.top_k, &out.dist_ids[(size_t)(row * cfg.top_k)],
                      &out.dist_probs[(size_t)(row * cfg.top_k)], exps, cand);
      }
    }
    DSPARK_RETURN_IF_ERROR(on_done(std::move(out)));
  }
  return Status::ok();
}

}  // namespace dspark::train
