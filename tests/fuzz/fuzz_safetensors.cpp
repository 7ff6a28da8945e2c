// libFuzzer target: SafetensorsFile::parse on arbitrary bytes, then every accessor on every tensor
// (find, data, first/last byte, read_f32) and a write/re-parse round trip of whatever parsed. Any
// crash, sanitizer report, abort (DSPARK_CHECK) or oversized allocation (-malloc_limit_mb in
// scripts/fuzz.sh safetensors) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/safetensors.h"

using dspark::formats::SafetensorsFile;
using dspark::formats::StDType;
using dspark::formats::StTensorInfo;
using dspark::formats::StWriteTensor;

namespace {

volatile size_t g_sink;

bool is_float(StDType t) { return t == StDType::kF32 || t == StDType::kF16 || t == StDType::kBF16; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!r.is_ok()) {
    DSPARK_CHECK(r.message().rfind("fuzz.safetensors: ", 0) == 0);  // every error names the file
    return 0;
  }
  const SafetensorsFile& f = *r;
  DSPARK_CHECK(f.data_offset() >= 10 && f.data_offset() <= size);
  size_t sink = 0;
  bool can_rewrite = true;
  std::vector<StWriteTensor> rewrite;
  const StTensorInfo* prev = nullptr;
  for (const StTensorInfo& t : f.tensors()) {
    DSPARK_CHECK(f.find(t.name) == &t);
    DSPARK_CHECK(prev == nullptr || prev->name < t.name);
    prev = &t;
    DSPARK_CHECK(t.name != dspark::formats::kStMetadataKey);
    const size_t es = dspark::formats::st_dtype_size(t.dtype);
    DSPARK_CHECK(es != 0);
    int64_t n = 1;
    bool zero = false;
    for (int64_t d : t.shape) {
      DSPARK_CHECK(d >= 0);
      zero = zero || d == 0;
    }
    if (!zero) {
      for (int64_t d : t.shape) DSPARK_CHECK(!__builtin_mul_overflow(n, d, &n));
    }
    DSPARK_CHECK((zero ? 0 : n) == t.n_elements);
    DSPARK_CHECK(t.n_bytes == static_cast<uint64_t>(t.n_elements) * es);
    DSPARK_CHECK(t.begin <= size && t.n_bytes <= size - f.data_offset() - t.begin);
    const uint8_t* p = f.data(t);
    DSPARK_CHECK(p >= data + f.data_offset() && p <= data + size);
    if (t.n_bytes > 0) sink += p[0] + p[t.n_bytes - 1];  // first and last byte are readable

    auto v = f.read_f32(t.name, t.shape);
    DSPARK_CHECK(v.is_ok() == is_float(t.dtype));
    if (v.is_ok()) {
      DSPARK_CHECK(v->size() == static_cast<size_t>(t.n_elements));
      if (!v->empty()) sink += v->back() > 0.0f;
    }
    std::vector<int64_t> wrong = t.shape;
    wrong.push_back(1);
    auto w = f.read_f32(t.name, wrong);
    DSPARK_CHECK(!w.is_ok() && w.message().rfind("fuzz.safetensors: tensor ", 0) == 0);

    if (t.name.empty()) can_rewrite = false;
    if (can_rewrite) rewrite.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.n_bytes)});
  }
  DSPARK_CHECK(f.find("\x01no such tensor") == nullptr || f.find("\x01no such tensor")->name == "\x01no such tensor");
  for (const auto& [k, val] : f.metadata()) sink += k.size() + val.size();

  // Everything that parses (valid UTF-8 names, valid shapes) must be writable and read back equal.
  if (can_rewrite) {
    auto bytes = dspark::formats::build_safetensors(rewrite, f.metadata(), "rewrite");
    DSPARK_CHECK(bytes.is_ok());
    auto again = SafetensorsFile::parse(bytes->data(), bytes->size(), "rewrite");
    DSPARK_CHECK(again.is_ok());
    DSPARK_CHECK(again->data_offset() % 8 == 0);
    DSPARK_CHECK(again->metadata() == f.metadata());
    DSPARK_CHECK(again->tensors().size() == f.tensors().size());
    for (size_t i = 0; i < f.tensors().size(); ++i) {
      const StTensorInfo& a = f.tensors()[i];
      const StTensorInfo& b = again->tensors()[i];
      DSPARK_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.n_bytes == b.n_bytes);
      DSPARK_CHECK(a.n_bytes == 0 || std::memcmp(f.data(a), again->data(b), a.n_bytes) == 0);
    }
  }
  g_sink = g_sink + sink;
  return 0;
}
