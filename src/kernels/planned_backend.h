// The CPU backend run by a kernel plan (kernels/plan.h): a decorator over the auto CPU backend
// (cpu_backend.cpp) that keeps its memory, ops and attention, and replaces the weight preparation
// and the matmul dispatch:
//   - a planned type gets the packed copy its plan's paths read (x16 or x8 rows per group; none
//     when every bucket runs the GGUF layout), and its fusions (model/weights.h) only then;
//   - matmul over n tokens runs the path plan.path_for(type, n) (kernels.h matmul_on);
//   - prepared_runs(m, n) says whether the packed copy serves n-row products, so model code runs
//     a fused matrix where its bucket is packed and the parts (GGUF layout) elsewhere;
//   - weight_prepared(m) is true only when no bucket of m's type needs the GGUF bytes, so the
//     source pages of a type with a GGUF-layout path stay mapped.
// Types the plan does not cover run as the wrapped backend runs them. Every path gives the same
// bits (cpu/cpu.h), so a planned model's outputs equal the unplanned one's.
// Thread safety: immutable after construction, like every Backend.
#pragma once

#include "kernels/backend.h"
#include "kernels/plan.h"

namespace dspark::kernels {

class PlannedCpuBackend final : public Backend {
 public:
  // inner: the CPU backend of the plan's ISA (it must outlive this one).
  PlannedCpuBackend(const Backend& inner, KernelPlan plan) : in_(inner), plan_(std::move(plan)) {}
  const KernelPlan& plan() const { return plan_; }

  std::string name() const override { return in_.name() + "+plan"; }
  Buffer alloc(size_t bytes) const override { return in_.alloc(bytes); }
  void release(void* ptr, size_t bytes) const override { in_.release(ptr, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const override { in_.copy(dst, src, bytes); }
  void to_host(void* d, const void* s, size_t bytes) const override { in_.to_host(d, s, bytes); }
  void from_host(void* d, const void* s, size_t bytes) const override { in_.from_host(d, s, bytes); }
  bool host_memory() const override { return in_.host_memory(); }
  void synchronize() const override { in_.synchronize(); }
  bool prepare_weight(QMatrix* m, Buffer* storage) const override;
  bool fused_weight(std::span<const QMatrix* const> parts, QMatrix* out, Buffer* storage) const override;
  bool weight_prepared(const QMatrix& m) const override;
  bool prepared_runs(const QMatrix& m, int64_t n) const override;
  MatmulContext matmul_context(ThreadPool* pool) const override { return in_.matmul_context(pool); }
  void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y, int64_t ldy) const override;
  MatmulPath matmul_path(const QMatrix& w) const override;
  void embed_rows(const QMatrix& t, const int32_t* ids, int64_t n, float s, float* x) const override {
    in_.embed_rows(t, ids, n, s, x);
  }
  void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const override {
    in_.rms_norm_rows(x, w, out, rows, n, eps);
  }
  void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const override {
    in_.rope_angles(head_dim, pos, base, cs);
  }
  void rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const override {
    in_.rope(mode, x, n_heads, head_dim, cs);
  }
  void scale(float* x, int64_t n, float s) const override { in_.scale(x, n, s); }
  void add_inplace(float* y, const float* x, int64_t n) const override { in_.add_inplace(y, x, n); }
  void silu_mul(const float* g, const float* u, float* out, int64_t n) const override { in_.silu_mul(g, u, out, n); }
  void gelu_mul(const float* g, const float* u, float* out, int64_t n) const override { in_.gelu_mul(g, u, out, n); }
  void f32_to_f16(const float* x, uint16_t* y, int64_t n) const override { in_.f32_to_f16(x, y, n); }
  void attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos, int64_t n_keys,
                 float* scores, float* out) const override {
    in_.attention(q, n_q, head_dim, kv, first_pos, n_keys, scores, out);
  }
  void attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores) const override {
    in_.attention_rows(rows, n_q, head_dim, kv, scores);
  }
  bool attention_split_ok(int64_t head_dim) const override { return in_.attention_split_ok(head_dim); }
  void attention_split(const AttnSplit& s, int phase, int part, float* p) const override {
    in_.attention_split(s, phase, part, p);
  }
  int64_t argmax(const float* x, int64_t n) const override { return in_.argmax(x, n); }
  void rope_rows(RopeMode mode, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
                 const float* cs, int64_t cs_stride) const override {
    in_.rope_rows(mode, x, n_rows, x_stride, n_heads, head_dim, cs, cs_stride);
  }
  void f32_to_f16_rows(const float* x, int64_t xs, uint16_t* y, int64_t ys, int64_t n_rows, int64_t n) const override {
    in_.f32_to_f16_rows(x, xs, y, ys, n_rows, n);
  }
  int64_t attention_rows_min() const override { return in_.attention_rows_min(); }

 private:
  const Backend& in_;
  KernelPlan plan_;
};

}  // namespace dspark::kernels
