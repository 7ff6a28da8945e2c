#include "kernels/attention.h"

#include "core/status.h"

namespace dspark::kernels {

void attention_f16kv(Isa isa, const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                     int64_t n_keys, float* scores, float* out) {
  DSPARK_CHECK(n_q >= 1 && n_q <= kMaxAttnHeads && head_dim <= kMaxHeadDim && n_keys >= 0 && kv.n_extra >= 0 &&
               n_keys + kv.n_extra >= 1);
  // The SIMD versions work in 16-element (AVX-512) / 8-element (AVX2) column chunks.
  if (isa == Isa::kAvx512 && head_dim % 16 == 0)
    cpu::attention_f16kv_avx512(q, n_q, head_dim, kv, first_pos, n_keys, scores, out);
  else if (isa >= Isa::kAvx2 && head_dim % 8 == 0)
    cpu::attention_f16kv_avx2(q, n_q, head_dim, kv, first_pos, n_keys, scores, out);
  else
    attention_f16kv_ref(q, n_q, head_dim, kv, first_pos, n_keys, scores, out);
}

}  // namespace dspark::kernels
