// The CPU backend run by a kernel plan (kernels/planned_backend.h).
#include "kernels/planned_backend.h"

#include "kernels/packed.h"

namespace dspark::kernels {

bool PlannedCpuBackend::prepare_weight(QMatrix* m, Buffer* storage) const {
  const TypePlan* tp = plan_.find(m->type);
  if (!tp) return in_.prepare_weight(m, storage);
  if (!m->data || m->packed || tp->packed_rows == 0) return false;
  *storage = alloc(packed_bytes(*m, tp->packed_rows));
  pack(*m, tp->packed_rows, static_cast<uint8_t*>(storage->data()));
  m->packed = static_cast<const uint8_t*>(storage->data());
  m->packed_rows = tp->packed_rows;
  return true;
}

// As the CPU backend's fused_weight (cpu_backend.cpp), with the plan's rows per group.
bool PlannedCpuBackend::fused_weight(std::span<const QMatrix* const> parts, QMatrix* out, Buffer* storage) const {
  if (parts.empty()) return false;
  const QMatrix& first = *parts[0];
  const TypePlan* tp = plan_.find(first.type);
  if (!tp) return in_.fused_weight(parts, out, storage);
  const size_t bytes = fused_packed_bytes(parts, tp->packed_rows);
  if (bytes == 0) return false;
  *storage = alloc(bytes);
  *out = pack_fused(parts, tp->packed_rows, static_cast<uint8_t*>(storage->data()));
  return true;
}

bool PlannedCpuBackend::weight_prepared(const QMatrix& m) const {
  const TypePlan* tp = plan_.find(m.type);
  if (!tp) return in_.weight_prepared(m);
  return m.packed && tp->packed_rows != 0 && m.packed_rows == tp->packed_rows && !tp->needs_source;
}

bool PlannedCpuBackend::prepared_runs(const QMatrix& m, int64_t n) const {
  const TypePlan* tp = plan_.find(m.type);
  if (!tp) return in_.prepared_runs(m, n);
  return m.packed && m.packed_rows == tp->packed_rows && path_packed_rows(tp->path[(size_t)plan_.bucket_of(n)]) != 0;
}

void PlannedCpuBackend::matmul(MatmulContext& ctx, const QMatrix& w, const float* x, int64_t n, float* y,
                               int64_t ldy) const {
  const TypePlan* tp = plan_.find(w.type);
  if (!tp) return in_.matmul(ctx, w, x, n, y, ldy);
  matmul_on(ctx, tp->path[(size_t)plan_.bucket_of(n)], w, x, n, y, ldy);
}

MatmulPath PlannedCpuBackend::matmul_path(const QMatrix& w) const {
  const TypePlan* tp = plan_.find(w.type);
  if (!tp) return in_.matmul_path(w);
  std::string k = "planned:";
  for (int b = 0; b < kPlanBuckets; ++b)
    k += std::string(b ? ", n" : " n") + std::to_string(plan_.bucket_tokens(b)) + " " + kernel_path_name(tp->path[(size_t)b]);
  bool simd = true;
  for (KernelPath p : tp->path) simd = simd && p != KernelPath::kScalar;
  return {k, simd};
}

}  // namespace dspark::kernels
