#include "train/draft_params.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/f16.h"
#include "formats/safetensors.h"

namespace dspark::train {

namespace {

namespace fs = std::filesystem;

Param make(std::string name, std::vector<int64_t> shape, bool decay) {
  Param p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : p.shape) n *= d;
  p.w.assign((size_t)n, 0.0f);
  p.g.assign((size_t)n, 0.0f);
  p.m.assign((size_t)n, 0.0f);
  p.v.assign((size_t)n, 0.0f);
  p.decay = decay;
  return p;
}

void fill_normal(Param& p, Rng& rng, float stddev) {
  for (float& x : p.w) {
    // Box-Muller
    const double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
    x = (float)(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

void fill(Param& p, float v) { std::fill(p.w.begin(), p.w.end(), v); }

}  // namespace

std::vector<Param*> DraftParams::all() {
  std::vector<Param*> v{&fc, &hidden_norm, &norm};
  for (DraftLayerParams& L : layers)
    for (Param* p : {&L.wq, &L.wk, &L.wo, &L.q_norm, &L.k_norm, &L.in_norm, &L.post_attn_norm, &L.pre_ffw_norm,
                     &L.post_ffw_norm, &L.w_gate, &L.w_up, &L.w_down, &L.layer_scalar})
      v.push_back(p);
  if (cfg.markov_rank > 0) { v.push_back(&markov_w1); v.push_back(&markov_w2); }
  v.push_back(&conf_w);
  v.push_back(&conf_b);
  if (!log_logit_scale.w.empty()) v.push_back(&log_logit_scale);
  return v;
}

int64_t DraftParams::n_params() {
  int64_t n = 0;
  for (Param* p : all()) n += p->size();
  return n;
}

void FrozenTables::embed_row(int32_t id, float* out) const {
  kernels::dequantize_row(embed.type, static_cast<const uint8_t*>(embed.data) + (size_t)id * embed.row_stride, out,
                          embed.n_cols);
  for (int64_t i = 0; i < embed.n_cols; ++i) out[i] *= embed_scale;
}

FrozenTables make_frozen_tables(const kernels::QMatrix& target_embed, const std::vector<int32_t>& d2t, int64_t H) {
  FrozenTables t;
  t.embed = target_embed;
  float s = std::sqrt((float)H);  // bf16-rounded like DSparkModel::embed_scale()
  t.embed_scale = bf16_to_fp32(fp32_to_bf16(s));
  t.lm_head.resize(d2t.size() * (size_t)H);
  for (size_t j = 0; j < d2t.size(); ++j)
    kernels::dequantize_row(target_embed.type, static_cast<const uint8_t*>(target_embed.data) + (size_t)d2t[j] * target_embed.row_stride,
                            &t.lm_head[j * (size_t)H], H);
  return t;
}

Result<DraftParams> init_draft_params(const DraftArch& arch, int64_t n_target_layers, int64_t H, int64_t n_heads,
                                      int64_t head_dim, int64_t target_intermediate, int64_t n_vocab,
                                      int32_t mask_token_id, std::vector<int32_t> d2t, uint64_t seed,
                                      const DraftInit& init) {
  if (arch.taps.empty()) return Status::error("drafter arch: no taps");
  for (size_t i = 0; i < arch.taps.size(); ++i)
    if (arch.taps[i] < -1 || arch.taps[i] >= n_target_layers - 1 || (i && arch.taps[i] <= arch.taps[i - 1]))
      return Status::error("drafter arch: taps must be strictly increasing in -1 .. " + std::to_string(n_target_layers - 2) +
                           " (tap " + std::to_string(arch.taps[i]) + ")");
  if (arch.n_layers < 1 || arch.n_layers > 8) return Status::error("drafter arch: layers must be 1..8");
  if (arch.block_size < 1 || arch.block_size > 16) return Status::error("drafter arch: block size must be 1..16");
  if (arch.markov_rank < 0 || arch.markov_rank > 1024) return Status::error("drafter arch: markov rank must be 0..1024");
  if (d2t.empty()) return Status::error("drafter arch: empty draft vocabulary");
  const int64_t I = arch.intermediate > 0 ? arch.intermediate : target_intermediate;
  nlohmann::json layer_types = nlohmann::json::array();
  for (int64_t i = 0; i < arch.n_layers; ++i) layer_types.push_back("full_attention");
  nlohmann::json j = {
      {"architectures", {"Gemma4DSparkModel"}}, {"model_type", "gemma4_text"}, {"hidden_size", H},
      {"num_attention_heads", n_heads}, {"global_head_dim", head_dim}, {"num_global_key_value_heads", 1},
      {"intermediate_size", I}, {"vocab_size", n_vocab}, {"num_hidden_layers", arch.n_layers},
      {"num_target_layers", n_target_layers}, {"attention_k_eq_v", true}, {"attention_bias", false},
      {"hidden_activation", "gelu_pytorch_tanh"}, {"rms_norm_eps", 1e-6}, {"final_logit_softcapping", nullptr},
      {"block_size", arch.block_size}, {"mask_token_id", mask_token_id}, {"target_layer_ids", arch.taps},
      {"num_anchors", 512}, {"markov_rank", arch.markov_rank}, {"markov_head_type", "vanilla"},
      {"enable_confidence_head", true}, {"confidence_head_with_markov", arch.markov_rank > 0},
      {"draft_vocab_size", (int64_t)d2t.size()},
      {"rope_parameters", {{"full_attention", {{"rope_type", "proportional"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.25}}}}},
      {"layer_types", layer_types}, {"tie_word_embeddings", false}, {"enable_moe_block", false},
      {"hidden_size_per_layer_input", 0}, {"target_model_type", arch.target_type}, {"target_text_model_type", arch.target_type + "_text"},
      {"torch_dtype", "bfloat16"}};
  if (arch.lookup_max_ngram > 0) {
    if (arch.lookup_min_ngram < 1 || arch.lookup_min_ngram > arch.lookup_max_ngram || arch.lookup_max_ngram > 16)
      return Status::error("drafter arch: lookup input n-grams must satisfy 1 <= min <= max <= 16");
    j["dspark_lookup_input"] = {{"max_ngram", arch.lookup_max_ngram}, {"min_ngram", arch.lookup_min_ngram}};
  }
  DraftParams p;
  p.config_json = j.dump(1);
  auto cfg = net::parse_dspark_config(p.config_json, "drafter config");
  if (!cfg) return cfg.status();
  p.cfg = cfg.value();
  if (p.cfg.n_kv_heads != 1) return Status::error("drafter training supports one KV head");
  p.d2t = std::move(d2t);
  p.t2d.assign((size_t)n_vocab, -1);
  for (size_t k = 0; k < p.d2t.size(); ++k) {
    const int32_t id = p.d2t[k];
    if (id < 0 || id >= n_vocab || p.t2d[(size_t)id] >= 0) return Status::error("draft vocabulary: bad or repeated id");
    p.t2d[(size_t)id] = (int32_t)k;
  }
  const int64_t m = (int64_t)arch.taps.size(), hd = head_dim, r = arch.markov_rank, vd = (int64_t)p.d2t.size();
  Rng rng(seed);
  p.fc = make("fc.weight", {H, m * H}, true);
  fill_normal(p.fc, rng, 0.02f);
  p.hidden_norm = make("hidden_norm.weight", {H}, false);
  p.norm = make("norm.weight", {H}, false);
  fill(p.hidden_norm, 1.0f);
  fill(p.norm, 1.0f);
  if (!init.norm.empty()) {
    if ((int64_t)init.norm.size() != H) return Status::error("drafter init: final norm has the wrong width");
    p.norm.w = init.norm;
  }
  for (int64_t l = 0; l < arch.n_layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    DraftLayerParams L;
    L.wq = make(pre + "self_attn.q_proj.weight", {n_heads * hd, H}, true);
    L.wk = make(pre + "self_attn.k_proj.weight", {hd, H}, true);
    L.wo = make(pre + "self_attn.o_proj.weight", {H, n_heads * hd}, true);
    L.q_norm = make(pre + "self_attn.q_norm.weight", {hd}, false);
    L.k_norm = make(pre + "self_attn.k_norm.weight", {hd}, false);
    L.in_norm = make(pre + "input_layernorm.weight", {H}, false);
    L.post_attn_norm = make(pre + "post_attention_layernorm.weight", {H}, false);
    L.pre_ffw_norm = make(pre + "pre_feedforward_layernorm.weight", {H}, false);
    L.post_ffw_norm = make(pre + "post_feedforward_layernorm.weight", {H}, false);
    L.w_gate = make(pre + "mlp.gate_proj.weight", {I, H}, true);
    L.w_up = make(pre + "mlp.up_proj.weight", {I, H}, true);
    L.w_down = make(pre + "mlp.down_proj.weight", {H, I}, true);
    L.layer_scalar = make(pre + "layer_scalar", {1}, false);
    for (Param* q : {&L.wq, &L.wk, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) fill_normal(*q, rng, 0.02f);
    for (Param* q : {&L.q_norm, &L.k_norm, &L.in_norm, &L.post_attn_norm, &L.pre_ffw_norm, &L.post_ffw_norm, &L.layer_scalar})
      fill(*q, 1.0f);
    fill(L.q_norm, init.qk_norm);
    fill(L.k_norm, init.qk_norm);
    p.layers.push_back(std::move(L));
  }
  if (r > 0) {
    p.markov_w1 = make("markov_head.markov_w1.weight", {vd + 1, r}, true);
    fill_normal(p.markov_w1, rng, 0.02f);
    p.markov_w2 = make("markov_head.markov_w2.weight", {vd, r}, true);  // zero: the head starts as a no-op
  }
  p.conf_w = make("confidence_head.proj.weight", {1, H + r}, true);
  p.conf_b = make("confidence_head.proj.bias", {1}, false);
  p.log_logit_scale = make("dspark_train.log_logit_scale", {1}, false);
  p.log_logit_scale.exported = false;
  p.log_logit_scale.w[0] = init.log_logit_scale;
  p.log_logit_scale.lr_mult = init.logit_scale_lr_mult;
  return p;
}

Status export_checkpoint(const DraftParams& p, const std::string& dir, const std::string& extra_json) {
  std::vector<formats::StWriteTensor> ts;
  auto add = [&](const Param& q) {
    formats::StWriteTensor t{q.name, formats::StDType::kBF16, q.shape, {}};
    t.bytes.resize(q.w.size() * 2);
    for (size_t i = 0; i < q.w.size(); ++i) {
      const uint16_t b = fp32_to_bf16(q.w[i]);
      std::memcpy(&t.bytes[i * 2], &b, 2);
    }
    ts.push_back(std::move(t));
  };
  DraftParams& mp = const_cast<DraftParams&>(p);
  for (Param* q : mp.all()) {
    if (!q->exported) continue;
    if (q == &mp.fc && !p.tap_scale.empty()) {  // fold the tap normalisation: fc[:, j] * tap_scale[j]
      Param f = *q;
      const size_t cols = p.tap_scale.size();
      for (size_t i = 0; i < f.w.size(); ++i) f.w[i] *= p.tap_scale[i % cols];
      add(f);
    } else if (q == &mp.norm) {  // fold the logit scale into the final norm
      Param n = *q;
      for (float& x : n.w) x *= p.logit_scale();
      add(n);
    } else {
      add(*q);
    }
  }
  formats::StWriteTensor d2t{"d2t", formats::StDType::kI32, {(int64_t)p.d2t.size()}, {}};
  d2t.bytes.resize(p.d2t.size() * 4);
  std::memcpy(d2t.bytes.data(), p.d2t.data(), d2t.bytes.size());
  ts.push_back(std::move(d2t));

  nlohmann::json cfg = nlohmann::json::parse(p.config_json);
  if (!extra_json.empty()) cfg.merge_patch(nlohmann::json::parse(extra_json));
  std::error_code ec;
  const fs::path out(dir), stage = fs::path(dir + ".staging");
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) return Status::error(stage.string() + ": " + ec.message());
  DSPARK_RETURN_IF_ERROR(formats::write_safetensors((stage / "model.safetensors").string(), ts));
  {
    std::ofstream f(stage / "config.json");
    f << cfg.dump(1) << "\n";
    if (!f) return Status::error((stage / "config.json").string() + ": write failed");
  }
  // Replace an older export of the same name (a checkpoint folder we own) in one rename.
  if (fs::exists(out)) {
    const fs::path old = fs::path(dir + ".old");
    fs::remove_all(old, ec);
    fs::rename(out, old, ec);
    if (ec) return Status::error(dir + ": " + ec.message());
    fs::rename(stage, out, ec);
    fs::remove_all(old);
  } else {
    fs::rename(stage, out, ec);
  }
  if (ec) return Status::error(dir + ": " + ec.message());
  return Status::ok();
}

Status patch_checkpoint_config(const std::string& dir, const std::string& patch_json) {
  const fs::path path = fs::path(dir) / "config.json", tmp = fs::path(dir) / "config.json.tmp";
  std::ifstream in(path);
  nlohmann::json cfg = nlohmann::json::parse(in, nullptr, false);
  if (cfg.is_discarded()) return Status::error(path.string() + ": cannot read the exported config");
  cfg.merge_patch(nlohmann::json::parse(patch_json));
  {
    std::ofstream f(tmp);
    f << cfg.dump(1) << "\n";
    if (!f) return Status::error(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::error(path.string() + ": " + ec.message());
  return Status::ok();
}

Status save_train_state(const DraftParams& p, const std::string& path, const std::string& meta_json) {
  std::vector<formats::StWriteTensor> ts;
  DraftParams& mp = const_cast<DraftParams&>(p);
  for (Param* q : mp.all())
    for (auto [suffix, vec] : {std::pair{"", &q->w}, std::pair{".adam_m", &q->m}, std::pair{".adam_v", &q->v}}) {
      formats::StWriteTensor t{q->name + suffix, formats::StDType::kF32, q->shape, {}};
      t.bytes.resize(vec->size() * 4);
      std::memcpy(t.bytes.data(), vec->data(), t.bytes.size());
      ts.push_back(std::move(t));
    }
  formats::StWriteTensor d2t{"d2t", formats::StDType::kI32, {(int64_t)p.d2t.size()}, {}};
  d2t.bytes.resize(p.d2t.size() * 4);
  std::memcpy(d2t.bytes.data(), p.d2t.data(), d2t.bytes.size());
  ts.push_back(std::move(d2t));
  if (!p.tap_scale.empty()) {
    formats::StWriteTensor t{"dspark_train.tap_scale", formats::StDType::kF32, {(int64_t)p.tap_scale.size()}, {}};
    t.bytes.resize(p.tap_scale.size() * 4);
    std::memcpy(t.bytes.data(), p.tap_scale.data(), t.bytes.size());
    ts.push_back(std::move(t));
  }
  return formats::write_safetensors(path, ts, {{"train_meta", meta_json}, {"config", p.config_json}});
}

Result<std::pair<std::string, std::vector<int32_t>>> read_train_state_header(const std::string& path) {
  auto f = formats::SafetensorsFile::open(path);
  if (!f) return f.status();
  auto it = f->metadata().find("train_meta");
  const formats::StTensorInfo* t = f->find("d2t");
  if (it == f->metadata().end() || !t || t->dtype != formats::StDType::kI32 || t->shape.size() != 1)
    return Status::error(path + ": not a dspark training state (train_meta / d2t missing)");
  std::vector<int32_t> d2t((size_t)t->shape[0]);
  std::memcpy(d2t.data(), f->data(*t), t->n_bytes);
  return std::pair{it->second, std::move(d2t)};
}

Result<std::string> load_train_state(DraftParams& p, const std::string& path) {
  auto f = formats::SafetensorsFile::open(path);
  if (!f) return f.status();
  for (Param* q : p.all())
    for (auto [suffix, vec] : {std::pair{"", &q->w}, std::pair{".adam_m", &q->m}, std::pair{".adam_v", &q->v}}) {
      auto v = f->read_f32(q->name + suffix, q->shape);
      if (!v) return Status::error(v.message() + " (the training state does not match this drafter architecture)");
      *vec = std::move(v.value());
    }
  p.tap_scale.clear();
  if (const formats::StTensorInfo* t = f->find("dspark_train.tap_scale")) {
    const std::vector<int64_t> shape{p.fc.shape[1]};
    auto v = f->read_f32(t->name, shape);
    if (!v) return Status::error(v.message() + " (tap_scale does not match this drafter's taps)");
    p.tap_scale = std::move(v.value());
  }
  auto it = f->metadata().find("train_meta");
  if (it == f->metadata().end()) return Status::error(path + ": no train_meta (not a dspark training state)");
  return it->second;
}

}  // namespace dspark::train
