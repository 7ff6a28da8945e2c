#include "train/checkpoint_params.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "formats/safetensors.h"
#include "dspark/dspark_config.h"

namespace dspark::train {

Result<DraftParams> load_checkpoint_params(const std::string& dir, const model::ModelConfig& tc) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  auto cfg = net::read_dspark_config(cfg_path);
  if (!cfg) return cfg.status();
  const net::DSparkConfig& c = *cfg;
  if (c.n_kv_heads != 1 || c.markov_type != net::MarkovHeadType::kVanilla || !c.confidence)
    return Status::error(cfg_path + ": only drafters with one KV head, a vanilla Markov head and a confidence head "
                         "(what train-drafter writes) can be read for training-side tools");
  if (c.hidden_size != tc.n_embd || c.vocab_size != tc.n_vocab || c.n_target_layers != tc.n_layer)
    return Status::error(cfg_path + ": hidden_size / vocab_size / num_target_layers do not match the target");
  const std::string st_path = (fs::path(dir) / "model.safetensors").string();
  auto f = formats::SafetensorsFile::open(st_path);
  if (!f) return f.status();
  if (f->find("lm_head.weight") || f->find("embed_tokens.weight"))
    return Status::error(st_path + ": has its own lm_head / embed_tokens; training-side tools expect the target's "
                         "tables (extensions E1 / E3)");
  const formats::StTensorInfo* t = f->find("d2t");
  if (!t || t->shape.size() != 1 || (t->dtype != formats::StDType::kI32 && t->dtype != formats::StDType::kI64))
    return Status::error(st_path + ": tensor 'd2t' (I32 or I64 [V_d]) is missing");
  std::vector<int32_t> d2t((size_t)t->shape[0]);
  const uint8_t* src = f->data(*t);
  for (size_t i = 0; i < d2t.size(); ++i) {
    if (t->dtype == formats::StDType::kI32) {
      std::memcpy(&d2t[i], src + 4 * i, 4);
    } else {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      d2t[i] = (int32_t)v;
    }
  }
  DraftArch arch;
  arch.taps = c.target_layer_ids;
  arch.n_layers = c.n_layers;
  arch.markov_rank = c.markov_rank;
  arch.block_size = c.block_size;
  arch.intermediate = c.intermediate_size;
  arch.lookup_max_ngram = c.lookup_max_ngram;
  arch.lookup_min_ngram = c.lookup_min_ngram;
  auto p = init_draft_params(arch, tc.n_layer, tc.n_embd, c.n_heads, c.head_dim, tc.n_ff, tc.n_vocab, c.mask_token_id,
                             std::move(d2t), 0);
  if (!p) return Status::error(cfg_path + ": " + p.message());
  for (Param* q : p->all()) {
    if (!q->exported) continue;  // training-only (folded into the exported tensors)
    auto v = f->read_f32(q->name, q->shape);
    if (!v) return v.status();
    q->w = std::move(v.value());
  }
  p->config_json = "";  // the parameters came from `dir`; its config.json is the authority
  {
    std::ifstream in(cfg_path);
    p->config_json.assign(std::istreambuf_iterator<char>(in), {});
  }
  p->cfg = c;
  return p;
}

}  // namespace dspark::train
