#include "kernels/profiling_backend.h"

#include <algorithm>
#include <chrono>

namespace dspark::kernels {

template <class Fn>
void ProfilingBackend::timed(const std::string& op, const Fn& fn, bool thread_time) const {
  if (!on_.load(std::memory_order_relaxed)) {
    fn();
    return;
  }
  in_.synchronize();  // a device backend's queue: the op's own time, not its launch's or the ones before
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  in_.synchronize();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  OpTime& t = ops_[op];
  if (t.op.empty()) t.op = op;
  t.thread_time = thread_time;
  ++t.calls;
  t.ms += ms;
}

void ProfilingBackend::reset() const {
  std::lock_guard<std::mutex> lock(mu_);
  ops_.clear();
}

std::vector<OpTime> ProfilingBackend::table() const {
  std::vector<OpTime> v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, t] : ops_) v.push_back(t);
  }
  std::sort(v.begin(), v.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return v;
}

void ProfilingBackend::copy(void* dst, const void* src, size_t bytes) const {
  timed("copy", [&] { in_.copy(dst, src, bytes); });
}
void ProfilingBackend::to_host(void* dst, const void* src, size_t bytes) const {
  timed("to_host", [&] { in_.to_host(dst, src, bytes); });
}
void ProfilingBackend::from_host(void* dst, const void* src, size_t bytes) const {
  timed("from_host", [&] { in_.from_host(dst, src, bytes); });
}
void ProfilingBackend::matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y,
                              int64_t ldy) const {
  if (!on_.load(std::memory_order_relaxed)) return in_.matmul(ctx, w, x, n, y, ldy);
  const std::string op = std::string("matmul ") + dtype_name(w.type) + " [" + std::to_string(w.n_rows) + " x " +
                         std::to_string(w.n_cols) + "]";
  timed(op, [&] { in_.matmul(ctx, w, x, n, y, ldy); });
}
void ProfilingBackend::embed_rows(const QMatrix& table, const int32_t* ids, int64_t n, float s, float* x) const {
  timed("embed_rows", [&] { in_.embed_rows(table, ids, n, s, x); });
}
void ProfilingBackend::rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n,
                                     float eps) const {
  timed("rms_norm", [&] { in_.rms_norm_rows(x, w, out, rows, n, eps); });
}
void ProfilingBackend::rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const {
  timed("rope_angles", [&] { in_.rope_angles(head_dim, pos, base, cs); });
}
void ProfilingBackend::rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const {
  timed("rope", [&] { in_.rope(mode, x, n_heads, head_dim, cs); });
}
void ProfilingBackend::scale(float* x, int64_t n, float s) const {
  timed("scale", [&] { in_.scale(x, n, s); });
}
void ProfilingBackend::add_inplace(float* y, const float* x, int64_t n) const {
  timed("add", [&] { in_.add_inplace(y, x, n); });
}
void ProfilingBackend::silu_mul(const float* gate, const float* up, float* out, int64_t n) const {
  timed("silu_mul", [&] { in_.silu_mul(gate, up, out, n); });
}
void ProfilingBackend::gelu_mul(const float* gate, const float* up, float* out, int64_t n) const {
  timed("gelu_mul", [&] { in_.gelu_mul(gate, up, out, n); });
}
void ProfilingBackend::f32_to_f16(const float* x, uint16_t* y, int64_t n) const {
  timed("f32_to_f16 (KV store)", [&] { in_.f32_to_f16(x, y, n); });
}
void ProfilingBackend::attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                                 int64_t n_keys, float* scores, float* out) const {
  timed("attention (thread time)", [&] { in_.attention(q, n_q, head_dim, kv, first_pos, n_keys, scores, out); },
        /*thread_time=*/true);
}
void ProfilingBackend::attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv,
                                      float* scores) const {
  timed("attention (thread time)", [&] { in_.attention_rows(rows, n_q, head_dim, kv, scores); }, /*thread_time=*/true);
}
void ProfilingBackend::attention_split(const AttnSplit& s, int phase, int part, float* p) const {
  timed("attention (thread time)", [&] { in_.attention_split(s, phase, part, p); }, /*thread_time=*/true);
}
void ProfilingBackend::rope_rows(RopeMode mode, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads,
                                 int64_t head_dim, const float* cs, int64_t cs_stride) const {
  timed("rope", [&] { in_.rope_rows(mode, x, n_rows, x_stride, n_heads, head_dim, cs, cs_stride); });
}
void ProfilingBackend::f32_to_f16_rows(const float* x, int64_t xs, uint16_t* y, int64_t ys, int64_t n_rows,
                                       int64_t n) const {
  timed("f32_to_f16 (KV store)", [&] { in_.f32_to_f16_rows(x, xs, y, ys, n_rows, n); });
}
int64_t ProfilingBackend::argmax(const float* x, int64_t n) const {
  int64_t r = 0;
  timed("argmax", [&] { r = in_.argmax(x, n); });
  return r;
}

}  // namespace dspark::kernels
