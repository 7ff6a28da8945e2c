// GGUF v2/v3 reader (container layout: docs/GGUF.md).
//
// GgufFile::open() maps a file read-only, parses the header and validates it against rules 1-10
// below; GgufFile::parse() does the same on a caller-owned buffer without copying it.
// Every failure is a Status whose message names the file, the byte offset and the key or tensor.
// Nothing here aborts, reads out of bounds or sizes an allocation from an unchecked header value:
// every count is bounded by the bytes that remain in the file before anything is reserved.
//
// Validation rules (tests/unit/formats/test_gguf_validation.cpp has one test per rule; (+) = stricter than ggml):
//   1. at least 24 bytes; exact magic; version 2 or 3 (0, 1, > 3 and byte-swapped versions refused)
//   2. KV and tensor counts non-negative and bounded by the bytes left (+)
//   3. every read bounds-checked; string lengths and array counts bounded before anything is allocated
//   4. keys non-empty and unique; value and array element types valid; no array of arrays
//   5. general.alignment, when present, a u32 non-zero power of two
//   6. tensor names non-empty (+), at most 63 bytes, unique
//   7. at most 4 dims, none negative, element count without overflow
//   8. tensor type id known (+ and supported here; the error names tensor and type)
//   9. ne0 a multiple of the type's block size; byte size fits size_t
//  10. offsets aligned and packed; (+) data inside the file and no two tensors overlapping
//
// Metadata is kept zero-copy: keys, string values and numeric array payloads are views into the
// file bytes, valid as long as the GgufFile (or, for parse(), the caller's buffer) lives.
// Model-level checks (rule 11: architecture, required keys, shapes) belong to the model loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace dspark::formats {

// Metadata value type ids (ggml include/gguf.h).
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr size_t kGgufMaxNameBytes = 63;   // GGML_MAX_NAME (64) counts the terminator
inline constexpr uint64_t kGgufMaxArrayCount = uint64_t{1} << 30;
inline constexpr uint64_t kGgufMaxStringBytes = uint64_t{1} << 30;
inline constexpr uint64_t kGgufMaxKeyBytes = 65535;

// "u8", "i32", "f32", "bool", "string", "array", ...; "type N" is not representable, so unknown ids
// give "invalid".
const char* gguf_type_name(GgufType t);
// Encoded size of one scalar of this type; 0 for STRING and ARRAY (variable length).
size_t gguf_type_size(GgufType t);
inline bool gguf_type_is_integer(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

// One metadata key/value pair. Scalars keep their raw little-endian bits in `raw` (zero-extended;
// floats as their IEEE bits, bool as the stored byte). Arrays keep `n_elems` elements of
// `elem_type`: numeric ones as raw unaligned little-endian bytes at `elems`, string ones as views
// in `strs`. Use the typed getters of GgufFile rather than decoding these by hand.
struct GgufKV {
  std::string_view key;
  GgufType type = GgufType::UINT8;
  uint64_t offset = 0;  // byte offset of this pair (its key length) in the file
  uint64_t raw = 0;                    // scalar numeric / bool value bits
  std::string_view str;                // STRING value
  GgufType elem_type = GgufType::UINT8;  // ARRAY element type (never ARRAY)
  uint64_t n_elems = 0;                // ARRAY element count
  const uint8_t* elems = nullptr;      // ARRAY of numeric/bool elements: n_elems * size bytes
  std::vector<std::string_view> strs;  // ARRAY of STRING elements

  bool is_array() const { return type == GgufType::ARRAY; }
};

struct GgufTensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] contiguous; unused dims are 1
  DType type = DType::F32;
  uint64_t offset = 0;  // relative to the start of the data section, a multiple of alignment()
  size_t n_bytes = 0;
  int64_t n_elements = 0;
};

// Human-readable one-line dump of a pair, e.g. `general.architecture: string = "gemma3"` or
// `tokenizer.ggml.token_type: array<i32>[262144] = [3, 3, 3, 3, 3, 4, 3, 3, ...]`.
std::string describe_kv(const GgufKV& kv);

class MappedFile;

class GgufFile {
 public:
  // Maps `path` read-only and parses it. The mapping lives as long as the returned object.
  static Result<GgufFile> open(const std::string& path);
  // Parses `size` bytes at `data` (not copied; must outlive the result). `name` is used in errors.
  static Result<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  size_t data_offset() const { return data_start_; }  // start of the tensor data section
  const uint8_t* data() const { return data_; }
  // True for open() (a read-only file mapping whose clean pages may be dropped and re-read).
  bool mapped() const { return mapping_ != nullptr; }

  // ---- metadata ----
  const std::vector<GgufKV>& kvs() const { return kvs_; }
  const GgufKV* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. Errors name the file, the key and its offset: missing key, wrong type, value
  // out of range.
  Result<uint64_t> get_uint(std::string_view key) const;   // any integer type; negative -> error
  Result<int64_t> get_int(std::string_view key) const;     // any integer type; > INT64_MAX -> error
  Result<double> get_float(std::string_view key) const;    // f32 or f64
  Result<bool> get_bool(std::string_view key) const;       // bool; any non-zero byte is true (ggml)
  Result<std::string> get_string(std::string_view key) const;
  // Arrays. String arrays are copied; for zero-copy access use find(key)->strs.
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;  // f32 or f64 elements
  // Any integer element type, widened to int64; a u64 element > INT64_MAX is an error.
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // ---- tensors ----
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // First byte of a tensor's data (info.n_bytes bytes, validated to lie inside the file).
  const uint8_t* tensor_data(const GgufTensorInfo& info) const { return data_ + data_start_ + info.offset; }

 private:
  friend class GgufParser;
  GgufFile() = default;
  Status key_error(const GgufKV* kv, std::string_view key, const std::string& what) const;
  Result<const GgufKV*> require(std::string_view key) const;

  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> mapping_;  // set by open(); null for parse()
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  size_t data_start_ = 0;
  std::vector<GgufKV> kvs_;
  std::unordered_map<std::string_view, size_t> kv_index_;  // views into the file bytes
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views into the file bytes
};

}  // namespace dspark::formats
