#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "kernels/packed.h"

namespace dspark::model {

Result<const formats::GgufTensorInfo*> TensorBinder::find(const std::string& name, int64_t ne0, int64_t ne1) {
  const formats::GgufTensorInfo* t = f_.find_tensor(name);
  if (!t) return Status::error(f_.path() + ": tensor '" + name + "' missing");
  const bool is_vector = ne1 == 0;
  const bool ok = is_vector ? (t->n_dims == 1 && t->ne[0] == ne0)
                            : (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1);
  if (!ok) {
    std::string got;
    for (int d = 0; d < t->n_dims; ++d) got += (d ? ", " : "") + std::to_string(t->ne[d]);
    std::string want = std::to_string(ne0) + (is_vector ? "" : ", " + std::to_string(ne1));
    return Status::error(f_.path() + ": tensor '" + name + "' has shape [" + got + "], expected [" + want + "]");
  }
  total_bytes_ += t->n_bytes;
  return t;
}

Status TensorBinder::vec(const std::string& name, int64_t n, const float** out) {
  auto t = find(name, n, 0);
  if (!t) return t.status();
  if ((*t)->type != DType::F32)
    return Status::error(f_.path() + ": tensor '" + name + "' must be F32, is " + dtype_name((*t)->type));
  *out = reinterpret_cast<const float*>(f_.tensor_data(**t));
  return Status::ok();
}

Status TensorBinder::mat(const std::string& name, int64_t n_rows, int64_t n_cols, kernels::QMatrix* out) {
  auto t = find(name, n_cols, n_rows);
  if (!t) return t.status();
  out->type = (*t)->type;
  out->n_rows = n_rows;
  out->n_cols = n_cols;
  out->data = f_.tensor_data(**t);
  out->row_stride = row_bytes((*t)->type, n_cols);
  return Status::ok();
}

namespace {

// Drops the whole pages inside [p, p + n) of a read-only file mapping from memory (MADV_DONTNEED:
// clean file pages are re-read on the next access). A hint: failure changes nothing.
void release_pages(const void* p, size_t n) {
  const auto page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

}  // namespace

void prepare_weights(ModelWeights* w, const kernels::Backend& be, bool release_source, const ModelConfig& config) {
  auto vec = [&](const float*& v, int64_t n) {  // a norm vector [n] f32 into backend memory
    if (!v || be.host_memory()) return;
    kernels::Buffer b = be.alloc(sizeof(float) * (size_t)n);
    be.from_host(b.data(), v, sizeof(float) * (size_t)n);
    v = static_cast<const float*>(b.data());
    w->prepared.push_back(std::move(b));
  };
  vec(w->output_norm, config.n_embd);
  for (LayerWeights& L : w->layers) {
    for (const float** v : {&L.attn_norm, &L.post_attn_norm, &L.ffn_norm, &L.post_ffw_norm}) vec(*v, config.n_embd);
    for (const float** v : {&L.q_norm, &L.k_norm}) vec(*v, config.head_dim);
  }
  auto pack = [&](kernels::QMatrix& m) {
    kernels::Buffer storage;
    if (!be.prepare_weight(&m, &storage)) return;
    w->prepared.push_back(std::move(storage));
    if (release_source && be.weight_prepared(m)) release_pages(m.data, m.row_stride * (size_t)m.n_rows);
  };
  auto fuse = [&](std::initializer_list<const kernels::QMatrix*> parts, kernels::QMatrix* out) {
    kernels::Buffer storage;
    if (!be.fused_weight(std::span<const kernels::QMatrix* const>(parts.begin(), parts.size()), out, &storage))
      return false;
    w->prepared.push_back(std::move(storage));
    if (release_source && be.weight_prepared(*out))  // else some token counts run the parts (a kernel plan)
      for (const kernels::QMatrix* m : parts) release_pages(m->data, m->row_stride * (size_t)m->n_rows);
    return true;
  };
  for (LayerWeights& L : w->layers) {
    if (!fuse({&L.wq, &L.wk, &L.wv}, &L.wqkv))
      for (kernels::QMatrix* m : {&L.wq, &L.wk, &L.wv}) pack(*m);
    if (!fuse({&L.w_gate, &L.w_up}, &L.w_gate_up))
      for (kernels::QMatrix* m : {&L.w_gate, &L.w_up}) pack(*m);
    for (kernels::QMatrix* m : {&L.wo, &L.w_down}) pack(*m);
  }
  pack(w->output);  // a tied head's pages are the token table's: rows re-read on lookup
}

std::vector<KernelUse> kernel_use(const ModelWeights& w, const kernels::Backend& be) {
  std::vector<KernelUse> rows;
  auto add = [&](const kernels::QMatrix& m) {
    if (m.n_rows <= 0) return;
    const kernels::MatmulPath path = be.matmul_path(m);
    const std::string type = dtype_name(m.type);
    auto it = std::find_if(rows.begin(), rows.end(), [&](const KernelUse& r) { return r.type == type && r.kernel == path.kernel; });
    if (it == rows.end()) it = rows.insert(rows.end(), KernelUse{type, path.kernel, path.simd, 0, 0});
    ++it->matrices;
    it->bytes += row_bytes(m.type, m.n_cols) * (size_t)m.n_rows;
  };
  for (const LayerWeights& L : w.layers) {
    if (be.prepared_runs(L.wqkv, 1)) add(L.wqkv);
    else for (const kernels::QMatrix* m : {&L.wq, &L.wk, &L.wv}) add(*m);
    if (be.prepared_runs(L.w_gate_up, 1)) add(L.w_gate_up);
    else for (const kernels::QMatrix* m : {&L.w_gate, &L.w_up}) add(*m);
    add(L.wo);
    add(L.w_down);
  }
  add(w.output);
  return rows;
}

Status bind_embeddings_and_head(TensorBinder& b, const ModelConfig& c, ModelWeights* w) {
  DSPARK_RETURN_IF_ERROR(b.mat("token_embd.weight", c.n_vocab, c.n_embd, &w->token_embd));
  DSPARK_RETURN_IF_ERROR(b.vec("output_norm.weight", c.n_embd, &w->output_norm));
  w->tied_output = !b.has("output.weight");
  if (w->tied_output) {
    w->output = w->token_embd;
  } else {
    DSPARK_RETURN_IF_ERROR(b.mat("output.weight", c.n_vocab, c.n_embd, &w->output));
  }
  return Status::ok();
}

}  // namespace dspark::model
