// Shared pieces of the file-format readers: a read-only mapping of a whole file, and quoting of
// names taken from untrusted bytes for error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dspark::formats {

// Read-only private mapping of a whole regular file; unmapped on destruction. An empty file
// maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return len_; }

 private:
  MappedFile(void* addr, size_t len) : addr_(addr), len_(len) {}
  void* addr_ = nullptr;
  size_t len_ = 0;
};

// 'name' in single quotes with control bytes, quote and backslash written as \xNN.
std::string quote_name(std::string_view s);

}  // namespace dspark::formats
