// GGUF metadata: value type table, typed getters and describe_kv.
#include <cstdio>
#include <cstring>
#include <limits>

#include "formats/gguf.h"

namespace dspark::formats {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "u8";
    case GgufType::INT8: return "i8";
    case GgufType::UINT16: return "u16";
    case GgufType::INT16: return "i16";
    case GgufType::UINT32: return "u32";
    case GgufType::INT32: return "i32";
    case GgufType::FLOAT32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "u64";
    case GgufType::INT64: return "i64";
    case GgufType::FLOAT64: return "f64";
  }
  return "invalid";
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

namespace {

// An integer value of any GGUF integer type, without loss.
struct Integer {
  bool negative = false;  // then `s` holds it
  int64_t s = 0;
  uint64_t u = 0;          // valid when !negative
};

// Decodes raw little-endian bits (zero-extended to 64) of an integer type.
Integer decode_integer(GgufType t, uint64_t raw) {
  Integer v;
  int64_t s = 0;
  switch (t) {
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::UINT64:
      v.u = raw;
      v.s = static_cast<int64_t>(raw);
      return v;
    case GgufType::INT8: s = static_cast<int8_t>(raw); break;
    case GgufType::INT16: s = static_cast<int16_t>(raw); break;
    case GgufType::INT32: s = static_cast<int32_t>(raw); break;
    case GgufType::INT64: s = static_cast<int64_t>(raw); break;
    default: break;
  }
  v.s = s;
  v.negative = s < 0;
  v.u = static_cast<uint64_t>(s);
  return v;
}

uint64_t load_raw(const uint8_t* p, size_t n) {
  uint64_t raw = 0;
  std::memcpy(&raw, p, n);
  return raw;
}

double decode_float(GgufType t, uint64_t raw) {
  if (t == GgufType::FLOAT32) {
    float f;
    const uint32_t bits = static_cast<uint32_t>(raw);
    std::memcpy(&f, &bits, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &raw, 8);
  return d;
}

std::string type_label(const GgufKV& kv) {
  if (!kv.is_array()) return gguf_type_name(kv.type);
  return std::string("array<") + gguf_type_name(kv.elem_type) + ">";
}

std::string format_scalar(GgufType t, uint64_t raw) {
  char buf[64];
  if (gguf_type_is_integer(t)) {
    const Integer v = decode_integer(t, raw);
    if (v.negative) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.s));
    else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v.u));
  } else if (t == GgufType::FLOAT32 || t == GgufType::FLOAT64) {
    std::snprintf(buf, sizeof buf, "%.9g", decode_float(t, raw));
  } else if (t == GgufType::BOOL) {
    return raw != 0 ? "true" : "false";
  } else {
    return "?";
  }
  return buf;
}

std::string format_string(std::string_view s, size_t max_bytes, bool quote = true) {
  std::string out = quote ? "\"" : "";
  size_t n = 0;
  for (char c : s) {
    if (n++ == max_bytes) { out += "..."; break; }
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (u < 0x20 || u == 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", u); out += b; }
    else out += c;
  }
  if (quote) out += "\"";
  return out;
}

}  // namespace

std::string describe_kv(const GgufKV& kv) {
  constexpr size_t kMaxShownElems = 8;
  constexpr size_t kMaxShownBytes = 80;
  std::string out = format_string(kv.key, kMaxShownBytes, /*quote=*/false);
  out.append(": ").append(type_label(kv));
  if (kv.type == GgufType::STRING) return out + " = " + format_string(kv.str, kMaxShownBytes);
  if (!kv.is_array()) return out + " = " + format_scalar(kv.type, kv.raw);
  out.append("[").append(std::to_string(kv.n_elems)).append("] = [");
  const size_t shown = kv.n_elems < kMaxShownElems ? static_cast<size_t>(kv.n_elems) : kMaxShownElems;
  const size_t elem_bytes = gguf_type_size(kv.elem_type);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    if (kv.elem_type == GgufType::STRING) out += format_string(kv.strs[i], 24);
    else out += format_scalar(kv.elem_type, load_raw(kv.elems + i * elem_bytes, elem_bytes));
  }
  if (kv.n_elems > shown) out += ", ...";
  return out + "]";
}

Status GgufFile::key_error(const GgufKV* kv, std::string_view key, const std::string& what) const {
  std::string msg = name_ + ": key '" + std::string(key) + "'";
  if (kv != nullptr) msg += " (offset " + std::to_string(kv->offset) + ", " + type_label(*kv) + ")";
  return Status::error(msg + ": " + what);
}

Result<const GgufKV*> GgufFile::require(std::string_view key) const {
  const GgufKV* kv = find(key);
  if (kv == nullptr) return key_error(nullptr, key, "not found");
  return kv;
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  if (!gguf_type_is_integer((*kv)->type)) return key_error(*kv, key, "expected an integer");
  const Integer v = decode_integer((*kv)->type, (*kv)->raw);
  if (v.negative) return key_error(*kv, key, "expected a non-negative integer, got " + std::to_string(v.s));
  return v.u;
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  if (!gguf_type_is_integer((*kv)->type)) return key_error(*kv, key, "expected an integer");
  const Integer v = decode_integer((*kv)->type, (*kv)->raw);
  if (!v.negative && v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return key_error(*kv, key, "value " + std::to_string(v.u) + " does not fit in int64");
  }
  return v.s;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  const GgufType t = (*kv)->type;
  if (t != GgufType::FLOAT32 && t != GgufType::FLOAT64) return key_error(*kv, key, "expected f32 or f64");
  return decode_float(t, (*kv)->raw);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  if ((*kv)->type != GgufType::BOOL) return key_error(*kv, key, "expected bool");
  return (*kv)->raw != 0;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  if ((*kv)->type != GgufType::STRING) return key_error(*kv, key, "expected string");
  return std::string((*kv)->str);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  if (!(*kv)->is_array() || (*kv)->elem_type != GgufType::STRING) return key_error(*kv, key, "expected array<string>");
  return std::vector<std::string>((*kv)->strs.begin(), (*kv)->strs.end());
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  const GgufKV& v = **kv;
  if (!v.is_array() || (v.elem_type != GgufType::FLOAT32 && v.elem_type != GgufType::FLOAT64)) {
    return key_error(&v, key, "expected array<f32> or array<f64>");
  }
  const size_t n = static_cast<size_t>(v.n_elems);
  const size_t elem_bytes = gguf_type_size(v.elem_type);
  std::vector<float> out(n);  // n_elems was bounded by the bytes in the file
  if (v.elem_type == GgufType::FLOAT32) {
    if (n > 0) std::memcpy(out.data(), v.elems, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(decode_float(v.elem_type, load_raw(v.elems + i * elem_bytes, 8)));
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  auto kv = require(key);
  if (!kv) return kv.status();
  const GgufKV& v = **kv;
  if (!v.is_array() || !gguf_type_is_integer(v.elem_type)) return key_error(&v, key, "expected an array of integers");
  const size_t n = static_cast<size_t>(v.n_elems);
  const size_t elem_bytes = gguf_type_size(v.elem_type);
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const Integer e = decode_integer(v.elem_type, load_raw(v.elems + i * elem_bytes, elem_bytes));
    if (!e.negative && e.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return key_error(&v, key, "element " + std::to_string(i) + " = " + std::to_string(e.u) + " does not fit in int64");
    }
    out[i] = e.s;
  }
  return out;
}

}  // namespace dspark::formats
