// A backend that times every op of another backend (a decorator: the model runs unchanged on it).
// `dspark bench --profile` loads the target on one to say where decode time goes: per op (matmuls
// by weight type and shape), calls and milliseconds. Ops run from worker threads (attention, one
// call per K/V head group; in forwards of >= 32 rows also norms, RoPE, KV stores, adds and
// activations, model::Model::row_ranges) are timed per call and summed over threads, so their
// figure is thread time, not wall time. Timing costs two clock reads per op (~0.05 us).
// Thread safety: as the wrapped backend; the tables are guarded by a mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace dspark::kernels {

struct OpTime {
  std::string op;     // "matmul Q8_0 [262144 x 640]", "attention", "rms_norm", ...
  int64_t calls = 0;
  double ms = 0.0;    // summed over calls (and threads)
  bool thread_time = false;  // called from worker threads: ms is thread time, not the caller's wall time
};

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(const Backend& inner) : in_(inner) {}

  // Timing is on only between start() and stop(); reset() clears the table.
  void start() const { on_.store(true); }
  void stop() const { on_.store(false); }
  void reset() const;
  std::vector<OpTime> table() const;  // by ms, largest first

  std::string name() const override { return in_.name(); }
  Buffer alloc(size_t bytes) const override { return in_.alloc(bytes); }
  void release(void* ptr, size_t bytes) const override { in_.release(ptr, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const override;
  void to_host(void* host_dst, const void* src, size_t bytes) const override;
  void from_host(void* dst, const void* host_src, size_t bytes) const override;
  bool host_memory() const override { return in_.host_memory(); }
  void synchronize() const override { in_.synchronize(); }
  bool prepare_weight(QMatrix* m, Buffer* storage) const override { return in_.prepare_weight(m, storage); }
  bool fused_weight(std::span<const QMatrix* const> parts, QMatrix* out, Buffer* storage) const override {
    return in_.fused_weight(parts, out, storage);
  }
  bool weight_prepared(const QMatrix& m) const override { return in_.weight_prepared(m); }
  bool prepared_runs(const QMatrix& m, int64_t n) const override { return in_.prepared_runs(m, n); }
  MatmulContext matmul_context(ThreadPool* pool) const override { return in_.matmul_context(pool); }
  void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y, int64_t ldy) const override;
  MatmulPath matmul_path(const QMatrix& w) const override { return in_.matmul_path(w); }
  void embed_rows(const QMatrix& table, const int32_t* ids, int64_t n, float scale, float* x) const override;
  void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const override;
  void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const override;
  void rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const override;
  void scale(float* x, int64_t n, float s) const override;
  void add_inplace(float* y, const float* x, int64_t n) const override;
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) const override;
  void gelu_mul(const float* gate, const float* up, float* out, int64_t n) const override;
  void f32_to_f16(const float* x, uint16_t* y, int64_t n) const override;
  void attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos, int64_t n_keys,
                 float* scores, float* out) const override;
  void attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores) const override;
  bool attention_split_ok(int64_t head_dim) const override { return in_.attention_split_ok(head_dim); }
  void attention_split(const AttnSplit& s, int phase, int part, float* p) const override;
  int64_t argmax(const float* x, int64_t n) const override;
  void rope_rows(RopeMode mode, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
                 const float* cs, int64_t cs_stride) const override;
  void f32_to_f16_rows(const float* x, int64_t xs, uint16_t* y, int64_t ys, int64_t n_rows, int64_t n) const override;
  int64_t attention_rows_min() const override { return in_.attention_rows_min(); }

 private:
  template <class Fn>
  void timed(const std::string& op, const Fn& fn, bool thread_time = false) const;
  const Backend& in_;
  mutable std::atomic<bool> on_{false};
  mutable std::mutex mu_;
  mutable std::map<std::string, OpTime> ops_;
};

}  // namespace dspark::kernels
