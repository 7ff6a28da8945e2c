// safetensors reader and writer (https://github.com/huggingface/safetensors, format section).
//
// Layout: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON, then the data region. The JSON is
// an object mapping tensor name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// plus an optional "__metadata__" object of string -> string. Offsets are relative to the first
// byte after the header.
//
// SafetensorsFile::open() maps a file read-only and validates it; parse() does the same on a
// caller-owned buffer without copying it (the fuzz entry point). Every failure is a Status whose
// message starts with the file name and names the byte offset (header-level problems) or the
// tensor / metadata key. Nothing here aborts, reads out of bounds or sizes an allocation from an
// unchecked header value: the header length is bounded by the file size and kStMaxHeaderBytes
// before the JSON is parsed, and every tensor is checked before it is exposed.
//
// Validation (a superset of the reference implementation's, except that holes are accepted):
//   - N <= file size - 8 and N <= kStMaxHeaderBytes; the header is valid JSON (strings valid
//     UTF-8), nests at most kStMaxJsonDepth levels, and has no duplicate key in any object;
//   - the top level is an object; "__metadata__" (optional, may be null) is an object whose
//     values are all strings; every other entry is an object with "dtype" (one of StDType's
//     names), "shape" (array of integers >= 0; [] is a scalar of one element; the element count
//     and byte size must not overflow) and "data_offsets" ([begin, end] integers, begin <= end,
//     end <= data region size, end - begin == element count * dtype size). Unknown extra fields
//     of a tensor entry are ignored, as the reference implementation does;
//   - non-empty tensors do not overlap. Unused bytes between or after tensors (holes) are
//     accepted without a warning (the reference implementation rejects them).
//
// Tensor data pointers are not aligned in general (N need not be a multiple of 8 in foreign
// files, and tensors are packed); read them with memcpy or read_f32().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dspark::formats {

enum class StDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kU32 };
inline constexpr int kStDTypeCount = 11;

// Bytes per element: 8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 4.
size_t st_dtype_size(StDType t);
// The header spelling: "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U32"
// (U32: MLX packed quantized weights, docs/QUANT-FORMAT.md);
// "invalid" for a value outside the enum.
const char* st_dtype_name(StDType t);
// Inverse of st_dtype_name (exact, case-sensitive); false for any other string.
bool st_dtype_from_name(std::string_view name, StDType& out);

inline constexpr uint64_t kStMaxHeaderBytes = 100'000'000;  // the reference MAX_HEADER_SIZE
inline constexpr int kStMaxJsonDepth = 64;
inline constexpr const char* kStMetadataKey = "__metadata__";

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first; empty = scalar
  uint64_t begin = 0;          // offset in the data region (first byte after the header)
  uint64_t n_bytes = 0;        // == n_elements * st_dtype_size(dtype)
  int64_t n_elements = 0;      // product of shape (1 for a scalar, 0 if any dimension is 0)
};

// "[4, 8]"; "[]" for a scalar.
std::string st_shape_string(std::span<const int64_t> shape);

// Converts an F32, F16 or BF16 tensor's bytes (`info.n_bytes` at `data`, any alignment) to f32,
// after checking that its shape equals `expected_shape` exactly. `file` names the source in
// errors: "<file>: tensor 'fc.weight' has shape [4, 8], expected [4, 16]",
// "<file>: tensor 'x' has dtype I32, expected F32, F16 or BF16".
Result<std::vector<float>> st_read_f32(const StTensorInfo& info, const uint8_t* data,
                                       std::span<const int64_t> expected_shape, const std::string& file);

class MappedFile;

class SafetensorsFile {
 public:
  // Maps `path` read-only and parses it. The mapping lives as long as the returned object.
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses `size` bytes at `data` (not copied; must outlive the result). `name` is used in errors.
  static Result<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return name_; }
  size_t file_size() const { return size_; }
  size_t header_bytes() const { return data_start_ - 8; }  // N
  size_t data_offset() const { return data_start_; }       // 8 + N: start of the data region

  // All tensors, sorted by name (byte-wise). Pointers into this vector stay valid for the life of
  // the object, including across moves.
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }
  const StTensorInfo* find(std::string_view name) const;  // nullptr if absent
  // First byte of a tensor's data (info.n_bytes bytes, validated to lie inside the file). `info`
  // must come from this file.
  const uint8_t* data(const StTensorInfo& info) const { return data_ + data_start_ + info.begin; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // st_read_f32 on tensor `name` of this file; a missing tensor is an error naming it.
  Result<std::vector<float>> read_f32(std::string_view name, std::span<const int64_t> expected_shape) const;

 private:
  friend class StParser;
  SafetensorsFile() = default;

  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 8;
  std::unique_ptr<MappedFile> mapping_;  // set by open(); null for parse()
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face model directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}, "metadata": {...}}).
// If both exist, the single file wins (as in transformers). For an index, every mapped file must be
// a plain file name in the directory (no '/' or '..') that exists and parses, every mapped tensor
// must be in the shard it is mapped to, and no tensor name may appear in two shards. Tensors a
// shard holds beyond its weight_map entries are exposed too. Errors name the directory, the file
// and the tensor ("drafter/: missing model.safetensors and model.safetensors.index.json").
class SafetensorsModel {
 public:
  static Result<SafetensorsModel> open_dir(const std::string& dir);

  SafetensorsModel(SafetensorsModel&&) noexcept;
  SafetensorsModel& operator=(SafetensorsModel&&) noexcept;
  SafetensorsModel(const SafetensorsModel&) = delete;
  SafetensorsModel& operator=(const SafetensorsModel&) = delete;
  ~SafetensorsModel();

  const std::string& dir() const { return dir_; }  // as given, with a trailing '/'
  const std::vector<SafetensorsFile>& files() const { return files_; }
  size_t n_tensors() const { return index_.size(); }

  const StTensorInfo* find(std::string_view name) const;  // nullptr if absent
  // The file holding a tensor of this model; nullptr for a foreign info / unknown name.
  const SafetensorsFile* file_of(const StTensorInfo& info) const;
  const uint8_t* data(std::string_view name) const;     // nullptr if absent
  const uint8_t* data(const StTensorInfo& info) const;  // nullptr if `info` is not from this model
  std::vector<std::string> tensor_names() const;        // sorted

  // F32/F16/BF16 -> f32 with an exact shape check; errors name the shard file and the tensor
  // ("drafter/model.safetensors: tensor 'fc.weight' has shape [4, 8], expected [4, 16]"), or the
  // directory for a missing tensor.
  Result<std::vector<float>> read_f32(std::string_view name, std::span<const int64_t> expected_shape) const;

 private:
  SafetensorsModel() = default;
  struct Loc {
    const StTensorInfo* info;
    size_t file;
  };
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Loc, std::less<>> index_;
};

// One tensor to write: `bytes` must hold exactly prod(shape) * st_dtype_size(dtype) bytes.
struct StWriteTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a safetensors file: header JSON with "__metadata__" first (when non-empty) and the
// tensors in the given order, padded with spaces so the data region starts at a multiple of 8
// (as the reference implementation does); data packed in the given order without gaps.
// Rejects (naming the tensor) empty, duplicate or "__metadata__" names, names or metadata that are
// not valid UTF-8, negative dimensions, an unknown dtype and a byte count that does not match the
// shape. Writes a temporary file next to `path` and renames it over `path` only once everything
// is written, so an error never leaves partial output.
Status write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The bytes write_safetensors would write (same checks; `name` is used in errors).
Result<std::vector<uint8_t>> build_safetensors(const std::vector<StWriteTensor>& tensors,
                                               const std::map<std::string, std::string>& metadata = {},
                                               const std::string& name = "safetensors");

}  // namespace dspark::formats
