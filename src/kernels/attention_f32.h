// Attention of a group of f32 queries over f32 keys/values (the DSpark drafter's: its context
// cache plus the block's own rows, no mask, no scaling: the queries arrive normalised).
//
// attention_f32_ref is the oracle: one query at a time, keys in order, each dot product summed
// left to right. attention_f32 gives every key row to all the group's queries while it is loaded
// and sums each dot product in 16 f32 lanes (then a fixed tree), so it differs from the reference
// by the rounding of the dot products only; softmax and the value sums run in the reference's
// order (values: per output element, keys in order). With isa kAvx2 / kAvx512 and a head_dim that
// is a multiple of the vector width, the SIMD versions (cpu/attention_f32_impl.h) run instead:
// W keys reduced together and a polynomial exp.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace dspark::kernels {

// n rows of keys and values; row r at k + r * stride and v + r * stride (f32 elements).
struct F32Rows {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t n = 0;
  int64_t stride = 0;
};

// q[j]: query row j ([head_dim] f32), out[j]: its output row; keys are the rows of segs[0], then
// segs[1], ... (n_keys = their sum, >= 1). scores: scratch [n_q, n_keys] f32.
void attention_f32(Isa isa, const float* const* q, float* const* out, int64_t n_q, int64_t head_dim,
                   const F32Rows* segs, int n_segs, float* scores);
void attention_f32_ref(const float* const* q, float* const* out, int64_t n_q, int64_t head_dim, const F32Rows* segs,
                       int n_segs, float* scores);

namespace cpu {
void attention_f32_avx2(const float* const* q, float* const* out, int64_t n_q, int64_t head_dim, const F32Rows* segs,
                        int n_segs, float* scores);
void attention_f32_avx512(const float* const* q, float* const* out, int64_t n_q, int64_t head_dim,
                          const F32Rows* segs, int n_segs, float* scores);
}  // namespace cpu

}  // namespace dspark::kernels
