#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

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

void pack_weights(ModelWeights* w, kernels::Isa isa, bool release_source) {
  auto pack = [&](kernels::QMatrix& m) {
    if (!m.data || m.packed || !kernels::pack_supported(m.type, isa)) return;
    std::vector<uint8_t> buf(kernels::packed_bytes(m));
    kernels::pack_x8(m, buf.data());
    m.packed = buf.data();
    w->packed.push_back(std::move(buf));
    if (release_source) release_pages(m.data, m.row_stride * (size_t)m.n_rows);
  };
  // The parts' rows, packed one after another into one packed-only matrix (row groups of 8 never
  // straddle two parts: each part has a multiple of 8 rows).
  auto fuse = [&](std::initializer_list<const kernels::QMatrix*> parts, kernels::QMatrix* out) {
    const kernels::QMatrix& first = **parts.begin();
    int64_t rows = 0;
    size_t bytes = 0;
    for (const kernels::QMatrix* m : parts) {
      if (!m->data || m->packed || m->type != first.type || m->n_cols != first.n_cols || m->n_rows % 8 != 0 ||
          !kernels::pack_supported(m->type, isa))
        return false;
      rows += m->n_rows;
      bytes += kernels::packed_bytes(*m);
    }
    std::vector<uint8_t> buf(bytes);
    size_t off = 0;
    for (const kernels::QMatrix* m : parts) {
      kernels::pack_x8(*m, buf.data() + off);
      off += kernels::packed_bytes(*m);
      if (release_source) release_pages(m->data, m->row_stride * (size_t)m->n_rows);
    }
    *out = kernels::QMatrix{first.type, rows, first.n_cols, nullptr, first.row_stride};
    out->packed = buf.data();
    w->packed.push_back(std::move(buf));
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
