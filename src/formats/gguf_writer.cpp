// GgufWriter: GGUF v3 serialization (byte layout of docs/GGUF.md).
#include "formats/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dspark::formats {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t old = out.size();
  out.resize(old + n);
  std::memcpy(out.data() + old, p, n);
}
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}
uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  DSPARK_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0);
  add_u32("general.alignment", alignment);
}

void GgufWriter::add_kv(std::string_view key, GgufType type, const void* value, size_t n) {
  std::vector<uint8_t> kv;
  put_string(kv, key);
  put<uint32_t>(kv, static_cast<uint32_t>(type));
  put_bytes(kv, value, n);
  kvs_.push_back(std::move(kv));
}

void GgufWriter::add_u8(std::string_view key, uint8_t v) { add_kv(key, GgufType::UINT8, &v, 1); }
void GgufWriter::add_i8(std::string_view key, int8_t v) { add_kv(key, GgufType::INT8, &v, 1); }
void GgufWriter::add_u16(std::string_view key, uint16_t v) { add_kv(key, GgufType::UINT16, &v, 2); }
void GgufWriter::add_i16(std::string_view key, int16_t v) { add_kv(key, GgufType::INT16, &v, 2); }
void GgufWriter::add_i32(std::string_view key, int32_t v) { add_kv(key, GgufType::INT32, &v, 4); }
void GgufWriter::add_u64(std::string_view key, uint64_t v) { add_kv(key, GgufType::UINT64, &v, 8); }
void GgufWriter::add_i64(std::string_view key, int64_t v) { add_kv(key, GgufType::INT64, &v, 8); }
void GgufWriter::add_f32(std::string_view key, float v) { add_kv(key, GgufType::FLOAT32, &v, 4); }
void GgufWriter::add_f64(std::string_view key, double v) { add_kv(key, GgufType::FLOAT64, &v, 8); }
void GgufWriter::add_bool(std::string_view key, bool v) {
  const uint8_t b = v ? 1 : 0;
  add_kv(key, GgufType::BOOL, &b, 1);
}
void GgufWriter::add_u32(std::string_view key, uint32_t v) {
  if (key == "general.alignment" && v != 0 && (v & (v - 1)) == 0) alignment_ = v;
  add_kv(key, GgufType::UINT32, &v, 4);
}

void GgufWriter::add_string(std::string_view key, std::string_view v) {
  std::vector<uint8_t> payload;
  put_string(payload, v);
  add_kv(key, GgufType::STRING, payload.data(), payload.size());
}

void GgufWriter::add_array(std::string_view key, GgufType elem_type, const void* elems, size_t n) {
  const size_t elem_bytes = gguf_type_size(elem_type);
  DSPARK_CHECK(elem_bytes != 0);  // STRING arrays go through add_string_array; ARRAY cannot nest
  std::vector<uint8_t> payload;
  put<uint32_t>(payload, static_cast<uint32_t>(elem_type));
  put<uint64_t>(payload, n);
  if (n > 0) put_bytes(payload, elems, n * elem_bytes);
  add_kv(key, GgufType::ARRAY, payload.data(), payload.size());
}

void GgufWriter::add_string_array(std::string_view key, std::span<const std::string> v) {
  std::vector<uint8_t> payload;
  put<uint32_t>(payload, static_cast<uint32_t>(GgufType::STRING));
  put<uint64_t>(payload, v.size());
  for (const std::string& s : v) put_string(payload, s);
  add_kv(key, GgufType::ARRAY, payload.data(), payload.size());
}

void GgufWriter::add_raw_kv(std::string_view key, uint32_t type_id, std::vector<uint8_t> payload) {
  std::vector<uint8_t> kv;
  put_string(kv, key);
  put<uint32_t>(kv, type_id);
  put_bytes(kv, payload.data(), payload.size());
  kvs_.push_back(std::move(kv));
}

Status GgufWriter::add_tensor(std::string_view name, DType type, std::span<const int64_t> ne, const void* data,
                              size_t n_bytes) {
  const std::string ctx = "gguf writer: tensor '" + std::string(name) + "': ";
  const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
  if (info == nullptr || !info->supported) return Status::error(ctx + "type not supported");
  if (name.empty() || name.size() > kGgufMaxNameBytes) return Status::error(ctx + "bad name length");
  if (ne.empty() || ne.size() > 4) return Status::error(ctx + "needs 1 to 4 dims");
  int64_t n_elements = 1;
  for (int64_t d : ne) {
    if (d < 0) return Status::error(ctx + "negative dimension");
    if (__builtin_mul_overflow(n_elements, d, &n_elements)) return Status::error(ctx + "element count overflows");
  }
  if (ne[0] % info->block_elems != 0) return Status::error(ctx + "ne0 not a multiple of the block size");
  const size_t expected = static_cast<size_t>(n_elements / info->block_elems) * info->block_bytes;
  if (n_bytes != expected) {
    return Status::error(ctx + std::to_string(n_bytes) + " bytes given, type and shape need " + std::to_string(expected));
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return Status::error(ctx + "duplicate name");
  }
  const uint8_t* b = static_cast<const uint8_t*>(data);
  tensors_.push_back(Tensor{std::string(name), static_cast<uint32_t>(type), std::vector<int64_t>(ne.begin(), ne.end()),
                            std::vector<uint8_t>(b, b + n_bytes), std::nullopt});
  return Status::ok();
}

void GgufWriter::add_tensor_raw(std::string_view name, uint32_t type_id, std::vector<int64_t> ne,
                                std::vector<uint8_t> data, std::optional<uint64_t> offset) {
  tensors_.push_back(Tensor{std::string(name), type_id, std::move(ne), std::move(data), offset});
}

std::vector<uint8_t> GgufWriter::build() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const std::vector<uint8_t>& kv : kvs_) put_bytes(out, kv.data(), kv.size());

  std::vector<uint64_t> offsets;
  uint64_t next = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t off = t.offset.value_or(next);
    offsets.push_back(off);
    next = align_up(off + t.data.size(), alignment_);
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<int64_t>(out, d);
    put<uint32_t>(out, t.type_id);
    put<uint64_t>(out, off);
  }
  if (tensors_.empty()) return out;
  const uint64_t data_start = align_up(out.size(), alignment_);
  uint64_t end = data_start;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].data.empty()) end = std::max<uint64_t>(end, data_start + offsets[i] + tensors_[i].data.size());
  }
  out.resize(static_cast<size_t>(end), 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const std::vector<uint8_t>& d = tensors_[i].data;
    if (!d.empty()) std::memcpy(out.data() + data_start + offsets[i], d.data(), d.size());
  }
  return out;
}

Status GgufWriter::write_file(const std::string& path) const {
  const std::vector<uint8_t> bytes = build();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::error(path + ": cannot create: " + std::strerror(errno));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) return Status::error(path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace dspark::formats
