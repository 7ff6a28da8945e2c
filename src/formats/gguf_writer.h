// GgufWriter: builds a GGUF v3 file in memory or on disk (test fixtures, quantize tools).
//
// Pairs and tensors are written in the order they are added. Tensor data is packed in that order,
// each tensor at the next multiple of the alignment after the previous one (ggml layout), with
// zero padding; nothing is written after the last tensor.
//
// The typed add_* calls always produce well-formed values. add_raw_kv / add_tensor_raw write
// arbitrary ids, payloads, shapes and offsets without checks, so tests can build invalid files;
// read any output back with GgufFile::parse to validate it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "formats/gguf.h"

namespace dspark::formats {

class GgufWriter {
 public:
  GgufWriter() = default;

  // Adds the u32 pair general.alignment (a non-zero power of two) and lays tensors out with it.
  void set_alignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  void add_u8(std::string_view key, uint8_t v);
  void add_i8(std::string_view key, int8_t v);
  void add_u16(std::string_view key, uint16_t v);
  void add_i16(std::string_view key, int16_t v);
  void add_u32(std::string_view key, uint32_t v);  // "general.alignment" also sets the layout alignment if valid
  void add_i32(std::string_view key, int32_t v);
  void add_u64(std::string_view key, uint64_t v);
  void add_i64(std::string_view key, int64_t v);
  void add_f32(std::string_view key, float v);
  void add_f64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);

  // Array of n numeric or bool elements of `elem_type` (not STRING/ARRAY), given as host
  // (little-endian) values of that type's width.
  void add_array(std::string_view key, GgufType elem_type, const void* elems, size_t n);
  void add_string_array(std::string_view key, std::span<const std::string> v);
  void add_u8_array(std::string_view key, std::span<const uint8_t> v) { add_array(key, GgufType::UINT8, v.data(), v.size()); }
  void add_i32_array(std::string_view key, std::span<const int32_t> v) { add_array(key, GgufType::INT32, v.data(), v.size()); }
  void add_u32_array(std::string_view key, std::span<const uint32_t> v) { add_array(key, GgufType::UINT32, v.data(), v.size()); }
  void add_i64_array(std::string_view key, std::span<const int64_t> v) { add_array(key, GgufType::INT64, v.data(), v.size()); }
  void add_f32_array(std::string_view key, std::span<const float> v) { add_array(key, GgufType::FLOAT32, v.data(), v.size()); }

  // Unchecked pair: key, value type id, then `payload` bytes verbatim.
  void add_raw_kv(std::string_view key, uint32_t type_id, std::vector<uint8_t> payload);

  // Checked tensor: ne has 1..4 dims (ne[0] contiguous), type supported, ne[0] a multiple of the
  // block size, n_bytes equal to the size implied by type and shape. Data is copied.
  Status add_tensor(std::string_view name, DType type, std::span<const int64_t> ne, const void* data, size_t n_bytes);
  // Unchecked tensor: any type id, dims (n_dims = ne.size()) and bytes; `offset` overrides the
  // packed data offset (the data is then written there; overlapping data is overwritten).
  void add_tensor_raw(std::string_view name, uint32_t type_id, std::vector<int64_t> ne, std::vector<uint8_t> data,
                      std::optional<uint64_t> offset = std::nullopt);

  size_t n_kvs() const { return kvs_.size(); }
  size_t n_tensors() const { return tensors_.size(); }

  // The whole file.
  std::vector<uint8_t> build() const;
  // Writes build() to `path`; errors name the path.
  Status write_file(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type_id;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;
  };
  void add_kv(std::string_view key, GgufType type, const void* value, size_t n);
  void add_string_kv(std::string_view key, std::string_view v);

  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::vector<uint8_t>> kvs_;  // each pair fully encoded
  std::vector<Tensor> tensors_;
};

}  // namespace dspark::formats
