// Tensor element types (GGUF / ggml type ids) and their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dspark {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

struct DTypeInfo {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  size_t block_bytes;   // bytes per block
  bool supported;       // weights of this type can be used by our kernels
};

// nullptr for ids that are unknown or removed layouts.
const DTypeInfo* dtype_info(uint32_t id);
inline const DTypeInfo& dtype_info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
const char* dtype_name(DType t);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  return (size_t)(n / info.block_elems) * info.block_bytes;
}

}  // namespace dspark
