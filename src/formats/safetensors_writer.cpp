// write_safetensors / build_safetensors (declared in safetensors.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <set>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "formats/mapped_file.h"

namespace dspark::formats {

namespace {

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}


Status write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::error(std::strerror(w < 0 ? errno : EIO));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

// The 8-byte length plus the padded header JSON, after validating every tensor and metadata pair.
Result<std::vector<uint8_t>> build_header(const std::vector<StWriteTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata,
                                          const std::string& name, uint64_t& data_bytes) {
  try {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
      nlohmann::ordered_json m = nlohmann::ordered_json::object();
      for (const auto& [k, v] : metadata) {
        if (!valid_utf8(k)) return Status::error(name + ": metadata key " + quote_name(k) + " is not valid UTF-8");
        if (!valid_utf8(v)) return Status::error(name + ": metadata value of " + quote_name(k) + " is not valid UTF-8");
        m[k] = v;
      }
      header[kStMetadataKey] = std::move(m);
    }
    std::set<std::string_view> seen;
    uint64_t offset = 0;
    for (const StWriteTensor& t : tensors) {
      const std::string ctx = name + ": tensor " + quote_name(t.name) + ": ";
      if (t.name.empty()) return Status::error(name + ": tensor with an empty name");
      if (t.name == kStMetadataKey) return Status::error(ctx + "name is reserved for metadata");
      if (!valid_utf8(t.name)) return Status::error(ctx + "name is not valid UTF-8");
      if (!seen.insert(t.name).second) return Status::error(ctx + "duplicate name");
      const size_t esize = st_dtype_size(t.dtype);
      if (esize == 0) return Status::error(ctx + "invalid dtype " + std::to_string(static_cast<int>(t.dtype)));
      uint64_t n = 1;
      bool zero = false;
      for (int64_t d : t.shape) {
        if (d < 0) return Status::error(ctx + "negative dimension in shape " + st_shape_string(t.shape));
        zero = zero || d == 0;
      }
      if (zero) {
        n = 0;
      } else {
        for (int64_t d : t.shape) {
          if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
            return Status::error(ctx + "shape " + st_shape_string(t.shape) + " element count overflows");
          }
        }
      }
      if (n > static_cast<uint64_t>(INT64_MAX)) return Status::error(ctx + "shape " + st_shape_string(t.shape) + " is too large");
      uint64_t n_bytes = 0;
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(esize), &n_bytes) || n_bytes != t.bytes.size()) {
        return Status::error(ctx + st_dtype_name(t.dtype) + " " + st_shape_string(t.shape) + " needs " +
                             (n_bytes == 0 && n != 0 ? std::string("too many") : std::to_string(n_bytes)) +
                             " bytes, got " + std::to_string(t.bytes.size()));
      }
      nlohmann::ordered_json e = nlohmann::ordered_json::object();
      e["dtype"] = st_dtype_name(t.dtype);
      e["shape"] = t.shape;
      e["data_offsets"] = {offset, offset + n_bytes};
      header[t.name] = std::move(e);
      offset += n_bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    if (text.size() > kStMaxHeaderBytes) {
      return Status::error(name + ": header of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                           std::to_string(kStMaxHeaderBytes));
    }
    std::vector<uint8_t> out(8 + text.size());
    const uint64_t hlen = text.size();
    std::memcpy(out.data(), &hlen, 8);
    std::memcpy(out.data() + 8, text.data(), text.size());
    data_bytes = offset;
    return out;
  } catch (const std::bad_alloc&) {
    return Status::error(name + ": out of memory building the header");
  } catch (const std::exception& e) {
    return Status::error(name + ": " + e.what());
  }
}

}  // namespace

Result<std::vector<uint8_t>> build_safetensors(const std::vector<StWriteTensor>& tensors,
                                               const std::map<std::string, std::string>& metadata,
                                               const std::string& name) {
  uint64_t data_bytes = 0;
  auto out = build_header(tensors, metadata, name, data_bytes);
  if (!out.is_ok()) return out;
  try {
    out->reserve(out->size() + static_cast<size_t>(data_bytes));
    for (const StWriteTensor& t : tensors) out->insert(out->end(), t.bytes.begin(), t.bytes.end());
  } catch (const std::bad_alloc&) {
    return Status::error(name + ": out of memory building the file");
  }
  return out;
}

Status write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  uint64_t data_bytes = 0;
  auto header = build_header(tensors, metadata, path, data_bytes);
  if (!header.is_ok()) return header.status();

  // Streams the header and then each tensor's bytes (no second copy of the data in memory).
  std::string tmpl = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Status::error(path + ": cannot create a temporary file: " + std::strerror(errno));
  Status st = write_all(fd, header->data(), header->size());
  for (size_t i = 0; i < tensors.size() && st.is_ok(); ++i) st = write_all(fd, tensors[i].bytes.data(), tensors[i].bytes.size());
  if (st.is_ok() && ::fchmod(fd, 0644) != 0) st = Status::error(std::strerror(errno));
  if (st.is_ok() && ::fsync(fd) != 0) st = Status::error(std::strerror(errno));
  if (::close(fd) != 0 && st.is_ok()) st = Status::error(std::strerror(errno));
  if (st.is_ok() && ::rename(tmpl.c_str(), path.c_str()) != 0) st = Status::error(std::strerror(errno));
  if (!st.is_ok()) {
    ::unlink(tmpl.c_str());
    return Status::error(path + ": write failed: " + st.message());
  }
  return Status::ok();
}

}  // namespace dspark::formats
