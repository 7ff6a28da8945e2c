// The compute backend seam: everything a model's forward does to memory goes through one Backend,
// chosen once when the model is loaded (model::load_model). A backend owns
//   - buffers (activations, fused-matmul outputs, the KV cache, repacked weight copies), allocated
//     with alloc(); model code never allocates compute memory itself;
//   - weight preparation (prepare_weight: e.g. the CPU's row-interleaved copies of kernels/packed.h);
//   - the ops of a decoder layer: matmul over every GGUF weight type, RMS norm, RoPE, scale / add,
//     gated activations, f16 KV stores, attention, embedding rows, argmax;
//   - the copy of the logits to the host (to_host), once per forward.
// Pointers passed to the ops are memory of the same backend (alloc()); to_host() and from_host()
// cross to the caller's memory. The CPU backend (kernels/cpu_backend.cpp) runs the kernels of
// kernels.h / ops.h / attention.h picked for one ISA, so its results are those kernels' bits.
// A new backend is new files plus one row in kernels/backend_registry.cpp: no model file changes.
// The CUDA backend (kernels/cuda/) is one. A backend whose memory is not the host's
// (host_memory() false) gets copies of the f32 norm vectors at load (model/weights.h); the serve
// prompt cache copies K/V rows through to_host / from_host.
// Host memory at the seam: embed_rows' ids and table bytes, AttnRows::first_pos / n_keys and
// KvView::extra (small index arrays the model plans on the host), the scalar arguments.
// Not yet behind the seam: the DSpark drafter network (src/dspark, its affine / turbo / int8
// matmuls) and the sampler, which run on the CPU over host logits.
// Thread safety: a Backend is shared and may be called from several threads (the model's pool);
// MatmulContext is per calling thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

namespace dspark::kernels {

class Backend;

// Bytes owned by one backend (move-only). CPU: 64-byte aligned host memory, zero-filled.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Backend* owner, void* ptr, size_t bytes) : owner_(owner), ptr_(ptr), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer t(std::move(o));
    swap(t);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  const Backend* owner() const { return owner_; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  const Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A typed array in backend memory with the part of std::vector's interface the model uses.
// resize() keeps the first min(old, new) elements (a copy inside the backend) and zero-fills the rest.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(const Backend* be) : be_(be) {}
  DeviceArray(const Backend* be, size_t n) : be_(be) { resize(n); }

  void bind(const Backend* be) { be_ = be; }
  T* data() { return static_cast<T*>(buf_.data()); }
  const T* data() const { return static_cast<const T*>(buf_.data()); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  void resize(size_t n);
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  const Backend* be_ = nullptr;
  Buffer buf_;
  size_t n_ = 0;
};

enum class RopeMode { kNeox, kNormal };  // pairs (i, i + hd/2) / pairs (2i, 2i + 1), ops.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu-avx512", ...

  // Memory. alloc(0) gives an empty buffer. release() is called by Buffer's destructor only.
  virtual Buffer alloc(size_t bytes) const = 0;
  virtual void release(void* ptr, size_t bytes) const = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;           // within the backend
  virtual void to_host(void* host_dst, const void* src, size_t bytes) const = 0;  // backend -> caller
  virtual void from_host(void* dst, const void* host_src, size_t bytes) const = 0;
  // True when backend memory is the caller's memory (the CPU): results may be written straight
  // into host arrays (the session's logits) instead of staged and copied.
  virtual bool host_memory() const = 0;
  // Returns once every op called so far has finished. The CPU's ops finish before they return (a
  // no-op); a device backend's are queued. For timing single ops (ProfilingBackend, bench --profile).
  virtual void synchronize() const {}

  // Weights. prepare_weight(m, &storage) may give m a backend copy (m.packed on the CPU) held in
  // storage; returns false when m stays as it is. fused_weight() prepares one matrix of the parts'
  // rows stacked (same type and width) when the backend has a kernel for it; empty storage when not.
  virtual bool prepare_weight(QMatrix* m, Buffer* storage) const = 0;
  virtual bool fused_weight(std::span<const QMatrix* const> parts, QMatrix* out, Buffer* storage) const = 0;
  // True when m can run from its prepared copy alone (its source bytes may then be released).
  virtual bool weight_prepared(const QMatrix& m) const = 0;
  // True when products of n rows by m run from its prepared copy: model code then uses a fused
  // matrix (model/weights.h) for them, else its parts. A kernel plan (kernels/planned_backend.h)
  // may run some token counts from the GGUF layout; otherwise this is weight_prepared(m).
  virtual bool prepared_runs(const QMatrix& m, int64_t n) const { return weight_prepared(m); }

  // Per-thread matmul state for this backend (scratch of quantized activations, the thread pool).
  virtual MatmulContext matmul_context(ThreadPool* pool) const = 0;

  // y[t, r] = dot(W[r, :], x[t, :]); x [n, n_cols] f32, y [n, ldy] f32. Batch-invariant (kernels.h).
  virtual void matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y, int64_t ldy) const = 0;
  // Which kernel matmul runs for w (reports: --verbose); simd false = a reference path.
  virtual MatmulPath matmul_path(const QMatrix& w) const = 0;
  // x [n, n_cols] <- rows ids[0..n) of table (any weight type), times scale when != 1.
  virtual void embed_rows(const QMatrix& table, const int32_t* ids, int64_t n, float scale, float* x) const = 0;
  // out [rows, n] <- rms_norm of x [rows, n] with weight w [n] (out may alias x).
  virtual void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const = 0;
  // RoPE: cs [head_dim] <- the angles of position pos (ops.h, rope_angles: cos, then sin), computed once
  // a row and forward; then x [n_heads, head_dim] rotated in place by them.
  virtual void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const = 0;
  virtual void rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const = 0;
  virtual void scale(float* x, int64_t n, float s) const = 0;                 // x *= s
  virtual void add_inplace(float* y, const float* x, int64_t n) const = 0;   // y += x
  virtual void silu_mul(const float* gate, const float* up, float* out, int64_t n) const = 0;
  virtual void gelu_mul(const float* gate, const float* up, float* out, int64_t n) const = 0;  // ggml's table GELU
  virtual void f32_to_f16(const float* x, uint16_t* y, int64_t n) const = 0;  // KV stores
  // Attention of n_q query heads over one K/V head's cache (kernels/attention.h numerics).
  virtual void attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                         int64_t n_keys, float* scores, float* out) const = 0;
  // Several rows of one sequence against one K/V head (kernels/attention.h, attention_f16kv_rows): each
  // row's result is attention()'s for that row, bit for bit.
  virtual void attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores) const = 0;
  // One row's attention split over threads in three phases (kernels/attention.h, AttnSplit): the same
  // bits as attention(). Only where attention_split_ok(head_dim).
  virtual bool attention_split_ok(int64_t head_dim) const = 0;
  virtual void attention_split(const AttnSplit& s, int phase, int part, float* p) const = 0;
  virtual int64_t argmax(const float* x, int64_t n) const = 0;  // first index of the largest value

  // Several rows in one call, for backends where a call costs a launch (a device); the defaults call
  // the one-row ops above row by row, so a backend without its own gives the same bits.
  // Row t of x (at x + t * x_stride, [n_heads, head_dim]) rotated by the angles at cs + t * cs_stride.
  virtual void rope_rows(RopeMode mode, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
                         const float* cs, int64_t cs_stride) const {
    for (int64_t t = 0; t < n_rows; ++t) rope(mode, x + t * x_stride, n_heads, head_dim, cs + t * cs_stride);
  }
  // Row t of y (at y + t * y_stride) <- f16 of row t of x (at x + t * x_stride), n values each.
  virtual void f32_to_f16_rows(const float* x, int64_t x_stride, uint16_t* y, int64_t y_stride, int64_t n_rows,
                               int64_t n) const {
    for (int64_t t = 0; t < n_rows; ++t) f32_to_f16(x + t * x_stride, y + t * y_stride, n);
  }
  // The fewest rows of one sequence and K/V head that the model hands to attention_rows() together
  // (fewer: attention() per row). The CPU's: where converting the keys once pays (kRowsMin).
  virtual int64_t attention_rows_min() const { return kRowsMin; }
};

// The registered backends, in preference order: name, one line of help, whether this machine can
// run it and why not, and the instance (nullptr when it cannot).
struct BackendInfo {
  const char* name;
  const char* help;
  bool (*available)();
  std::string (*why_not)();  // one line for --backend NAME when !available()
  const Backend* (*get)();
};
std::span<const BackendInfo> backends();

// "auto" / "" = the first available backend; else the named one, or an error naming the field and
// saying why the named backend cannot run here (or that there is none of that name), listing the
// available backends.
Result<const Backend*> find_backend(const std::string& name);
// The CPU backend for the best ISA of this CPU (the default of model::load_model).
const Backend& default_backend();
// The CPU backend for one ISA (tests, benchmarks); isa must not exceed detect_isa().
const Backend& cpu_backend(Isa isa);

template <class T>
void DeviceArray<T>::resize(size_t n) {
  if (n == n_) return;
  DSPARK_CHECK(be_ != nullptr);
  Buffer nb = be_->alloc(n * sizeof(T));
  if (n_ > 0 && n > 0) be_->copy(nb.data(), buf_.data(), std::min(n, n_) * sizeof(T));
  buf_ = std::move(nb);
  n_ = n;
}

}  // namespace dspark::kernels
