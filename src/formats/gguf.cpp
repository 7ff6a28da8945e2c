// GGUF parsing and validation (byte layout: docs/GGUF.md; rules 1-10 listed in gguf.h). Getters live in
// gguf_kv.cpp.
#include "formats/gguf.h"
#include "formats/mapped_file.h"


#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

namespace dspark::formats {

static_assert(std::endian::native == std::endian::little, "GGUF reader assumes a little-endian host");


namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kMinHeaderBytes = 24;   // magic + version + two u64 counts
constexpr size_t kMinKvBytes = 14;       // key length (8) + 1 key byte + type (4) + 1 value byte
constexpr size_t kMinTensorInfoBytes = 24;

// Bounds-checked little-endian reader over [data, data + size).
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  bool skip(uint64_t n) {
    if (n > remaining()) return false;
    pos_ += static_cast<size_t>(n);
    return true;
  }
  template <class T>
  bool read(T& out) {
    if (sizeof(T) > remaining()) return false;
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};


}  // namespace

// Builds a GgufFile from bytes; each method returns the first violation found.
class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), cur_(f.data_, f.size_) {}

  Status run() {
    DSPARK_RETURN_IF_ERROR(parse_header());
    DSPARK_RETURN_IF_ERROR(parse_kvs());
    DSPARK_RETURN_IF_ERROR(parse_alignment());
    DSPARK_RETURN_IF_ERROR(parse_tensor_infos());
    return check_tensor_data();
  }

 private:
  Status fail(size_t offset, const std::string& what) const {
    return Status::error(f_.name_ + ": offset " + std::to_string(offset) + ": " + what);
  }
  Status truncated(size_t offset, const std::string& what) const {
    return fail(offset, "file truncated reading " + what + " (file is " + std::to_string(f_.size_) + " bytes)");
  }

  Status parse_header() {
    uint32_t magic = 0;
    if (!cur_.read(magic)) return truncated(0, "magic");
    if (magic != kMagic) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "bad magic 0x%08x (expected 'GGUF' = 0x%08x)", magic, kMagic);
      return fail(0, buf);
    }
    if (f_.size_ < kMinHeaderBytes) {
      return fail(0, "file too small for a GGUF header (" + std::to_string(f_.size_) + " < " +
                         std::to_string(kMinHeaderBytes) + " bytes)");
    }
    uint32_t version = 0;
    cur_.read(version);
    if ((version & 0xFFFFu) == 0) {
      return fail(4, "version field 0x" + hex32(version) +
                         " looks byte-swapped: big-endian GGUF files are not supported");
    }
    if (version == 1) return fail(4, "GGUF version 1 is obsolete and not supported");
    if (version < 2 || version > 3) return fail(4, "GGUF version " + std::to_string(version) + " not supported (2 or 3)");
    f_.version_ = version;

    uint64_t n_tensors = 0, n_kvs = 0;
    cur_.read(n_tensors);
    cur_.read(n_kvs);
    const uint64_t kMaxSigned = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (n_tensors > kMaxSigned) return fail(8, "tensor count is negative (" + std::to_string(int64_t(n_tensors)) + ")");
    if (n_kvs > kMaxSigned) return fail(16, "metadata kv count is negative (" + std::to_string(int64_t(n_kvs)) + ")");
    const size_t rem = cur_.remaining();
    if (n_kvs > rem / kMinKvBytes) {
      return fail(16, "metadata kv count " + std::to_string(n_kvs) + " cannot fit in the remaining " +
                          std::to_string(rem) + " bytes");
    }
    const size_t rem_after_kvs = rem - static_cast<size_t>(n_kvs) * kMinKvBytes;
    if (n_tensors > rem_after_kvs / kMinTensorInfoBytes) {
      return fail(8, "tensor count " + std::to_string(n_tensors) + " cannot fit in the remaining " +
                         std::to_string(rem) + " bytes");
    }
    n_tensors_ = n_tensors;
    n_kvs_ = n_kvs;
    return Status::ok();
  }

  static std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }

  // Reads a gguf string (u64 length + bytes); `what` describes it for errors.
  Status read_string(std::string_view& out, uint64_t max_bytes, const std::string& what) {
    const size_t at = cur_.pos();
    uint64_t len = 0;
    if (!cur_.read(len)) return truncated(at, what + " length");
    if (len > max_bytes) {
      return fail(at, what + " length " + std::to_string(len) + " exceeds the limit of " + std::to_string(max_bytes));
    }
    if (len > cur_.remaining()) {
      return fail(at, what + " length " + std::to_string(len) + " exceeds the remaining " +
                          std::to_string(cur_.remaining()) + " bytes");
    }
    out = std::string_view(reinterpret_cast<const char*>(cur_.here()), static_cast<size_t>(len));
    cur_.skip(len);
    return Status::ok();
  }

  Status read_type(GgufType& out, const std::string& what) {
    const size_t at = cur_.pos();
    uint32_t id = 0;
    if (!cur_.read(id)) return truncated(at, what);
    if (id >= kGgufTypeCount) return fail(at, what + " " + std::to_string(id) + " is not a valid GGUF value type");
    out = static_cast<GgufType>(id);
    return Status::ok();
  }

  Status parse_kvs() {
    f_.kvs_.reserve(static_cast<size_t>(n_kvs_));  // bounded by the remaining bytes in parse_header
    f_.kv_index_.reserve(static_cast<size_t>(n_kvs_));
    for (uint64_t i = 0; i < n_kvs_; ++i) {
      GgufKV kv;
      kv.offset = cur_.pos();
      DSPARK_RETURN_IF_ERROR(read_string(kv.key, kGgufMaxKeyBytes, "key of metadata pair " + std::to_string(i)));
      if (kv.key.empty()) return fail(kv.offset, "metadata pair " + std::to_string(i) + " has an empty key");
      const std::string ctx = "key " + quote_name(kv.key);
      if (f_.kv_index_.count(kv.key) != 0) return fail(kv.offset, ctx + ": duplicate key");
      DSPARK_RETURN_IF_ERROR(read_type(kv.type, ctx + ": value type"));
      DSPARK_RETURN_IF_ERROR(parse_value(kv, ctx));
      f_.kv_index_.emplace(kv.key, f_.kvs_.size());
      f_.kvs_.push_back(std::move(kv));
    }
    return Status::ok();
  }

  Status parse_value(GgufKV& kv, const std::string& ctx) {
    const size_t at = cur_.pos();
    if (kv.type == GgufType::STRING) return read_string(kv.str, kGgufMaxStringBytes, ctx + ": string value");
    if (kv.type != GgufType::ARRAY) {
      const size_t n = gguf_type_size(kv.type);
      if (n > cur_.remaining()) return truncated(at, ctx + ": value");
      std::memcpy(&kv.raw, cur_.here(), n);  // little-endian: low bytes first, rest stay zero
      cur_.skip(n);
      return Status::ok();
    }
    DSPARK_RETURN_IF_ERROR(read_type(kv.elem_type, ctx + ": array element type"));
    if (kv.elem_type == GgufType::ARRAY) return fail(at, ctx + ": nested arrays are not supported");
    const size_t count_at = cur_.pos();
    if (!cur_.read(kv.n_elems)) return truncated(count_at, ctx + ": array count");
    if (kv.n_elems > kGgufMaxArrayCount) {
      return fail(count_at, ctx + ": array count " + std::to_string(kv.n_elems) + " exceeds the limit of " +
                                std::to_string(kGgufMaxArrayCount));
    }
    const size_t elem_min = kv.elem_type == GgufType::STRING ? 8 : gguf_type_size(kv.elem_type);
    if (kv.n_elems > cur_.remaining() / elem_min) {
      return fail(count_at, ctx + ": array of " + std::to_string(kv.n_elems) + " " + gguf_type_name(kv.elem_type) +
                                " cannot fit in the remaining " + std::to_string(cur_.remaining()) + " bytes");
    }
    if (kv.elem_type != GgufType::STRING) {
      kv.elems = cur_.here();
      cur_.skip(kv.n_elems * elem_min);
      return Status::ok();
    }
    kv.strs.resize(static_cast<size_t>(kv.n_elems));  // n_elems * 8 <= remaining bytes
    for (uint64_t j = 0; j < kv.n_elems; ++j) {
      DSPARK_RETURN_IF_ERROR(read_string(kv.strs[j], kGgufMaxStringBytes, ctx + ": element " + std::to_string(j)));
    }
    return Status::ok();
  }

  Status parse_alignment() {
    const GgufKV* kv = f_.find("general.alignment");
    if (kv == nullptr) return Status::ok();
    const std::string ctx = "key 'general.alignment'";
    if (kv->type != GgufType::UINT32) {
      return fail(kv->offset, ctx + ": type " + gguf_type_name(kv->type) + ", expected u32");
    }
    const uint32_t a = static_cast<uint32_t>(kv->raw);
    if (a == 0 || (a & (a - 1)) != 0) {
      return fail(kv->offset, ctx + ": " + std::to_string(a) + " is not a non-zero power of two");
    }
    f_.alignment_ = a;
    return Status::ok();
  }

  Status parse_tensor_infos() {
    f_.tensors_.reserve(static_cast<size_t>(n_tensors_));  // bounded in parse_header
    f_.tensor_index_.reserve(static_cast<size_t>(n_tensors_));
    tensor_offsets_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const size_t at = cur_.pos();
      std::string_view name;
      DSPARK_RETURN_IF_ERROR(read_string(name, kGgufMaxStringBytes, "name of tensor " + std::to_string(i)));
      if (name.empty()) return fail(at, "tensor " + std::to_string(i) + " has an empty name");
      const std::string ctx = "tensor " + quote_name(name);
      if (name.size() > kGgufMaxNameBytes) {
        return fail(at, ctx + ": name is " + std::to_string(name.size()) + " bytes, the limit is " +
                            std::to_string(kGgufMaxNameBytes));
      }
      if (f_.tensor_index_.count(name) != 0) return fail(at, ctx + ": duplicate tensor name");
      GgufTensorInfo t;
      t.name = std::string(name);
      DSPARK_RETURN_IF_ERROR(parse_shape(t, ctx));
      DSPARK_RETURN_IF_ERROR(parse_type_and_offset(t, ctx));
      f_.tensor_index_.emplace(name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(t));
      tensor_offsets_.push_back(at);
    }
    // data_start = align(position after the last tensor info); may exceed the file size only if
    // no tensor has data there (checked per tensor below).
    const uint64_t pos = cur_.pos();
    const uint64_t a = f_.alignment_;
    f_.data_start_ = static_cast<size_t>(pos + (a - pos % a) % a);
    return Status::ok();
  }

  Status parse_shape(GgufTensorInfo& t, const std::string& ctx) {
    const size_t at = cur_.pos();
    uint32_t n_dims = 0;
    if (!cur_.read(n_dims)) return truncated(at, ctx + ": n_dims");
    if (n_dims > 4) return fail(at, ctx + ": n_dims " + std::to_string(n_dims) + " exceeds 4");
    t.n_dims = static_cast<int>(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t dim_at = cur_.pos();
      int64_t ne = 0;
      if (!cur_.read(ne)) return truncated(dim_at, ctx + ": dimension " + std::to_string(d));
      if (ne < 0) return fail(dim_at, ctx + ": dimension " + std::to_string(d) + " is negative (" + std::to_string(ne) + ")");
      if (ne != 0 && n_elements > std::numeric_limits<int64_t>::max() / ne) {
        return fail(dim_at, ctx + ": element count overflows int64");
      }
      n_elements *= ne;
      t.ne[d] = ne;
    }
    t.n_elements = n_elements;
    return Status::ok();
  }

  Status parse_type_and_offset(GgufTensorInfo& t, const std::string& ctx) {
    const size_t type_at = cur_.pos();
    uint32_t type_id = 0;
    if (!cur_.read(type_id)) return truncated(type_at, ctx + ": type");
    const DTypeInfo* info = dtype_info(type_id);
    if (info == nullptr || !info->supported) {
      return fail(type_at, ctx + ": type " + std::to_string(type_id) + " (" + (info ? info->name : "unknown") +
                               ") not supported");
    }
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % info->block_elems != 0) {
      return fail(type_at, ctx + ": ne0 " + std::to_string(t.ne[0]) + " is not a multiple of the " + info->name +
                               " block size " + std::to_string(info->block_elems));
    }
    const uint64_t n_blocks = static_cast<uint64_t>(t.n_elements / info->block_elems);
    if (n_blocks > std::numeric_limits<size_t>::max() / info->block_bytes) {
      return fail(type_at, ctx + ": byte size overflows size_t");
    }
    t.n_bytes = static_cast<size_t>(n_blocks) * info->block_bytes;
    const size_t off_at = cur_.pos();
    if (!cur_.read(t.offset)) return truncated(off_at, ctx + ": data offset");
    if (t.offset % f_.alignment_ != 0) {
      return fail(off_at, ctx + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                              std::to_string(f_.alignment_));
    }
    return Status::ok();
  }

  // Rule 10 (+): data_start + offset + n_bytes <= file_size, and no two tensors share bytes.
  // Offsets need not be packed in declaration order (ggml's writer packs them; we do not rely on it).
  Status check_tensor_data() {
    const uint64_t size = f_.size_;
    const uint64_t start = f_.data_start_;
    struct Span { uint64_t begin, end; size_t index; };
    std::vector<Span> spans;
    spans.reserve(f_.tensors_.size());
    for (size_t i = 0; i < f_.tensors_.size(); ++i) {
      const GgufTensorInfo& t = f_.tensors_[i];
      const uint64_t room = start <= size ? size - start : 0;
      if (start > size || t.offset > room || t.n_bytes > room - t.offset) {
        return fail(tensor_offsets_[i], "tensor " + quote_name(t.name) + ": data [" + std::to_string(t.offset) + ", +" +
                                            std::to_string(t.n_bytes) + ") at file offset " +
                                            std::to_string(start) + " + " + std::to_string(t.offset) +
                                            " extends past the end of the file (" + std::to_string(size) + " bytes)");
      }
      if (t.n_bytes > 0) spans.push_back({t.offset, t.offset + t.n_bytes, i});
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (size_t k = 1; k < spans.size(); ++k) {
      if (spans[k].begin < spans[k - 1].end) {
        const GgufTensorInfo& a = f_.tensors_[spans[k - 1].index];
        const GgufTensorInfo& b = f_.tensors_[spans[k].index];
        return fail(tensor_offsets_[spans[k].index],
                    "tensor " + quote_name(b.name) + ": data at offset " + std::to_string(b.offset) +
                        " overlaps tensor " + quote_name(a.name) + " [" + std::to_string(a.offset) + ", " +
                        std::to_string(a.offset + a.n_bytes) + ")");
      }
    }
    return Status::ok();
  }

  GgufFile& f_;
  Cursor cur_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kvs_ = 0;
  std::vector<size_t> tensor_offsets_;  // file offset of each tensor info, for errors
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

Result<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f;
  f.name_ = name;
  f.data_ = data;
  f.size_ = data != nullptr ? size : 0;
  GgufParser parser(f);
  Status st = parser.run();
  if (!st.is_ok()) return st;
  return f;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return mapping.status();
  const size_t size = (*mapping)->size();
  if (size < kMinHeaderBytes)
    return Status::error(path + ": offset 0: file too small for a GGUF header (" + std::to_string(size) + " < " +
                         std::to_string(kMinHeaderBytes) + " bytes)");
  Result<GgufFile> r = parse((*mapping)->data(), size, path);
  if (!r.is_ok()) return r;  // mapping released here
  r->mapping_ = std::move(mapping).value();
  return r;
}

const GgufKV* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace dspark::formats
