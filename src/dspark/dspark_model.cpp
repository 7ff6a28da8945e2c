#include "dspark/dspark_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "kernels/attention_f32.h"
#include "kernels/ops.h"
#include "kernels/packed.h"
#include "quant/bind.h"

namespace dspark::net {

namespace {

constexpr int64_t kCtxChunk = 32;  // context rows projected per matmul batch

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Round-to-nearest-even f32 -> bf16 -> f32 (the embedding scale is bf16(sqrt(H)), docs/DSPARK-CHECKPOINT.md §4).
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

}  // namespace

void dspark_rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / (double)n + (double)eps);
  if (w)
    for (int64_t i = 0; i < n; ++i) y[i] = (float)(x[i] * scale * w[i]);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = (float)(x[i] * scale);
}

// ---- loading ---------------------------------------------------------------------------------

Result<std::shared_ptr<const DSparkModel>> DSparkModel::load(const std::string& dir_in, const TargetShape& target,
                                                             const TargetTables* tables, const DSparkLoadOptions& opt) {
  std::string dir = dir_in.empty() ? "./" : dir_in;
  if (dir.back() != '/') dir += '/';
  const std::string cfg_file = dir + "config.json";
  auto cfg = read_dspark_config(cfg_file);
  if (!cfg) return cfg.status();
  const DSparkConfig& c = cfg.value();

  // Pairing (docs/DSPARK-ENGINE.md, 'Construction'): the drafter helps only the target it was trained on.
  auto mismatch = [&](const char* field, int64_t have, const std::string& target_what, int64_t want) {
    return Status::error(cfg_file + ": field '" + field + "' = " + std::to_string(have) + " does not match the target (" +
                         target_what + " " + std::to_string(want) + ")");
  };
  if (c.n_target_layers != target.n_layer) return mismatch("num_target_layers", c.n_target_layers, "n_layer", target.n_layer);
  if (c.hidden_size != target.n_embd) return mismatch("hidden_size", c.hidden_size, "n_embd", target.n_embd);
  if (c.vocab_size != target.n_vocab) return mismatch("vocab_size", c.vocab_size, "n_vocab", target.n_vocab);
  for (int id : c.target_layer_ids)
    if (id < -1 || id > target.n_layer - 2)
      return Status::error(cfg_file + ": field 'target_layer_ids' entry " + std::to_string(id) +
                           " is not a tap point of the target ({-1} U [0, " + std::to_string(target.n_layer - 2) + "])");

  auto st = formats::SafetensorsModel::open_dir(dir);
  if (!st) return st.status();
  auto qc = quant::read_quant_config(cfg_file);
  if (!qc) return qc.status();
  std::shared_ptr<DSparkModel> m(new DSparkModel());
  m->dir_ = dir;
  m->cfg_ = c;
  m->quant_ = std::move(qc.value());
  m->st_ = std::make_unique<formats::SafetensorsModel>(std::move(st.value()));
  m->isa_ = std::min(opt.isa.value_or(kernels::detect_isa()), kernels::detect_isa());
  DSPARK_RETURN_IF_ERROR(m->bind(target, tables));
  if (opt.copy_bits != 0) {
    if (opt.copy_bits != 8 && opt.copy_bits != 4)
      return Status::error("dspark drafter: integer copies of " + std::to_string(opt.copy_bits) + " bits (8 or 4)");
    auto copy = [&](quant::DraftMatrix& w) { w = quant::DraftMatrix::integer_copy(w, opt.copy_bits, m->isa_, &m->owned_); };
    copy(m->w_.fc);
    if (!m->w_.lm_head_from_target) copy(m->w_.lm_head);
    for (DSparkLayer& L : m->w_.layers)
      for (quant::DraftMatrix* w : {&L.wq, &L.wk, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) copy(*w);
  }
  return std::shared_ptr<const DSparkModel>(std::move(m));
}

Status DSparkModel::bind(const TargetShape& target, const TargetTables* tables) {
  const DSparkConfig& c = cfg_;
  const int64_t H = c.hidden_size, hd = c.head_dim, r = c.markov_rank;
  std::set<std::string> used;

  auto file_of = [&](const formats::StTensorInfo& info) {
    const formats::SafetensorsFile* f = st_->file_of(info);
    return f ? f->path() : dir_;
  };
  auto shape_error = [&](const formats::StTensorInfo& info, std::vector<int64_t> want) {
    return Status::error(file_of(info) + ": tensor " + quoted(info.name) + " has shape " +
                         formats::st_shape_string(info.shape) + ", expected " + formats::st_shape_string(want));
  };
  // A [rows, cols] matrix: dense over the mapped data (copied if unaligned) or quantized.
  quant::MatrixBinder binder(*st_, quant_, dir_, dir_ + "config.json", used, owned_);
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols, quant::DraftMatrix* out) -> Status {
    return binder.bind(name, rows, cols, out);
  };
  auto vec = [&](const std::string& name, int64_t n, std::vector<float>* out) -> Status {
    if (!st_->find(name)) return Status::error(dir_ + ": missing tensor " + quoted(name));
    used.insert(name);
    const int64_t shape[1] = {n};
    auto v = st_->read_f32(name, shape);
    if (!v) return v.status();
    *out = std::move(v.value());
    return Status::ok();
  };

  // d2t (E2) first: it fixes V_d.
  int64_t vd = c.vocab_size;
  if (const formats::StTensorInfo* info = st_->find("d2t")) {
    used.insert("d2t");
    if (info->dtype != formats::StDType::kI64 && info->dtype != formats::StDType::kI32)
      return Status::error(file_of(*info) + ": tensor 'd2t' has dtype " + formats::st_dtype_name(info->dtype) +
                           ", expected I64 or I32");
    if (info->shape.size() != 1 || info->shape[0] < 1) return shape_error(*info, {c.draft_vocab_size});
    vd = info->shape[0];
    if (c.has_draft_vocab_size && c.draft_vocab_size != vd)
      return Status::error(dir_ + "config.json: field 'draft_vocab_size' = " + std::to_string(c.draft_vocab_size) +
                           " does not match d2t length " + std::to_string(vd));
    if (vd > c.vocab_size) return shape_error(*info, {c.vocab_size});
    const uint8_t* p = st_->data(*info);
    std::vector<char> seen((size_t)c.vocab_size, 0);
    w_.d2t.resize((size_t)vd);
    for (int64_t j = 0; j < vd; ++j) {
      int64_t id;
      if (info->dtype == formats::StDType::kI64) {
        std::memcpy(&id, p + j * 8, 8);
      } else {
        int32_t v32;
        std::memcpy(&v32, p + j * 4, 4);
        id = v32;
      }
      if (id < 0 || id >= c.vocab_size || seen[(size_t)id])
        return Status::error(file_of(*info) + ": tensor 'd2t' entry " + std::to_string(j) + " = " + std::to_string(id) +
                             (id < 0 || id >= c.vocab_size ? " is outside the vocabulary" : " is a duplicate"));
      seen[(size_t)id] = 1;
      w_.d2t[(size_t)j] = (int32_t)id;
    }
  } else if (c.has_draft_vocab_size && c.draft_vocab_size != c.vocab_size) {
    return Status::error(dir_ + "config.json: field 'draft_vocab_size' = " + std::to_string(c.draft_vocab_size) +
                         " needs a 'd2t' tensor");
  }

  // Token tables: the drafter's, else the target's (E1).
  const bool have_tables = tables && tables->embed.data;
  auto check_table = [&](const kernels::QMatrix& q, const char* what) -> Status {
    if (q.n_rows != c.vocab_size || q.n_cols != H)
      return Status::error(dir_ + ": the target's " + std::string(what) + " is [" + std::to_string(q.n_rows) + ", " +
                           std::to_string(q.n_cols) + "], the drafter needs [" + std::to_string(c.vocab_size) + ", " +
                           std::to_string(H) + "]");
    return Status::ok();
  };
  if (st_->find("embed_tokens.weight")) {
    DSPARK_RETURN_IF_ERROR(mat("embed_tokens.weight", c.vocab_size, H, &w_.embed));
  } else {
    if (!have_tables)
      return Status::error(dir_ + ": tensor 'embed_tokens.weight' is absent and no target token table was given");
    DSPARK_RETURN_IF_ERROR(check_table(tables->embed, "token embedding"));
    w_.embed = quant::DraftMatrix::dense(tables->embed);
    w_.embed_from_target = true;
  }
  if (st_->find("lm_head.weight")) {
    DSPARK_RETURN_IF_ERROR(mat("lm_head.weight", vd, H, &w_.lm_head));
  } else {
    if (!have_tables || !tables->lm_head.data)
      return Status::error(dir_ + ": tensor 'lm_head.weight' is absent and no target output table was given");
    DSPARK_RETURN_IF_ERROR(check_table(tables->lm_head, "output matrix"));
    w_.lm_head = quant::DraftMatrix::dense(tables->lm_head);
    w_.lm_head_from_target = true;
    if (!w_.d2t.empty()) {
      // E3: the draft LM head is the target's rows d2t[j], copied in the target's own encoding
      // (quantized rows are self-contained blocks), so drafter and target logits agree exactly.
      const kernels::QMatrix& t = tables->lm_head;
      owned_.emplace_back(new uint8_t[(size_t)vd * t.row_stride]);
      uint8_t* dst = owned_.back().get();
      for (int64_t j = 0; j < vd; ++j)
        std::memcpy(dst + (size_t)j * t.row_stride, static_cast<const uint8_t*>(t.data) + (size_t)w_.d2t[(size_t)j] * t.row_stride,
                    t.row_stride);
      kernels::QMatrix head{t.type, vd, t.n_cols, dst, t.row_stride};
      // The target's big head is packed at its load (model/weights.h); this copy is packed the
      // same way where the ISA has a packed kernel (bitwise the same products, faster).
      if (kernels::pack_supported(t.type, isa_)) {
        owned_.emplace_back(new uint8_t[kernels::packed_bytes(head, kernels::packed_group_rows(t.type, isa_))]);
        kernels::attach_packed(&head, isa_, owned_.back().get());
      }
      w_.lm_head = quant::DraftMatrix::dense(head);
    }
  }
  (void)target;

  DSPARK_RETURN_IF_ERROR(mat("fc.weight", H, c.n_taps() * H, &w_.fc));
  DSPARK_RETURN_IF_ERROR(vec("hidden_norm.weight", H, &w_.hidden_norm));
  DSPARK_RETURN_IF_ERROR(vec("norm.weight", H, &w_.norm));
  w_.layers.resize((size_t)c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    DSparkLayer& L = w_.layers[(size_t)l];
    const std::string p = "layers." + std::to_string(l) + ".";
    DSPARK_RETURN_IF_ERROR(mat(p + "self_attn.q_proj.weight", c.n_heads * hd, H, &L.wq));
    DSPARK_RETURN_IF_ERROR(mat(p + "self_attn.k_proj.weight", c.n_kv_heads * hd, H, &L.wk));
    DSPARK_RETURN_IF_ERROR(mat(p + "self_attn.o_proj.weight", H, c.n_heads * hd, &L.wo));
    DSPARK_RETURN_IF_ERROR(vec(p + "self_attn.q_norm.weight", hd, &L.q_norm));
    DSPARK_RETURN_IF_ERROR(vec(p + "self_attn.k_norm.weight", hd, &L.k_norm));
    DSPARK_RETURN_IF_ERROR(vec(p + "input_layernorm.weight", H, &L.input_norm));
    DSPARK_RETURN_IF_ERROR(vec(p + "post_attention_layernorm.weight", H, &L.post_attn_norm));
    DSPARK_RETURN_IF_ERROR(vec(p + "pre_feedforward_layernorm.weight", H, &L.pre_ffw_norm));
    DSPARK_RETURN_IF_ERROR(vec(p + "post_feedforward_layernorm.weight", H, &L.post_ffw_norm));
    DSPARK_RETURN_IF_ERROR(mat(p + "mlp.gate_proj.weight", c.intermediate_size, H, &L.w_gate));
    DSPARK_RETURN_IF_ERROR(mat(p + "mlp.up_proj.weight", c.intermediate_size, H, &L.w_up));
    DSPARK_RETURN_IF_ERROR(mat(p + "mlp.down_proj.weight", H, c.intermediate_size, &L.w_down));
    const std::string ls = p + "layer_scalar";
    const formats::StTensorInfo* info = st_->find(ls);
    if (!info) return Status::error(dir_ + ": missing tensor " + quoted(ls));
    if (info->n_elements != 1 || info->shape.size() > 1) return shape_error(*info, {1});
    auto v = formats::st_read_f32(*info, st_->data(*info), info->shape, file_of(*info));
    if (!v) return v.status();
    used.insert(ls);
    L.layer_scalar = v.value()[0];
  }

  if (r > 0) {
    // E4: with d2t, markov_w1 may have V_d + 1 rows: row j for target id d2t[j], the last row for
    // every other id (an anchor outside the draft vocabulary).
    const formats::StTensorInfo* w1i = st_->find("markov_head.markov_w1.weight");
    const bool w1_draft = w1i && !w_.d2t.empty() && w1i->shape.size() == 2 && w1i->shape[0] == vd + 1;
    DSPARK_RETURN_IF_ERROR(mat("markov_head.markov_w1.weight", w1_draft ? vd + 1 : c.vocab_size, r, &w_.markov_w1));
    if (w1_draft) {
      w_.w1_row.assign((size_t)c.vocab_size, (int32_t)vd);
      for (int64_t j = 0; j < vd; ++j) w_.w1_row[(size_t)w_.d2t[(size_t)j]] = (int32_t)j;
    }
    DSPARK_RETURN_IF_ERROR(mat("markov_head.markov_w2.weight", vd, r, &w_.markov_w2));
    if (c.markov_type == MarkovHeadType::kGated) {
      DSPARK_RETURN_IF_ERROR(mat("markov_head.gate_proj.weight", r, H + r, &w_.gate_w));
      DSPARK_RETURN_IF_ERROR(vec("markov_head.gate_proj.bias", r, &w_.gate_b));
    } else if (c.markov_type == MarkovHeadType::kRnn) {
      DSPARK_RETURN_IF_ERROR(mat("markov_head.joint_proj.weight", 3 * r, 2 * r + H, &w_.joint_w));
      DSPARK_RETURN_IF_ERROR(vec("markov_head.joint_proj.bias", 3 * r, &w_.joint_b));
    }
    // ||W2[v]|| per row of the dequantized weights, rounded up (the fast-path bound must never be
    // too small). A turbo W2 is dotted with the rotated u, whose f32 rounding gets a wider margin.
    const double slack = w_.markov_w2.spec().method == quant::Method::kTurbo ? 1e-5 : 1e-6;
    std::vector<float> row((size_t)r);
    w2_norms_.resize((size_t)vd);
    for (int64_t v = 0; v < vd; ++v) {
      w_.markov_w2.dequantize_row(v, row.data(), isa_);
      double ss = 0;
      for (float x : row) ss += (double)x * x;
      w2_norms_[(size_t)v] = (float)(std::sqrt(ss) * (1.0 + slack));
      w2_max_norm_ = std::max(w2_max_norm_, w2_norms_[(size_t)v]);
    }
  }

  if (c.confidence) {
    const int64_t n_in = H + (c.confidence_with_markov ? r : 0);
    quant::DraftMatrix cw;
    DSPARK_RETURN_IF_ERROR(mat("confidence_head.proj.weight", 1, n_in, &cw));
    w_.conf_w.resize((size_t)n_in);
    cw.dequantize_row(0, w_.conf_w.data(), isa_);
    std::vector<float> b;
    DSPARK_RETURN_IF_ERROR(vec("confidence_head.proj.bias", 1, &b));
    w_.conf_b = b[0];
  }

  // Anything else would be silently ignored math (a v_proj, a gated head under "vanilla", ...).
  for (const std::string& name : st_->tensor_names())
    if (!used.count(name)) {
      const formats::StTensorInfo* info = st_->find(name);
      return Status::error(file_of(*info) + ": unexpected tensor " + quoted(name) + " for this config (markov_head_type '" +
                           markov_head_type_name(c.markov_type) + "', markov_rank " + std::to_string(r) +
                           ", enable_confidence_head " + (c.confidence ? "true" : "false") + ")");
    }

  inv_freq_.assign((size_t)(hd / 2), 0.0);
  for (int64_t i = 0; i < c.n_rot; ++i) inv_freq_[(size_t)i] = std::pow(c.rope_theta, -2.0 * (double)i / (double)hd);
  embed_scale_ = round_bf16(std::sqrt((float)H));
  return Status::ok();
}

// ---- forward ---------------------------------------------------------------------------------

void DSparkModel::init_scratch(DSparkScratch& s, ThreadPool* pool, int64_t ctx_reserve) const {
  const DSparkConfig& c = cfg_;
  const int64_t H = c.hidden_size, g = c.block_size, qd = c.n_heads * c.head_dim, kd = c.n_kv_heads * c.head_dim;
  s.pool = pool;
  s.mm.isa = isa_;
  s.mm.pool = pool;
  s.taps.resize((size_t)(kCtxChunk * c.n_taps() * H));
  s.ctx.resize((size_t)(kCtxChunk * H));
  s.kraw.resize((size_t)(std::max(kCtxChunk, g) * kd));
  for (auto* v : {&s.h, &s.x, &s.o}) v->resize((size_t)(g * H));
  for (auto* v : {&s.q, &s.attn}) v->resize((size_t)(g * qd));
  for (auto* v : {&s.k, &s.v}) v->resize((size_t)(g * kd));
  for (auto* v : {&s.gate, &s.up}) v->resize((size_t)(g * c.intermediate_size));
  const int n_threads = pool ? pool->size() : 1;
  s.scores.resize((size_t)n_threads);
  for (auto& sc : s.scores) sc.reserve((size_t)((ctx_reserve + g) * g * (c.n_heads / c.n_kv_heads)));
  s.attn_q.resize((size_t)n_threads);
  s.attn_out.resize((size_t)n_threads);
  for (auto& v : s.attn_q) v.reserve((size_t)(g * c.n_heads));
  for (auto& v : s.attn_out) v.reserve((size_t)(g * c.n_heads));
  const size_t rows = (size_t)std::max<int64_t>(kCtxChunk, g);
  s.cos.resize(rows * (size_t)std::max<int64_t>(c.n_rot, 1));
  s.sin.resize(s.cos.size());
}

void DSparkModel::embed_row(int32_t id, float* out) const {
  w_.embed.dequantize_row(id, out, isa_);
  const int64_t n = w_.embed.n_cols();
  for (int64_t i = 0; i < n; ++i) out[i] *= embed_scale_;
}

void DSparkModel::rope_tables(DSparkScratch& s, int64_t pos0, int64_t n) const {
  const int64_t nr = cfg_.n_rot;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      const double phi = (double)(pos0 + i) * inv_freq_[(size_t)j];
      s.cos[(size_t)(i * nr + j)] = std::cos(phi);
      s.sin[(size_t)(i * nr + j)] = std::sin(phi);
    }
}

// Proportional partial RoPE, rotate-half pairs (j, j + hd/2) for j < n_rot; other channels pass.
void DSparkModel::apply_rope(float* x, int64_t n_heads, const double* cs, const double* sn) const {
  const int64_t hd = cfg_.head_dim, half = hd / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * hd;
    for (int64_t j = 0; j < cfg_.n_rot; ++j) {
      const double a = v[j], b = v[j + half];
      v[j] = (float)(a * cs[j] - b * sn[j]);
      v[j + half] = (float)(b * cs[j] + a * sn[j]);
    }
  }
}

Status DSparkModel::append_context(DSparkContext& ctx, DSparkScratch& s, const model::TapRows& taps) const {
  const DSparkConfig& c = cfg_;
  const int64_t H = c.hidden_size, m = c.n_taps(), hd = c.head_dim, nkv = c.n_kv_heads, kd = nkv * hd;
  if (taps.n_rows == 0) return Status::ok();
  if ((int64_t)taps.taps.size() != m || taps.n_embd != H)
    return Status::error("dspark drafter: got " + std::to_string(taps.taps.size()) + " tap rows of width " +
                         std::to_string(taps.n_embd) + ", expected " + std::to_string(m) + " of width " + std::to_string(H));
  if (ctx.k.size() != (size_t)c.n_layers) {
    ctx.k.resize((size_t)c.n_layers);
    ctx.v.resize((size_t)c.n_layers);
  }
  for (int64_t r0 = 0; r0 < taps.n_rows; r0 += kCtxChunk) {
    const int64_t n = std::min(kCtxChunk, taps.n_rows - r0);
    // 1. Concatenate taps in target_layer_ids order: [n, m*H].
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < m; ++t)
        std::memcpy(&s.taps[(size_t)((i * m + t) * H)], taps.taps[(size_t)t] + (r0 + i) * H, (size_t)H * 4);
    // 2. ctx = RMSNorm_hidden_norm(taps · fcᵀ).
    w_.fc.matmul(s.mm, s.taps.data(), n, s.ctx.data(), H);
    for (int64_t i = 0; i < n; ++i) dspark_rms_norm(&s.ctx[(size_t)(i * H)], w_.hidden_norm.data(), &s.ctx[(size_t)(i * H)], H, c.rms_eps);
    rope_tables(s, ctx.len + r0, n);
    // 3. Per layer: kraw = ctx · k_projᵀ (no input_layernorm); V = norm(kraw); K = RoPE(k_norm(kraw)).
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const DSparkLayer& L = w_.layers[(size_t)l];
      L.wk.matmul(s.mm, s.ctx.data(), n, s.kraw.data(), kd);
      std::vector<float>& K = ctx.k[(size_t)l];
      std::vector<float>& V = ctx.v[(size_t)l];
      const size_t k0 = K.size();
      K.resize(k0 + (size_t)(n * kd));
      V.resize(k0 + (size_t)(n * kd));
      for (int64_t i = 0; i < n; ++i) {
        const float* kr = &s.kraw[(size_t)(i * kd)];
        float* krow = &K[k0 + (size_t)(i * kd)];
        float* vrow = &V[k0 + (size_t)(i * kd)];
        for (int64_t h = 0; h < nkv; ++h) {
          dspark_rms_norm(kr + h * hd, nullptr, vrow + h * hd, hd, c.rms_eps);
          dspark_rms_norm(kr + h * hd, L.k_norm.data(), krow + h * hd, hd, c.rms_eps);
        }
        apply_rope(krow, nkv, &s.cos[(size_t)(i * c.n_rot)], &s.sin[(size_t)(i * c.n_rot)]);
      }
    }
  }
  ctx.len += taps.n_rows;
  return Status::ok();
}

// a = softmax(q·Kᵀ)·V of every block row and head over [context ; block] (no mask, scale 1.0, GQA).
// Jobs are (K/V head, slice of its queries): a K/V head's γ·(n_heads/n_kv) queries share each key
// row while it is loaded (kernels/attention_f32.h); slices keep both threads busy when there are
// fewer K/V heads than threads (Gemma 3's drafter has one) or a count that does not divide.
void DSparkModel::attention(const DSparkContext& ctx, DSparkScratch& s, int64_t layer) const {
  const DSparkConfig& c = cfg_;
  const int64_t hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, grp = nh / nkv, kd = nkv * hd, g = c.block_size;
  const int64_t n_ctx = ctx.len, per_head = g * grp, n_keys = n_ctx + g;
  const int64_t nt = s.pool ? s.pool->size() : 1;
  const int64_t split = std::min<int64_t>(per_head, std::lcm(nkv, nt) / nkv), jobs = nkv * split;
  auto body = [&](int ti, int n_workers) {
    std::vector<float>& sc = s.scores[(size_t)ti];
    std::vector<const float*>& qp = s.attn_q[(size_t)ti];
    std::vector<float*>& op = s.attn_out[(size_t)ti];
    for (int64_t idx = ti; idx < jobs; idx += n_workers) {
      const int64_t kvh = idx / split, part = idx % split;
      const int64_t j0 = per_head * part / split, j1 = per_head * (part + 1) / split;
      qp.clear();
      op.clear();
      for (int64_t j = j0; j < j1; ++j) {  // query j of this K/V head: block row j / grp, head kvh * grp + j % grp
        const size_t off = (size_t)(((j / grp) * nh + kvh * grp + j % grp) * hd);
        qp.push_back(&s.q[off]);
        op.push_back(&s.attn[off]);
      }
      if (sc.size() < (size_t)((j1 - j0) * n_keys)) sc.resize((size_t)((j1 - j0) * n_keys));
      const kernels::F32Rows segs[2] = {
          {n_ctx ? ctx.k[(size_t)layer].data() + kvh * hd : nullptr, n_ctx ? ctx.v[(size_t)layer].data() + kvh * hd : nullptr,
           n_ctx, kd},
          {&s.k[(size_t)(kvh * hd)], &s.v[(size_t)(kvh * hd)], g, kd}};
      kernels::attention_f32(s.mm.isa, qp.data(), op.data(), j1 - j0, hd, segs, 2, sc.data());
    }
  };
  if (s.pool && nt > 1 && jobs > 1) {
    const auto* bp = &body;
    s.pool->run([bp](int t, int n) { (*bp)(t, n); });  // one pointer: fits std::function's local storage
  } else {
    body(0, 1);
  }
}

void DSparkModel::backbone(const DSparkContext& ctx, DSparkScratch& s, const int32_t* inputs, float* h_out) const {
  const DSparkConfig& c = cfg_;
  const int64_t H = c.hidden_size, g = c.block_size, hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads;
  const int64_t qd = nh * hd, kd = nkv * hd, I = c.intermediate_size;
  float* h = s.h.data();
  for (int64_t i = 0; i < g; ++i) embed_row(inputs[i], h + i * H);
  rope_tables(s, ctx.len, g);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const DSparkLayer& L = w_.layers[(size_t)l];
    // 1-3. x = input_norm(h); q = RoPE(q_norm(x·Wqᵀ)); V = norm(x·Wkᵀ); K = RoPE(k_norm(x·Wkᵀ)).
    for (int64_t i = 0; i < g; ++i) dspark_rms_norm(h + i * H, L.input_norm.data(), &s.x[(size_t)(i * H)], H, c.rms_eps);
    L.wq.matmul(s.mm, s.x.data(), g, s.q.data(), qd);
    L.wk.matmul(s.mm, s.x.data(), g, s.kraw.data(), kd);
    for (int64_t i = 0; i < g; ++i) {
      const double* cs = &s.cos[(size_t)(i * c.n_rot)];
      const double* sn = &s.sin[(size_t)(i * c.n_rot)];
      float* q = &s.q[(size_t)(i * qd)];
      for (int64_t hh = 0; hh < nh; ++hh) dspark_rms_norm(q + hh * hd, L.q_norm.data(), q + hh * hd, hd, c.rms_eps);
      apply_rope(q, nh, cs, sn);
      const float* kr = &s.kraw[(size_t)(i * kd)];
      float* k = &s.k[(size_t)(i * kd)];
      float* v = &s.v[(size_t)(i * kd)];
      for (int64_t hh = 0; hh < nkv; ++hh) {
        dspark_rms_norm(kr + hh * hd, nullptr, v + hh * hd, hd, c.rms_eps);
        dspark_rms_norm(kr + hh * hd, L.k_norm.data(), k + hh * hd, hd, c.rms_eps);
      }
      apply_rope(k, nkv, cs, sn);
    }
    // 4-5. a = softmax(q·Kᵀ)·V over [context ; block].
    attention(ctx, s, l);
    // 6. h += post_attn_norm(a·Woᵀ)
    L.wo.matmul(s.mm, s.attn.data(), g, s.o.data(), H);
    for (int64_t i = 0; i < g; ++i) {
      float* o = &s.o[(size_t)(i * H)];
      dspark_rms_norm(o, L.post_attn_norm.data(), o, H, c.rms_eps);
      for (int64_t e = 0; e < H; ++e) h[i * H + e] += o[e];
    }
    // 7. h += post_ffw_norm(down(gelu(gate(f)) * up(f))), f = pre_ffw_norm(h)
    for (int64_t i = 0; i < g; ++i) dspark_rms_norm(h + i * H, L.pre_ffw_norm.data(), &s.x[(size_t)(i * H)], H, c.rms_eps);
    L.w_gate.matmul(s.mm, s.x.data(), g, s.gate.data(), I);
    L.w_up.matmul(s.mm, s.x.data(), g, s.up.data(), I);
    kernels::gelu_tanh_mul(s.gate.data(), s.up.data(), s.gate.data(), g * I);
    L.w_down.matmul(s.mm, s.gate.data(), g, s.o.data(), H);
    for (int64_t i = 0; i < g; ++i) {
      float* o = &s.o[(size_t)(i * H)];
      dspark_rms_norm(o, L.post_ffw_norm.data(), o, H, c.rms_eps);
      // 8. layer_scalar multiplies the whole layer output, residual included.
      for (int64_t e = 0; e < H; ++e) h[i * H + e] = (h[i * H + e] + o[e]) * L.layer_scalar;
    }
  }
  for (int64_t i = 0; i < g; ++i) dspark_rms_norm(h + i * H, w_.norm.data(), h_out + i * H, H, c.rms_eps);
}

void DSparkModel::base_logits(DSparkScratch& s, const float* h, int64_t n_rows, float* u_out) const {
  const int64_t vd = draft_vocab();
  w_.lm_head.matmul(s.mm, h, n_rows, u_out, vd);
  const float cap = cfg_.softcap;
  if (cap > 0)
    for (int64_t i = 0; i < n_rows * vd; ++i) u_out[i] = cap * std::tanh(u_out[i] / cap);
}

}  // namespace dspark::net
