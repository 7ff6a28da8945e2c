// Attention of one query position over an f16 K/V cache (MQA/GQA: n_q query heads share one
// K/V head), with llama.cpp's CPU numerics (non-flash path): Q is rounded to f16 before the K dot,
// softmax in f32 with the max subtracted, probabilities rounded to f16 before the V product.
// Scalar reference in ref/attention_ref.cpp; AVX2 / AVX-512 versions in cpu/attention_*.cpp.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace dspark::kernels {

// K/V rows of one head in a cache laid out as slots; position pos lives in slot pos % capacity
// (capacity >= any position for linear caches). Row r starts at k + r * stride (f16 elements).
// `extra`: keys read after the call's contiguous range, in this order, by cache position (a token
// tree's verify: a row sees the committed prefix, then its ancestors in the window; model::Model).
struct KvView {
  const uint16_t* k = nullptr;  // [capacity, stride] f16, already offset to the head
  const uint16_t* v = nullptr;  // [capacity, stride] f16, already offset to the head
  int64_t capacity = 0;
  int64_t stride = 0;
  const int64_t* extra = nullptr;  // [n_extra] cache positions of the keys after the range
  int64_t n_extra = 0;
};

inline constexpr int kMaxAttnHeads = 16;   // query heads per K/V head
inline constexpr int64_t kMaxHeadDim = 512;

// q: [n_q, head_dim] f32 (already scaled); keys/values at positions [first_pos, first_pos + n_keys),
// then at kv.extra[0 .. kv.n_extra); scores: scratch [n_q, n_keys + kv.n_extra] f32; out: [n_q, head_dim] f32.
void attention_f16kv(Isa isa, const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                     int64_t n_keys, float* scores, float* out);

void attention_f16kv_ref(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                         int64_t n_keys, float* scores, float* out);

// Several query rows of one sequence against the same K/V head (a prefill chunk, a verify window):
// row r's n_q query heads at q + r * q_stride ([n_q, head_dim] f32), its keys n_keys[r] contiguous
// positions from first_pos[r] (no extra keys), its output at out + r * out_stride.
struct AttnRows {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  const int64_t* first_pos = nullptr;  // [n_rows]
  const int64_t* n_keys = nullptr;     // [n_rows], each >= 1
  int n_rows = 0;
};

// Every row's result is attention_f16kv's for that row, bit for bit. On AVX-512 with head_dim a
// multiple of 16 and kRowsMin rows or more, the keys of all rows are converted to f32 once and laid
// out transposed (16 keys in the lanes of a vector), so a block of 16 scores is summed in its lanes
// with no horizontal reduction: the same products and additions in the same order as the one-row
// kernel (its 16 lane chains, then its reduction tree), each K/V row converted once for all rows.
// Other ISAs run a call per row. scores: scratch [n_q, max n_keys] f32.
// Fewer rows than kRowsMin (measured: 5 rows at 512 keys no faster, 8 rows 1.07x, 64 rows 1.23x,
// BM_AttentionRows, Intel Xeon family 6 model 207) or a key range of more than kRowsMaxKeyFloats f32
// once converted (16 MB of scratch per thread for the keys, as much again for the values of 16 rows or
// more) take a call per row.
inline constexpr int kRowsMin = 8;
inline constexpr int64_t kRowsMaxKeyFloats = int64_t{4} << 20;
void attention_f16kv_rows(Isa isa, const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores);

// One query row's attention (decode) split over n_parts threads, for caches long enough that one
// thread streaming a K/V head alone is the bottleneck: part p computes the scores of its share of the
// keys (blocks of 16), then their exp and per-chunk sums, then every column chunk of its share of the
// output over all keys. The caller runs phase 0 for every part, then phase 1, then phase 2, with a
// join between phases; the output is attention_f16kv's, bit for bit (the same scores, the same
// maximum, the same chunk sums added in the same order, the same value chains per column).
// AVX2 / AVX-512 with head_dim a multiple of 16 (attention_split_supported).
struct AttnSplit {
  const float* q = nullptr;  // [n_q, head_dim] f32, already scaled
  int n_q = 0;
  int64_t head_dim = 0;
  KvView kv;                 // no extra keys
  int64_t first_pos = 0, n_keys = 0;
  int n_parts = 0;
  float* scores = nullptr;      // [n_q, n_keys] shared by the parts
  float* part_max = nullptr;    // [n_parts, n_q]
  float* chunk_sums = nullptr;  // [n_q, n_keys / 8 + 1]
  float* out = nullptr;         // [n_q, head_dim]
  // Phase 2: part p computes output columns [cols[p], cols[p + 1]) (multiples of 16, a part may have
  // none); nullptr: head_dim shared out evenly in 16-column chunks.
  const int64_t* cols = nullptr;  // [n_parts + 1]
};
bool attention_split_supported(Isa isa, int64_t head_dim);
// p: the part's own scratch [n_q, n_keys] f32 (phase 2: the probabilities it sums with).
void attention_f16kv_split(Isa isa, const AttnSplit& s, int phase, int part, float* p);

namespace cpu {
void attention_f16kv_split_avx2(const AttnSplit& s, int phase, int part, float* p);
void attention_f16kv_split_avx512(const AttnSplit& s, int phase, int part, float* p);
void attention_f16kv_avx2(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                          int64_t n_keys, float* scores, float* out);
void attention_f16kv_avx512(const float* q, int n_q, int64_t head_dim, const KvView& kv, int64_t first_pos,
                            int64_t n_keys, float* scores, float* out);
void attention_f16kv_rows_avx512(const AttnRows& rows, int n_q, int64_t head_dim, const KvView& kv, float* scores);
// For the tests: the W horizontal sums of x ([W][W] f32, W = 8 / 16) by the kernel's block reduction
// (block) and one at a time (single); the kernels rely on the two being equal bit for bit.
void attention_reduce_w_avx2(const float* x, float* block, float* single);
void attention_reduce_w_avx512(const float* x, float* block, float* single);
}  // namespace cpu

}  // namespace dspark::kernels
