// libFuzzer target: GgufFile::parse on arbitrary bytes, then every getter on every pair and every
// tensor accessor. Any crash, sanitizer report, abort (DSPARK_CHECK) or oversized allocation
// (-malloc_limit_mb in scripts/fuzz.sh) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "formats/gguf_random.h"

using dspark::formats::GgufFile;
using dspark::formats::GgufKV;
using dspark::formats::GgufTensorInfo;

namespace {

volatile size_t g_sink;

template <class R>
void touch(const R& r) {
  g_sink = g_sink + (r.is_ok() ? 1 : r.message().size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = GgufFile::parse(data, size, "fuzz.gguf");
  if (!r.is_ok()) {
    DSPARK_CHECK(r.message().rfind("fuzz.gguf: ", 0) == 0);  // every error names the file
    return 0;
  }
  const GgufFile& f = *r;
  DSPARK_CHECK(f.version() == 2 || f.version() == 3);
  DSPARK_CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  size_t sink = 0;
  for (const GgufKV& kv : f.kvs()) {
    DSPARK_CHECK(!kv.key.empty());
    DSPARK_CHECK(f.find(kv.key) == &kv);
    DSPARK_CHECK(f.has(kv.key));
    sink += dspark::formats::describe_kv(kv).size();
    touch(f.get_uint(kv.key));
    touch(f.get_int(kv.key));
    touch(f.get_float(kv.key));
    touch(f.get_bool(kv.key));
    touch(f.get_string(kv.key));
    touch(f.get_string_array(kv.key));
    touch(f.get_float_array(kv.key));
    touch(f.get_int_array(kv.key));
    if (kv.is_array()) {
      DSPARK_CHECK(kv.elem_type != dspark::formats::GgufType::ARRAY);
      for (std::string_view s : kv.strs) sink += s.empty() ? 0 : static_cast<uint8_t>(s.back());
    }
  }
  touch(f.get_uint("general.alignment"));
  touch(f.get_string("no.such.key"));
  for (const GgufTensorInfo& t : f.tensors()) {
    DSPARK_CHECK(f.find_tensor(t.name) == &t);
    DSPARK_CHECK(!t.name.empty() && t.name.size() < 64);
    DSPARK_CHECK(t.n_dims >= 0 && t.n_dims <= 4);
    DSPARK_CHECK(t.offset % f.alignment() == 0);
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) {
      DSPARK_CHECK(t.ne[d] >= 0);
      n *= t.ne[d];
    }
    DSPARK_CHECK(n == t.n_elements);
    DSPARK_CHECK(dspark::dtype_info(static_cast<uint32_t>(t.type)) != nullptr);
    if (t.n_bytes > 0) {
      const uint8_t* p = f.tensor_data(t);
      DSPARK_CHECK(p >= data && t.n_bytes <= size && p <= data + size - t.n_bytes);
      sink += p[0] + p[t.n_bytes - 1];  // first and last byte are readable
    }
  }
  // The skeleton / random-model writers on whatever parsed (formats/gguf_random.h): a skeleton's
  // table is checked before anything is allocated for it; a model's tensors lie inside the input.
  auto sk = dspark::formats::skeleton_of(f);
  if (sk.is_ok()) {
    const std::vector<uint8_t> b = sk->build();
    auto back = GgufFile::parse(b.data(), b.size(), "skeleton.gguf");
    DSPARK_CHECK(back.is_ok() && dspark::formats::is_skeleton(*back));
  } else {
    DSPARK_CHECK(sk.message().rfind("fuzz.gguf: ", 0) == 0);
  }
  if (!dspark::formats::is_skeleton(f)) {
    auto rnd = dspark::formats::random_like(f, 1);
    if (rnd.is_ok()) sink += rnd->n_tensors();
    else DSPARK_CHECK(rnd.message().rfind("fuzz.gguf: ", 0) == 0);
  }
  g_sink = g_sink + sink;
  return 0;
}
