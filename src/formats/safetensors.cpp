// safetensors parsing and validation (rules in safetensors.h) and the model-directory loader.
// The writer lives in safetensors_writer.cpp.
#include "formats/safetensors.h"
#include "formats/mapped_file.h"


#include <algorithm>
#include <bit>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <set>
#include <nlohmann/json.hpp>

#include "core/f16.h"

namespace dspark::formats {

static_assert(std::endian::native == std::endian::little, "safetensors reader assumes a little-endian host");


namespace {

using json = nlohmann::json;

constexpr size_t kLenBytes = 8;

struct DTypeRow {
  StDType t;
  const char* name;
  size_t size;
};
constexpr DTypeRow kDTypes[kStDTypeCount] = {
    {StDType::kF64, "F64", 8}, {StDType::kF32, "F32", 4}, {StDType::kF16, "F16", 2},
    {StDType::kBF16, "BF16", 2}, {StDType::kI64, "I64", 8}, {StDType::kI32, "I32", 4},
    {StDType::kI16, "I16", 2}, {StDType::kI8, "I8", 1}, {StDType::kU8, "U8", 1},
    {StDType::kBool, "BOOL", 1}, {StDType::kU32, "U32", 4},
};

// dtypes of the reference implementation this reader does not support (a clearer message than
// "unknown").
constexpr const char* kKnownUnsupported[] = {"U16", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                             "F4", "F6_E2M3", "F6_E3M2", "C64"};


// JSON type for messages.
const char* json_kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a non-integer number";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "discarded";
  }
  return "unknown";
}

// Thrown from the nlohmann parser callback (caught in parse_json).
struct JsonStructureError {
  std::string what;
};

// Parses [text, text + len) as JSON, rejecting duplicate object keys and nesting deeper than
// kStMaxJsonDepth. On failure returns false with `err` (and `err_byte`, 0-based, when known).
bool parse_json(const char* text, size_t len, json& out, std::string& err, size_t& err_byte, bool& have_byte) {
  have_byte = false;
  // nlohmann stops at a raw NUL and would accept anything after it; NUL is never valid JSON text.
  if (const void* nul = std::memchr(text, 0, len); nul != nullptr) {
    err = "raw NUL byte";
    err_byte = static_cast<size_t>(static_cast<const char*>(nul) - text);
    have_byte = true;
    return false;
  }
  std::vector<std::set<std::string>> keys;  // one set per open object
  int open = 0;                             // open objects + arrays
  auto cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) -> bool {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (++open > kStMaxJsonDepth) {
          throw JsonStructureError{"nests deeper than " + std::to_string(kStMaxJsonDepth) + " levels"};
        }
        if (ev == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        --open;
        keys.pop_back();
        break;
      case json::parse_event_t::array_end:
        --open;
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string()) {
          const std::string& k = parsed.get_ref<const std::string&>();
          if (!keys.back().insert(k).second) {
            throw JsonStructureError{"duplicate key " + quote_name(k) + (keys.size() == 1 ? "" : " in a nested object")};
          }
        }
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    out = json::parse(text, text + len, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    return true;
  } catch (const JsonStructureError& e) {
    err = e.what;
  } catch (const json::parse_error& e) {
    std::string w = e.what();
    const size_t p = w.find("] ");
    err = p == std::string::npos ? w : w.substr(p + 2);
    if (e.byte > 0) {
      err_byte = static_cast<size_t>(e.byte - 1);
      have_byte = true;
    }
  } catch (const std::bad_alloc&) {
    err = "out of memory";
  } catch (const std::exception& e) {
    err = e.what();
  }
  return false;
}

// Non-negative JSON integer that fits in uint64; false for anything else.
bool json_u64(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

std::string dir_prefix(const std::string& dir) {
  if (dir.empty()) return "./";
  return dir.back() == '/' ? dir : dir + "/";
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Reads a small text file whole (the shard index), bounded by `max_bytes`.
Status read_text_file(const std::string& path, size_t max_bytes, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::error(path + ": " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                         std::to_string(max_bytes));
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Status::error(path + ": read failed: " + (n == 0 ? std::string("unexpected end of file") : std::strerror(err)));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace

size_t st_dtype_size(StDType t) {
  for (const DTypeRow& r : kDTypes) {
    if (r.t == t) return r.size;
  }
  return 0;
}

const char* st_dtype_name(StDType t) {
  for (const DTypeRow& r : kDTypes) {
    if (r.t == t) return r.name;
  }
  return "invalid";
}

bool st_dtype_from_name(std::string_view name, StDType& out) {
  for (const DTypeRow& r : kDTypes) {
    if (name == r.name) {
      out = r.t;
      return true;
    }
  }
  return false;
}

std::string st_shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::vector<float>> st_read_f32(const StTensorInfo& info, const uint8_t* data,
                                       std::span<const int64_t> expected_shape, const std::string& file) {
  const std::string ctx = file + ": tensor " + quote_name(info.name);
  if (info.dtype != StDType::kF32 && info.dtype != StDType::kF16 && info.dtype != StDType::kBF16) {
    return Status::error(ctx + " has dtype " + st_dtype_name(info.dtype) + ", expected F32, F16 or BF16");
  }
  if (!std::equal(info.shape.begin(), info.shape.end(), expected_shape.begin(), expected_shape.end())) {
    return Status::error(ctx + " has shape " + st_shape_string(info.shape) + ", expected " +
                         st_shape_string(expected_shape));
  }
  const size_t n = static_cast<size_t>(info.n_elements);
  DSPARK_CHECK(info.n_bytes == n * st_dtype_size(info.dtype));
  std::vector<float> out(n);
  if (n == 0) return out;
  DSPARK_CHECK(data != nullptr);
  if (info.dtype == StDType::kF32) {
    std::memcpy(out.data(), data, n * 4);
  } else {
    const bool bf = info.dtype == StDType::kBF16;
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = bf ? bf16_to_fp32(h) : fp16_to_fp32(h);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

// Builds a SafetensorsFile from bytes; returns the first violation found.
class StParser {
 public:
  explicit StParser(SafetensorsFile& f) : f_(f) {}

  Status run() {
    DSPARK_RETURN_IF_ERROR(parse_length());
    json header;
    DSPARK_RETURN_IF_ERROR(parse_header_json(header));
    DSPARK_RETURN_IF_ERROR(parse_entries(header));
    return check_layout();
  }

 private:
  Status fail(size_t offset, const std::string& what) const {
    return Status::error(f_.name_ + ": offset " + std::to_string(offset) + ": " + what);
  }
  Status tensor_fail(const std::string& name, const std::string& what) const {
    return Status::error(f_.name_ + ": tensor " + quote_name(name) + ": " + what);
  }

  Status parse_length() {
    if (f_.data_ == nullptr || f_.size_ < kLenBytes) {
      return fail(0, "file truncated reading the 8-byte header length (file is " + std::to_string(f_.size_) +
                         " bytes)");
    }
    uint64_t n = 0;
    std::memcpy(&n, f_.data_, kLenBytes);
    const uint64_t avail = f_.size_ - kLenBytes;
    if (n > kStMaxHeaderBytes) {
      return fail(0, "header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kStMaxHeaderBytes) + " bytes");
    }
    if (n > avail) {
      return fail(0, "header length " + std::to_string(n) + " exceeds the " + std::to_string(avail) +
                         " bytes after the length field (file truncated?)");
    }
    if (n < 2) return fail(0, "header length " + std::to_string(n) + " is too small for a JSON object");
    f_.data_start_ = kLenBytes + static_cast<size_t>(n);
    return Status::ok();
  }

  Status parse_header_json(json& header) {
    const char* text = reinterpret_cast<const char*>(f_.data_ + kLenBytes);
    const size_t len = f_.data_start_ - kLenBytes;
    std::string err;
    size_t at = 0;
    bool have_at = false;
    if (!parse_json(text, len, header, err, at, have_at)) {
      return fail(kLenBytes + (have_at ? std::min(at, len) : 0), "header is not valid JSON: " + err);
    }
    if (!header.is_object()) {
      return fail(kLenBytes, std::string("header JSON is ") + json_kind(header) + ", expected an object");
    }
    return Status::ok();
  }

  Status parse_metadata(const json& m) {
    if (m.is_null()) return Status::ok();
    if (!m.is_object()) {
      return fail(kLenBytes, std::string("\"__metadata__\" is ") + json_kind(m) + ", expected an object of strings");
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_string()) {
        return fail(kLenBytes, "\"__metadata__\" key " + quote_name(it.key()) + " is " + json_kind(it.value()) +
                                   ", expected a string");
      }
      f_.metadata_.emplace(it.key(), it.value().get<std::string>());
    }
    return Status::ok();
  }

  Status parse_tensor(const std::string& name, const json& e, StTensorInfo& t) {
    t.name = name;
    if (!e.is_object()) return tensor_fail(name, std::string("entry is ") + json_kind(e) + ", expected an object");

    const auto dt = e.find("dtype");
    if (dt == e.end()) return tensor_fail(name, "missing \"dtype\"");
    if (!dt->is_string()) return tensor_fail(name, std::string("\"dtype\" is ") + json_kind(*dt) + ", expected a string");
    const std::string& dname = dt->get_ref<const std::string&>();
    if (!st_dtype_from_name(dname, t.dtype)) {
      for (const char* k : kKnownUnsupported) {
        if (dname == k) return tensor_fail(name, "dtype " + quote_name(dname) + " is not supported");
      }
      return tensor_fail(name, "unknown dtype " + quote_name(dname));
    }

    const auto sh = e.find("shape");
    if (sh == e.end()) return tensor_fail(name, "missing \"shape\"");
    if (!sh->is_array()) return tensor_fail(name, std::string("\"shape\" is ") + json_kind(*sh) + ", expected an array");
    t.shape.reserve(sh->size());
    bool any_zero = false;
    for (size_t i = 0; i < sh->size(); ++i) {
      const json& d = (*sh)[i];
      if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0) {
        return tensor_fail(name, "shape dimension " + std::to_string(i) + " is negative (" +
                                     std::to_string(d.get<int64_t>()) + ")");
      }
      uint64_t v = 0;
      if (!json_u64(d, v)) {
        return tensor_fail(name, "shape dimension " + std::to_string(i) + " is " + json_kind(d) +
                                     ", expected a non-negative integer");
      }
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return tensor_fail(name, "shape dimension " + std::to_string(i) + " (" + std::to_string(v) + ") is too large");
      }
      any_zero = any_zero || v == 0;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    int64_t n = 1;
    if (any_zero) {
      n = 0;
    } else {
      for (int64_t d : t.shape) {
        if (__builtin_mul_overflow(n, d, &n)) {
          return tensor_fail(name, "shape " + st_shape_string(t.shape) + " element count overflows");
        }
      }
    }
    t.n_elements = n;
    uint64_t n_bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n), static_cast<uint64_t>(st_dtype_size(t.dtype)), &n_bytes)) {
      return tensor_fail(name, "shape " + st_shape_string(t.shape) + " byte size overflows");
    }
    t.n_bytes = n_bytes;

    const auto off = e.find("data_offsets");
    if (off == e.end()) return tensor_fail(name, "missing \"data_offsets\"");
    if (!off->is_array() || off->size() != 2) {
      return tensor_fail(name, "\"data_offsets\" must be an array [begin, end] of two integers");
    }
    uint64_t b = 0, en = 0;
    if (!json_u64((*off)[0], b) || !json_u64((*off)[1], en)) {
      return tensor_fail(name, "\"data_offsets\" must hold two non-negative integers, got " + off->dump());
    }
    const uint64_t region = f_.size_ - f_.data_start_;
    if (b > en) {
      return tensor_fail(name, "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] are reversed");
    }
    if (en > region) {
      return tensor_fail(name, "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                                   "] run past the end of the data region (" + std::to_string(region) +
                                   " bytes; file truncated?)");
    }
    if (en - b != n_bytes) {
      return tensor_fail(name, "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] hold " +
                                   std::to_string(en - b) + " bytes, but " + st_dtype_name(t.dtype) + " " +
                                   st_shape_string(t.shape) + " needs " + std::to_string(n_bytes));
    }
    t.begin = b;
    return Status::ok();
  }

  Status parse_entries(const json& header) {
    // nlohmann objects iterate sorted by key, so tensors_ comes out sorted by name.
    f_.tensors_.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == kStMetadataKey) {
        DSPARK_RETURN_IF_ERROR(parse_metadata(it.value()));
        continue;
      }
      StTensorInfo t;
      DSPARK_RETURN_IF_ERROR(parse_tensor(it.key(), it.value(), t));
      f_.tensors_.push_back(std::move(t));
    }
    DSPARK_CHECK(std::is_sorted(f_.tensors_.begin(), f_.tensors_.end(),
                                [](const StTensorInfo& a, const StTensorInfo& b) { return a.name < b.name; }));
    return Status::ok();
  }

  // Non-empty tensors must not overlap (holes are fine).
  Status check_layout() {
    std::vector<const StTensorInfo*> order;
    order.reserve(f_.tensors_.size());
    for (const StTensorInfo& t : f_.tensors_) {
      if (t.n_bytes > 0) order.push_back(&t);
    }
    std::sort(order.begin(), order.end(), [](const StTensorInfo* a, const StTensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
    });
    for (size_t i = 1; i < order.size(); ++i) {
      const StTensorInfo& a = *order[i - 1];
      const StTensorInfo& b = *order[i];
      if (b.begin < a.begin + a.n_bytes) {
        return tensor_fail(b.name, "data [" + std::to_string(b.begin) + ", " + std::to_string(b.begin + b.n_bytes) +
                                       ") overlaps tensor " + quote_name(a.name) + " [" + std::to_string(a.begin) + ", " +
                                       std::to_string(a.begin + a.n_bytes) + ")");
      }
    }
    return Status::ok();
  }

  SafetensorsFile& f_;
};

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  SafetensorsFile f;
  f.name_ = name;
  f.data_ = data;
  f.size_ = data == nullptr ? 0 : size;
  Status st;
  try {
    st = StParser(f).run();
  } catch (const std::bad_alloc&) {
    st = Status::error(name + ": out of memory while parsing the header");
  } catch (const std::exception& e) {
    st = Status::error(name + ": " + e.what());
  }
  if (!st.is_ok()) return st;
  return f;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return mapping.status();
  const size_t size = (*mapping)->size();
  if (size < kLenBytes)
    return Status::error(path + ": offset 0: file truncated reading the 8-byte header length (file is " +
                         std::to_string(size) + " bytes)");
  Result<SafetensorsFile> r = parse((*mapping)->data(), size, path);
  if (!r.is_ok()) return r;  // mapping released here
  r->mapping_ = std::move(mapping).value();
  return r;
}

const StTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const StTensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

Result<std::vector<float>> SafetensorsFile::read_f32(std::string_view name,
                                                     std::span<const int64_t> expected_shape) const {
  const StTensorInfo* t = find(name);
  if (t == nullptr) return Status::error(name_ + ": tensor " + quote_name(name) + " not found");
  return st_read_f32(*t, data(*t), expected_shape, name_);
}

// ---------------------------------------------------------------------------------------------
// SafetensorsModel

namespace {
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr size_t kMaxIndexBytes = 100'000'000;

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}
}  // namespace

SafetensorsModel::SafetensorsModel(SafetensorsModel&&) noexcept = default;
SafetensorsModel& SafetensorsModel::operator=(SafetensorsModel&&) noexcept = default;
SafetensorsModel::~SafetensorsModel() = default;

Result<SafetensorsModel> SafetensorsModel::open_dir(const std::string& dir) {
  SafetensorsModel m;
  m.dir_ = dir_prefix(dir);
  const std::string single = m.dir_ + kSingleFile;
  const std::string index_path = m.dir_ + kIndexFile;

  struct stat dst {};
  if (::stat(m.dir_.c_str(), &dst) != 0) return Status::error(m.dir_ + ": cannot open directory: " + std::strerror(errno));
  if (!S_ISDIR(dst.st_mode)) return Status::error(m.dir_ + ": not a directory");

  if (file_exists(single)) {
    auto f = SafetensorsFile::open(single);
    if (!f.is_ok()) return f.status();
    m.files_.push_back(std::move(f).value());
    for (const StTensorInfo& t : m.files_[0].tensors()) m.index_.emplace(t.name, Loc{&t, 0});
    return m;
  }
  if (!file_exists(index_path)) {
    return Status::error(m.dir_ + ": missing " + kSingleFile + " and " + kIndexFile);
  }

  std::string text;
  DSPARK_RETURN_IF_ERROR(read_text_file(index_path, kMaxIndexBytes, text));
  json idx;
  std::string err;
  size_t at = 0;
  bool have_at = false;
  if (!parse_json(text.data(), text.size(), idx, err, at, have_at)) {
    return Status::error(index_path + ": " + (have_at ? "offset " + std::to_string(at) + ": " : std::string()) +
                         "not valid JSON: " + err);
  }
  if (!idx.is_object()) return Status::error(index_path + ": top level is " + json_kind(idx) + ", expected an object");
  const auto wm = idx.find("weight_map");
  if (wm == idx.end()) return Status::error(index_path + ": missing \"weight_map\"");
  if (!wm->is_object()) {
    return Status::error(index_path + ": \"weight_map\" is " + json_kind(*wm) + ", expected an object");
  }

  // Shard file name -> index in files_, in first-mention order (weight_map iterates by tensor name).
  std::map<std::string, size_t> shard_ids;
  std::vector<std::pair<std::string, size_t>> wanted;  // tensor -> shard id
  wanted.reserve(wm->size());
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string& tname = it.key();
    if (!it.value().is_string()) {
      return Status::error(index_path + ": \"weight_map\" entry for tensor " + quote_name(tname) + " is " +
                           json_kind(it.value()) + ", expected a file name");
    }
    const std::string& fname = it.value().get_ref<const std::string&>();
    if (!plain_file_name(fname)) {
      return Status::error(index_path + ": tensor " + quote_name(tname) + " maps to " + quote_name(fname) +
                           ", which is not a plain file name in " + m.dir_);
    }
    auto [sit, inserted] = shard_ids.emplace(fname, shard_ids.size());
    if (inserted) {
      const std::string path = m.dir_ + fname;
      if (!file_exists(path)) {
        return Status::error(index_path + ": tensor " + quote_name(tname) + " maps to missing shard " + path);
      }
    }
    wanted.emplace_back(tname, sit->second);
  }
  if (shard_ids.empty()) return Status::error(index_path + ": \"weight_map\" is empty");

  std::vector<std::string> names(shard_ids.size());
  for (const auto& [fname, id] : shard_ids) names[id] = fname;
  m.files_.reserve(names.size());
  for (const std::string& fname : names) {
    auto f = SafetensorsFile::open(m.dir_ + fname);
    if (!f.is_ok()) return f.status();
    m.files_.push_back(std::move(f).value());
  }
  for (size_t i = 0; i < m.files_.size(); ++i) {
    for (const StTensorInfo& t : m.files_[i].tensors()) {
      auto [it, inserted] = m.index_.emplace(t.name, Loc{&t, i});
      if (!inserted) {
        return Status::error(m.dir_ + ": tensor " + quote_name(t.name) + " appears in both " +
                             m.files_[it->second.file].path() + " and " + m.files_[i].path());
      }
    }
  }
  for (const auto& [tname, id] : wanted) {
    if (m.files_[id].find(tname) == nullptr) {
      return Status::error(m.files_[id].path() + ": tensor " + quote_name(tname) + " listed in " + index_path +
                           " is not in this shard");
    }
  }
  return m;
}

const StTensorInfo* SafetensorsModel::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.info;
}

const SafetensorsFile* SafetensorsModel::file_of(const StTensorInfo& info) const {
  auto it = index_.find(std::string_view(info.name));
  if (it == index_.end() || it->second.info != &info) return nullptr;
  return &files_[it->second.file];
}

const uint8_t* SafetensorsModel::data(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  return files_[it->second.file].data(*it->second.info);
}

const uint8_t* SafetensorsModel::data(const StTensorInfo& info) const {
  const SafetensorsFile* f = file_of(info);
  return f == nullptr ? nullptr : f->data(info);
}

std::vector<std::string> SafetensorsModel::tensor_names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, loc] : index_) out.push_back(name);
  return out;
}

Result<std::vector<float>> SafetensorsModel::read_f32(std::string_view name,
                                                      std::span<const int64_t> expected_shape) const {
  auto it = index_.find(name);
  if (it == index_.end()) return Status::error(dir_ + ": tensor " + quote_name(name) + " not found");
  const SafetensorsFile& f = files_[it->second.file];
  return st_read_f32(*it->second.info, f.data(*it->second.info), expected_shape, f.path());
}

}  // namespace dspark::formats
