// The CUDA backend (kernels/backend.h) on device 0: buffers in device memory, weights uploaded once in
// their GGUF layouts, the ops of cuda_ops.h on one stream. A first, plain version meant to be right
// before it is fast: one launch per op call, the model's per-row and per-head calls as they are.
//
// What crosses to the host inside a forward: the token ids and a token tree's extra key positions
// (up), argmax's index and the logits / taps the model copies out (down). Embedding rows are gathered
// and dequantized on the device from the LM head's copy where the head is tied to the table (both
// targets), else on the host; RoPE angles come from a device table the host fills once per position
// range with the CPU's function (the CPU's bits either way). Copies up go through a pinned ring without
// waiting for the stream (from_host); copies down wait for it.
//
// Weights: prepare_weight uploads a matrix and remembers its device copy by the host address of its
// GGUF bytes (QMatrix::data); matmul finds the copy there, so QMatrix itself is unchanged and CPU
// code that shares the matrix (the DSpark drafter reads the target's LM head) keeps reading the host
// bytes. The entry goes when the copy's Buffer is released.
#include <cuda_runtime.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/qblock.h"
#include "kernels/ops.h"

namespace dspark::kernels::cuda {

namespace {

struct Probe {
  bool ok = false;
  std::string why;
  std::string device;  // "device 0 (NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB)"
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
      r.why = "no usable CUDA device: " + std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
      return r;
    }
    if (n == 0) {
      r.why = "no CUDA device found";
      return r;
    }
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
      r.why = error_text(e, "device 0 properties");
      return r;
    }
    char b[256];
    std::snprintf(b, sizeof b, "device 0 (%s, sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                  (double)prop.totalGlobalMem / (1 << 30));
    r.device = b;
    if (prop.major < 9) {  // the build targets sm_90 (CMakeLists.txt)
      r.why = r.device + " is older than the sm_90 this binary's kernels were built for";
      return r;
    }
    r.ok = true;
    return r;
  }();
  return p;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    check(cudaSetDevice(0), "set device 0");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create stream");
    void* ring = nullptr;
    check(cudaHostAlloc(&ring, kRingBytes, cudaHostAllocDefault), "pinned staging ring");
    ring_ = static_cast<char*>(ring);
    const auto table = std::make_unique<GeluTable>();  // 256 KB (off the stack), uploaded once
    gelu_ = alloc(sizeof(float) * 65536);
    from_host(gelu_.data(), table->data(), sizeof(float) * 65536);
    index_ = alloc(sizeof(int64_t));
  }

  std::string name() const override { return "cuda"; }

  Buffer alloc(size_t bytes) const override {
    if (bytes == 0) return {};
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      char b[160];
      std::snprintf(b, sizeof b, ": %.1f MiB requested, %.1f MiB of %.1f MiB free", (double)bytes / (1 << 20),
                    (double)free_b / (1 << 20), (double)total_b / (1 << 20));
      throw std::runtime_error("cuda " + probe().device + ": out of memory (" + cudaGetErrorName(e) + ")" + b);
    }
    check(cudaMemsetAsync(p, 0, bytes, stream_), "memset");
    return Buffer(this, p, bytes);
  }
  void release(void* ptr, size_t) const override {
    {
      std::lock_guard lk(mu_);
      for (auto it = weights_.begin(); it != weights_.end();)
        it = it->second == ptr ? weights_.erase(it) : std::next(it);
    }
    cudaStreamSynchronize(stream_);  // nothing queued may still use it
    cudaFree(ptr);
  }
  void copy(void* dst, const void* src, size_t bytes) const override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }
  void to_host(void* dst, const void* src, size_t bytes) const override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    check(cudaStreamSynchronize(stream_), "copy to host");
  }
  // The caller's array is free when this returns. Up to a quarter of the staging ring, the bytes go
  // through it (pinned memory) and the transfer is queued without waiting: each row's RoPE angles and
  // the embedding rows of a forward then cost no stream synchronization; a wrap of the ring waits for
  // the stream once (the queued transfers that read its start have then run).
  void from_host(void* dst, const void* src, size_t bytes) const override {
    if (bytes == 0) return;
    if (bytes <= kRingBytes / 4) {
      std::lock_guard lk(ring_mu_);
      if (ring_off_ + bytes > kRingBytes) {
        check(cudaStreamSynchronize(stream_), "copy from host");
        ring_off_ = 0;
      }
      char* p = ring_ + ring_off_;
      ring_off_ = (ring_off_ + bytes + 255) / 256 * 256;
      std::memcpy(p, src, bytes);
      check(cudaMemcpyAsync(dst, p, bytes, cudaMemcpyHostToDevice, stream_), "copy from host");
      return;
    }
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy from host");
    check(cudaStreamSynchronize(stream_), "copy from host");  // src may be a caller's temporary
  }
  bool host_memory() const override { return false; }
  void synchronize() const override { check(cudaStreamSynchronize(stream_), "synchronize"); }

  bool prepare_weight(QMatrix* m, Buffer* storage) const override {
    if (!m->data || !supported(m->type) || device_weight(*m)) return false;
    const size_t bytes = m->row_stride * (size_t)m->n_rows;
    *storage = alloc(bytes);
    from_host(storage->data(), m->data, bytes);
    std::lock_guard lk(mu_);
    weights_[m->data] = storage->data();
    return true;
  }
  bool fused_weight(std::span<const QMatrix* const>, QMatrix*, Buffer*) const override { return false; }
  bool weight_prepared(const QMatrix& m) const override { return device_weight(m) != nullptr; }

  MatmulContext matmul_context(ThreadPool* pool) const override { return MatmulContext{Isa::kScalar, pool}; }

  void matmul(MatmulContext&, const QMatrix& w, const float* x, int64_t n, float* y, int64_t ldy) const override {
    const uint8_t* dw = device_weight(w);
    if (!dw)
      throw std::runtime_error(std::string("cuda matmul: a ") + dtype_name(w.type) + " matrix [" +
                               std::to_string(w.n_rows) + ", " + std::to_string(w.n_cols) + "] was not uploaded" +
                               (supported(w.type) ? "" : " (the CUDA backend has no kernel for this type)"));
    if (act_row(w.type) == ActRow::kF32) {
      cuda::matmul(stream_, w.type, dw, w.row_stride, w.n_rows, w.n_cols, reinterpret_cast<const uint8_t*>(x),
                   (size_t)w.n_cols * 4, n, y, ldy);
      return;
    }
    const size_t stride = (act_row_bytes(w.type, w.n_cols) + 15) / 16 * 16;
    std::lock_guard lk(act_mu_);  // the scratch is the backend's: one product at a time
    if (act_.bytes() < stride * (size_t)n) act_ = alloc(stride * (size_t)n);
    auto* act = static_cast<uint8_t*>(act_.data());
    quantize_rows(stream_, w.type, x, n, w.n_cols, act, stride);
    cuda::matmul(stream_, w.type, dw, w.row_stride, w.n_rows, w.n_cols, act, stride, n, y, ldy);
  }
  MatmulPath matmul_path(const QMatrix& w) const override {
    if (!supported(w.type)) return {"none: the CUDA backend has no kernel for this type", false};
    return {"cuda warp per row, canonical block order (the CPU's bits)", true};
  }

  void embed_rows(const QMatrix& table, const int32_t* ids, int64_t n, float s, float* x) const override {
    if (const uint8_t* dt = device_weight(table)) {  // the table is on the device (a tied LM head's copy)
      std::lock_guard lk(act_mu_);
      if (ids_.bytes() < sizeof(int32_t) * (size_t)n) ids_ = alloc(sizeof(int32_t) * (size_t)n);
      from_host(ids_.data(), ids, sizeof(int32_t) * (size_t)n);
      cuda::embed_rows(stream_, table.type, dt, table.row_stride, static_cast<const int32_t*>(ids_.data()), n,
                       table.n_cols, s, x);
      return;
    }
    std::vector<float> rows((size_t)(n * table.n_cols));  // else dequantized here from the host table
    for (int64_t t = 0; t < n; ++t) {
      float* row = rows.data() + t * table.n_cols;
      dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + (size_t)ids[t] * table.row_stride, row,
                     table.n_cols);
      if (s != 1.0f) kernels::scale(row, table.n_cols, s);
    }
    from_host(x, rows.data(), sizeof(float) * rows.size());
  }
  void rms_norm_rows(const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps) const override {
    cuda::rms_norm_rows(stream_, x, w, out, rows, n, eps);
  }
  // A row of a device table of every position's angles (per head_dim and base), filled on the host by
  // kernels/ops.h rope_angles (the CPU's bits) and grown by doubling: a copy within the device.
  void rope_angles(int64_t head_dim, int64_t pos, float base, float* cs) const override {
    std::lock_guard lk(rope_mu_);  // held while the copy is queued: a concurrent growth frees the old table
    copy(cs, rope_row(head_dim, pos, base), sizeof(float) * (size_t)head_dim);
  }
  void rope(RopeMode mode, float* x, int64_t n_heads, int64_t head_dim, const float* cs) const override {
    cuda::rope_rows(stream_, mode == RopeMode::kNeox, x, 1, 0, n_heads, head_dim, cs, 0);
  }
  void rope_rows(RopeMode mode, float* x, int64_t n_rows, int64_t x_stride, int64_t n_heads, int64_t head_dim,
                 const float* cs, int64_t cs_stride) const override {
    if (n_rows > 0) cuda::rope_rows(stream_, mode == RopeMode::kNeox, x, n_rows, x_stride, n_heads, head_dim, cs, cs_stride);
  }
  void scale(float* x, int64_t n, float s) const override { cuda::scale(stream_, x, n, s); }
  void add_inplace(float* y, const float* x, int64_t n) const override { cuda::add_inplace(stream_, y, x, n); }
  void silu_mul(const float* gate, const float* up, float* out, int64_t n) const override {
    cuda::silu_mul(stream_, gate, up, out, n);
  }
  void gelu_mul(const float* gate, const float* up, float* out, int64_t n) const override {
    gelu_table_mul(stream_, static_cast<const float*>(gelu_.data()), gate, up, out, n);
  }
  void f32_to_f16(const float* x, uint16_t* y, int64_t n) const override {
    cuda::f32_to_f16_rows(stream_, x, 0, y, 0, 1, n);
  }
  void f32_to_f16_rows(const float* x, int64_t xs, uint16_t* y, int64_t ys, int64_t n_rows, int64_t n) const override {
    if (n_rows > 0) cuda::f32_to_f16_rows(stream_, x, xs, y, ys, n_rows, n);
  }

  void attention(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos, int64_t n_keys,
                 float* scores, float* out) const override {
    DeviceKv d{kv.k, kv.v, kv.capacity, kv.stride, nullptr, kv.n_extra};
    std::lock_guard lk(act_mu_);
    if (kv.n_extra > 0) {  // a tree row's ancestors: host positions, copied up (stream order keeps them)
      const size_t bytes = sizeof(int64_t) * (size_t)kv.n_extra;
      if (extra_.bytes() < bytes) extra_ = alloc(std::max<size_t>(bytes, 4096));
      from_host(extra_.data(), kv.extra, bytes);
      d.extra = static_cast<const int64_t*>(extra_.data());
    }
    cuda::attention(stream_, q, n_q, head_dim, d, first_pos, n_keys, scores, out);
  }
  // All rows in one launch: their positions (host arrays) go up through the ring, and each (row, head)
  // gets its own span of a backend scratch for its scores (the caller's is sized for one row at a time).
  void attention_rows(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float*) const override {
    if (rows.n_rows <= 0) return;
    const DeviceKv d{kv.k, kv.v, kv.capacity, kv.stride, nullptr, 0};
    const size_t nr = (size_t)rows.n_rows;
    int64_t max_keys = 0;
    for (size_t r = 0; r < nr; ++r) max_keys = std::max(max_keys, rows.n_keys[r]);
    std::lock_guard lk(act_mu_);
    if (row_pos_.bytes() < 2 * nr * sizeof(int64_t)) row_pos_ = alloc(std::max<size_t>(2 * nr * sizeof(int64_t), 4096));
    auto* pos = static_cast<int64_t*>(row_pos_.data());
    from_host(pos, rows.first_pos, nr * sizeof(int64_t));
    from_host(pos + nr, rows.n_keys, nr * sizeof(int64_t));
    const size_t score_bytes = nr * (size_t)n_q * (size_t)max_keys * sizeof(float);
    if (scores_.bytes() < score_bytes) scores_ = alloc(score_bytes);
    cuda::attention_rows(stream_, rows.q, rows.q_stride, rows.out, rows.out_stride, pos, pos + nr, rows.n_rows, n_q,
                         head_dim, d, static_cast<float*>(scores_.data()), max_keys);
  }
  int64_t attention_rows_min() const override { return 2; }  // a launch per row costs more than any sharing
  bool attention_split_ok(int64_t) const override { return false; }
  void attention_split(const AttnSplit&, int, int, float*) const override {
    throw std::logic_error("cuda: attention_split is not offered (attention_split_ok is false)");
  }
  int64_t argmax(const float* x, int64_t n) const override {
    std::lock_guard lk(act_mu_);
    cuda::argmax(stream_, x, n, static_cast<int64_t*>(index_.data()));
    int64_t i = 0;
    to_host(&i, index_.data(), sizeof i);
    return i;
  }

 private:
  static constexpr int64_t kRopeMinPositions = 4096;
  struct RopeTable {
    int64_t head_dim;
    float base;
    int64_t n_pos;
    Buffer data;  // [n_pos, head_dim] f32: cos of the half, then sin
  };
  static constexpr size_t kRingBytes = size_t{8} << 20;  // pinned host -> device staging

  // The device address of position pos's angles; the caller holds rope_mu_ until it has used it.
  const float* rope_row(int64_t head_dim, int64_t pos, float base) const {
    RopeTable* t = nullptr;
    for (RopeTable& r : rope_)
      if (r.head_dim == head_dim && r.base == base) t = &r;
    if (!t) t = &rope_.emplace_back(RopeTable{head_dim, base, 0, {}});
    if (pos >= t->n_pos) {
      const int64_t n = std::max<int64_t>({pos + 1, 2 * t->n_pos, kRopeMinPositions});
      std::vector<float> host((size_t)(n * head_dim));  // [n, head_dim]
      for (int64_t p = 0; p < n; ++p) kernels::rope_angles(head_dim, p, base, host.data() + p * head_dim);
      Buffer b = alloc(sizeof(float) * host.size());
      from_host(b.data(), host.data(), sizeof(float) * host.size());
      t->data = std::move(b);  // the old table's release waits for the copies queued from it
      t->n_pos = n;
    }
    return static_cast<const float*>(t->data.data()) + pos * head_dim;
  }

  const uint8_t* device_weight(const QMatrix& m) const {
    std::lock_guard lk(mu_);
    auto it = weights_.find(m.data);
    return it == weights_.end() ? nullptr : static_cast<const uint8_t*>(it->second);
  }

  cudaStream_t stream_ = nullptr;
  Buffer gelu_, index_;
  mutable std::mutex mu_;
  mutable std::map<const void*, void*> weights_;  // host GGUF bytes -> device copy
  char* ring_ = nullptr;
  mutable size_t ring_off_ = 0;
  mutable std::mutex ring_mu_;
  mutable std::mutex act_mu_;  // the scratch buffers below
  mutable Buffer act_;  // quantized activation rows, grown as needed
  mutable Buffer ids_;    // embed_rows' token ids
  mutable Buffer extra_;  // attention's extra key positions (token trees)
  mutable Buffer row_pos_;  // attention_rows' first positions and key counts [2, n_rows]
  mutable Buffer scores_;   // attention_rows' scores [n_rows, n_q, max keys]
  mutable std::mutex rope_mu_;
  mutable std::vector<RopeTable> rope_;
};

std::string& init_error() {
  static std::string e;
  return e;
}

}  // namespace

bool available() { return probe().ok; }

std::string unavailable_reason() {
  if (!probe().ok) return probe().why;
  return init_error().empty() ? "" : probe().device + ": " + init_error();
}

const Backend* backend() {
  if (!available()) return nullptr;
  // Lives as long as the process (models' buffers may outlive any scope that made it).
  static const CudaBackend* be = []() -> const CudaBackend* {
    try {
      return new CudaBackend();
    } catch (const std::exception& e) {
      init_error() = e.what();
      return nullptr;
    }
  }();
  return be;
}

}  // namespace dspark::kernels::cuda
