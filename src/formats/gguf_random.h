// Random-weight copies of a GGUF model, for speed and agreement tests where the real weights cannot
// go (a GPU machine that nothing can be fetched onto; issue #41): the same metadata (architecture,
// hyperparameters, tokenizer) and the same tensors (names, shapes, types, so the same kernels and the
// same bytes per token), with random values of a modest scale in place of the weights.
//
// A skeleton is such a model without any tensor data: its tensor table moved into three metadata
// arrays (kSkeleton*), a few MB where the model has 100-300 MB (mostly the tokenizer), so it travels
// where the model cannot. random_like() takes a model or a skeleton and gives the same bytes for both
// (same seed).
//
// Values: quantized blocks hold random codes, and their f16 scales are set so that weights come out
// at a standard deviation of about kRandomWeightStd (offset to zero mean where the type has a minimum);
// F32 / F16 / BF16 matrices draw N(0, kRandomWeightStd^2); 1-D F32 tensors (norm weights) 1 + N(0, 0.1^2).
// Types without a fill (Q2_K, Q3_K, activation-only types) are an error naming the tensor.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace dspark::formats {

inline constexpr std::string_view kSkeletonNames = "dspark.skeleton.tensor_names";    // string[n]
inline constexpr std::string_view kSkeletonTypes = "dspark.skeleton.tensor_types";    // u32[n], ggml type ids
inline constexpr std::string_view kSkeletonShapes = "dspark.skeleton.tensor_shapes";  // i64[4 n], ne[0..3], -1 past n_dims
inline constexpr float kRandomWeightStd = 0.02f;

bool is_skeleton(const GgufFile& f);
// f's metadata and tensor table, no tensor data (f may itself be a skeleton).
Result<GgufWriter> skeleton_of(const GgufFile& f);
// f's metadata and tensors with random values drawn from `seed` (f a model or a skeleton).
Result<GgufWriter> random_like(const GgufFile& f, uint64_t seed);

}  // namespace dspark::formats
