#include "kernels/attention.h"

#include <algorithm>

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

void attention_f16kv_rows(Isa isa, const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores) {
  DSPARK_CHECK(rows.n_rows >= 0 && kv.n_extra == 0);
  if (isa == Isa::kAvx512 && head_dim % 16 == 0 && rows.n_rows >= kRowsMin) {
    DSPARK_CHECK(n_q >= 1 && n_q <= kMaxAttnHeads && head_dim <= kMaxHeadDim);
    int64_t lo = rows.first_pos[0], hi = lo;
    for (int r = 0; r < rows.n_rows; ++r) {
      DSPARK_CHECK(rows.n_keys[r] >= 1);
      lo = std::min(lo, rows.first_pos[r]);
      hi = std::max(hi, rows.first_pos[r] + rows.n_keys[r]);
    }
    if ((hi - lo) * head_dim <= kRowsMaxKeyFloats) {
      cpu::attention_f16kv_rows_avx512(rows, n_q, head_dim, kv, scores);
      return;
    }
  }
  for (int r = 0; r < rows.n_rows; ++r)
    attention_f16kv(isa, rows.q + r * rows.q_stride, n_q, head_dim, kv, rows.first_pos[r], rows.n_keys[r], scores,
                    rows.out + r * rows.out_stride);
}

bool attention_split_supported(Isa isa, int64_t head_dim) {
  return isa >= Isa::kAvx2 && head_dim % 16 == 0 && head_dim <= kMaxHeadDim;
}

void attention_f16kv_split(Isa isa, const AttnSplit& s, int phase, int part, float* p) {
  DSPARK_CHECK(attention_split_supported(isa, s.head_dim) && s.n_q >= 1 && s.n_q <= kMaxAttnHeads && s.n_keys >= 1 &&
               s.kv.n_extra == 0 && s.n_parts >= 1 && part >= 0 && part < s.n_parts && phase >= 0 && phase <= 2);
  if (isa == Isa::kAvx512) cpu::attention_f16kv_split_avx512(s, phase, part, p);
  else cpu::attention_f16kv_split_avx2(s, phase, part, p);
}

}  // namespace dspark::kernels
