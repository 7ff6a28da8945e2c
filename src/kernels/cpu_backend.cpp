// The CPU backend (kernels/backend.h): host memory, the row-interleaved weight copies of
// kernels/packed.h where the ISA has packed kernels, and the kernels of kernels.h / ops.h /
// attention.h. One instance per ISA; the matmul and attention kernels are the ISA's, the
// elementwise ops (ops.h) pick their own vector width at run time, so every instance gives the same
// bits as the kernels called directly (and as each other: the kernels are ISA-invariant).
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/backend.h"
#include "kernels/cpu/cpu.h"
#include "kernels/ops.h"
#include "kernels/packed.h"

namespace dspark::kernels {

Buffer::~Buffer() {
  if (ptr_ && owner_) owner_->release(ptr_, bytes_);
}

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(Isa isa) : isa_(isa) {}

  std::string name() const override { return std::string("cpu-") + isa_name(isa_); }

  Buffer alloc(size_t bytes) const override {
    if (bytes == 0) return {};
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return Buffer(this, p, bytes);
  }
  void release(void* ptr, size_t) const override { std::free(ptr); }
  void copy(void* dst, const void* src, size_t bytes) const override { std::memcpy(dst, src, bytes); }
  void to_host(void* dst, const void* src, size_t bytes) const override { std::memcpy(dst, src, bytes); }
  void from_host(void* dst, const void* src, size_t bytes) const override { std::memcpy(dst, src, bytes); }
  bool host_memory() const override { return true; }

  bool prepare_weight(QMatrix* m, Buffer* storage) const override {
    if (!m->data || m->packed || !pack_supported(m->type, isa_)) return false;
    *storage = alloc(packed_bytes(*m, packed_group_rows(m->type, isa_)));
    attach_packed(m, isa_, static_cast<uint8_t*>(storage->data()));
    return true;
  }

  // The parts' rows packed one after another into one packed-only matrix (row groups never straddle
  // two parts: each part has a multiple of the group's 8 or 16 rows).
  bool fused_weight(std::span<const QMatrix* const> parts, QMatrix* out, Buffer* storage) const override {
    if (parts.empty() || !pack_supported(parts[0]->type, isa_)) return false;
    const int group = packed_group_rows(parts[0]->type, isa_);
    const size_t bytes = fused_packed_bytes(parts, group);
    if (bytes == 0) return false;
    *storage = alloc(bytes);
    *out = pack_fused(parts, group, static_cast<uint8_t*>(storage->data()));
    return true;
  }

  bool weight_prepared(const QMatrix& m) const override { return packed_usable(m, isa_); }

  MatmulContext matmul_context(ThreadPool* pool) const override {
    MatmulContext ctx;
    ctx.isa = isa_;
    ctx.pool = pool;
    return ctx;
  }

  void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y, int64_t ldy) const override {
    kernels::matmul(ctx, w, x, n, y, ldy);
  }
  MatmulPath matmul_path(const QMatrix& w) const override { return kernels::matmul_path(w, isa_); }
  void embed_rows(const QMatrix& table, const int32_t* ids, int64_t n, float s, float* x) const override {
    for (int64_t t = 0; t < n; ++t) {
      float* row = x + t * table.n_cols;
      dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + (size_t)ids[t] * table.row_stride, row,
                     table.n_cols);
      if (s != 1.0f) kernels::scale(row, table.n_cols, s);
    }
  }
  void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const override {
    kernels::rms_norm_rows(x, w, out, rows, n, eps);
  }
  void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const override {
    kernels::rope_angles(head_dim, pos, base, cs);
  }
  void rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const override {
    if (mode == RopeMode::kNeox)
      rope_neox_cs(x, n_heads, head_dim, cs);
    else
      rope_norm_cs(x, n_heads, head_dim, cs);
  }
  void scale(float* x, int64_t n, float s) const override { kernels::scale(x, n, s); }
  void add_inplace(float* y, const float* x, int64_t n) const override { kernels::add_inplace(y, x, n); }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) const override {
    kernels::silu_mul(gate, up, out, n);
  }
  void gelu_mul(const float* gate, const float* up, float* out, int64_t n) const override {
    if (isa_ == Isa::kAvx512) cpu::gelu_table_mul_avx512(gelu().data(), gate, up, out, n);
    else if (isa_ == Isa::kAvx2) cpu::gelu_table_mul_avx2(gelu().data(), gate, up, out, n);
    else gelu().gelu_mul(gate, up, out, n);  // the scalar oracle
  }
  void f32_to_f16(const float* x, uint16_t* y, int64_t n) const override { f32_to_f16_row(x, y, n); }
  void attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos, int64_t n_keys,
                 float* scores, float* out) const override {
    attention_f16kv(isa_, q, n_q, head_dim, kv, first_pos, n_keys, scores, out);
  }
  void attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores) const override {
    attention_f16kv_rows(isa_, rows, n_q, head_dim, kv, scores);
  }
  bool attention_split_ok(int64_t head_dim) const override { return attention_split_supported(isa_, head_dim); }
  void attention_split(const AttnSplit& s, int phase, int part, float* p) const override {
    attention_f16kv_split(isa_, s, phase, part, p);
  }
  int64_t argmax(const float* x, int64_t n) const override { return kernels::argmax(x, n); }

 private:
  // One 256 KB table for every CPU backend, built on first use.
  static const GeluTable& gelu() {
    static const GeluTable table;
    return table;
  }
  Isa isa_;
};

}  // namespace

const Backend& cpu_backend(Isa isa) {
  static const CpuBackend scalar(Isa::kScalar), avx2(Isa::kAvx2), avx512(Isa::kAvx512);
  DSPARK_CHECK(isa <= detect_isa());
  switch (isa) {
    case Isa::kAvx512: return avx512;
    case Isa::kAvx2: return avx2;
    default: return scalar;
  }
}

const Backend& default_backend() { return cpu_backend(detect_isa()); }

}  // namespace dspark::kernels
