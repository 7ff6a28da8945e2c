#include "formats/gguf_random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/f16.h"

namespace dspark::formats {
namespace {

bool skeleton_key(std::string_view key) { return key.starts_with("dspark.skeleton."); }

// A skeleton's tensor may not ask for more than this many elements (a 16 GB F32 tensor): its table is
// untrusted bytes, and the random data is built in memory.
constexpr int64_t kMaxSkeletonElements = int64_t{1} << 32;

// Every pair of f but general.alignment (GgufWriter::set_alignment writes it) and a skeleton's table.
void copy_metadata(const GgufFile& f, GgufWriter* w) {
  if (f.has("general.alignment")) w->set_alignment(f.alignment());
  for (const GgufKV& kv : f.kvs()) {
    if (kv.key == "general.alignment" || skeleton_key(kv.key)) continue;
    if (kv.type == GgufType::STRING) {
      w->add_string(kv.key, kv.str);
    } else if (kv.is_array() && kv.elem_type == GgufType::STRING) {
      const std::vector<std::string> s(kv.strs.begin(), kv.strs.end());
      w->add_string_array(kv.key, s);
    } else if (kv.is_array()) {
      w->add_array(kv.key, kv.elem_type, kv.elems, kv.n_elems);
    } else {  // a scalar: its value bits, little-endian, in the type's width
      std::vector<uint8_t> payload(gguf_type_size(kv.type));
      std::memcpy(payload.data(), &kv.raw, payload.size());
      w->add_raw_kv(kv.key, (uint32_t)kv.type, std::move(payload));
    }
  }
}

struct TensorSpec {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;  // n_dims entries
};

Result<std::vector<TensorSpec>> tensor_table(const GgufFile& f) {
  std::vector<TensorSpec> out;
  if (!is_skeleton(f)) {
    for (const GgufTensorInfo& t : f.tensors()) out.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims)});
    return out;
  }
  auto names = f.get_string_array(kSkeletonNames);
  if (!names) return names.status();
  auto types = f.get_int_array(kSkeletonTypes);
  if (!types) return types.status();
  auto shapes = f.get_int_array(kSkeletonShapes);
  if (!shapes) return shapes.status();
  if (types->size() != names->size() || shapes->size() != 4 * names->size())
    return Status::error(f.path() + ": skeleton tensor table: " + std::to_string(names->size()) + " names, " +
                         std::to_string(types->size()) + " types, " + std::to_string(shapes->size()) +
                         " shape entries (4 a tensor)");
  for (size_t i = 0; i < names->size(); ++i) {
    const DTypeInfo* info = (*types)[i] >= 0 && (*types)[i] <= UINT32_MAX ? dtype_info((uint32_t)(*types)[i]) : nullptr;
    if (!info) return Status::error(f.path() + ": skeleton tensor '" + (*names)[i] + "': unknown type id " + std::to_string((*types)[i]));
    TensorSpec s{(*names)[i], (DType)(*types)[i], {}};
    const int64_t* ne = shapes->data() + 4 * i;
    int n_dims = 0;  // the entries before the first -1; all after it -1
    while (n_dims < 4 && ne[n_dims] >= 0) ++n_dims;
    int64_t n = 1;
    bool ok = n_dims >= 1;
    for (int d = 0; d < 4 && ok; ++d)
      ok = d < n_dims ? !__builtin_mul_overflow(n, ne[d], &n) && n <= kMaxSkeletonElements : ne[d] == -1;
    if (!ok) return Status::error(f.path() + ": skeleton tensor '" + (*names)[i] + "': shape out of range");
    if (ne[0] % info->block_elems != 0)
      return Status::error(f.path() + ": skeleton tensor '" + (*names)[i] + "': ne0 not a multiple of the " +
                           dtype_name(s.type) + " block (" + std::to_string(info->block_elems) + ")");
    s.ne.assign(ne, ne + n_dims);
    out.push_back(std::move(s));
  }
  return out;
}

// Where a block type's f16 scale(s) sit and what they multiply: d = kRandomWeightStd / code_std makes
// the weights' spread kRandomWeightStd; the minimum field (m of y = q d + m, dmin of the K-quants'
// y = d sc q - dmin m_j, sub-block minima m_j of mean ~31.5) is m_per_d x d, which centres them.
struct BlockFill {
  size_t d_at;      // byte offset of the f16 scale d in a block
  int m_at;         // byte offset of the f16 minimum, -1: none
  double code_std;  // standard deviation of (code x sub-block scale) for uniform random bytes
  double m_per_d;   // the minimum field over d
};
bool block_fill(DType t, BlockFill* b) {
  switch (t) {
    case DType::Q4_0: *b = {0, -1, 4.61, 0}; return true;            // nibble - 8
    case DType::Q4_1: *b = {0, 2, 4.61, -7.5}; return true;          // nibble d + m
    case DType::Q5_0: *b = {0, -1, 9.23, 0}; return true;            // 5-bit code - 16
    case DType::Q5_1: *b = {0, 2, 9.23, -15.5}; return true;
    case DType::Q8_0: *b = {0, -1, 73.9, 0}; return true;            // int8
    case DType::Q4_K: *b = {0, 2, 4.61 * 31.5, 7.5}; return true;    // 6-bit sub-block scales and minima
    case DType::Q5_K: *b = {0, 2, 9.23 * 31.5, 15.5}; return true;
    case DType::Q6_K: *b = {208, -1, 18.5 * 73.9, 0}; return true;   // (q - 32) x int8 sub-block scale
    default: return false;
  }
}

Status fill_tensor(const TensorSpec& s, std::mt19937_64& rng, std::vector<uint8_t>* out) {
  int64_t n = 1;
  for (int64_t d : s.ne) n *= d;
  const DTypeInfo& info = dtype_info(s.type);
  out->assign((size_t)(n / info.block_elems) * info.block_bytes, 0);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const bool vec = s.ne.size() <= 1;  // 1-D: norm weights
  auto value = [&] { return vec ? 1.0f + 0.1f * nd(rng) : kRandomWeightStd * nd(rng); };
  switch (s.type) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = value();
        std::memcpy(out->data() + 4 * i, &v, 4);
      }
      return Status::ok();
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = s.type == DType::F16 ? fp32_to_fp16(value()) : fp32_to_bf16(value());
        std::memcpy(out->data() + 2 * i, &h, 2);
      }
      return Status::ok();
    default: break;
  }
  BlockFill b;
  if (!block_fill(s.type, &b))
    return Status::error("tensor '" + s.name + "': no random fill for type " + dtype_name(s.type));
  for (size_t i = 0; i < out->size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(out->data() + i, &r, std::min<size_t>(8, out->size() - i));
  }
  const float d = (float)(kRandomWeightStd / b.code_std);
  const uint16_t dh = fp32_to_fp16(d), mh = fp32_to_fp16((float)(b.m_per_d * d));
  for (size_t off = 0; off < out->size(); off += info.block_bytes) {
    std::memcpy(out->data() + off + b.d_at, &dh, 2);
    if (b.m_at >= 0) std::memcpy(out->data() + off + b.m_at, &mh, 2);
  }
  return Status::ok();
}

}  // namespace

bool is_skeleton(const GgufFile& f) { return f.has(kSkeletonNames); }

Result<GgufWriter> skeleton_of(const GgufFile& f) {
  auto table = tensor_table(f);
  if (!table) return table.status();
  GgufWriter w;
  copy_metadata(f, &w);
  std::vector<std::string> names;
  std::vector<uint32_t> types;
  std::vector<int64_t> shapes;
  for (const TensorSpec& s : *table) {
    names.push_back(s.name);
    types.push_back((uint32_t)s.type);
    for (int d = 0; d < 4; ++d) shapes.push_back(d < (int)s.ne.size() ? s.ne[(size_t)d] : -1);
  }
  w.add_string_array(kSkeletonNames, names);
  w.add_u32_array(kSkeletonTypes, types);
  w.add_i64_array(kSkeletonShapes, shapes);
  return w;
}

Result<GgufWriter> random_like(const GgufFile& f, uint64_t seed) {
  auto table = tensor_table(f);
  if (!table) return table.status();
  GgufWriter w;
  copy_metadata(f, &w);
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data;
  for (const TensorSpec& s : *table) {
    if (Status st = fill_tensor(s, rng, &data); !st) return Status::error(f.path() + ": " + st.message());
    if (Status st = w.add_tensor(s.name, s.type, s.ne, data.data(), data.size()); !st)
      return Status::error(f.path() + ": " + st.message());
  }
  return w;
}

}  // namespace dspark::formats
