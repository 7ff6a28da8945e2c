// Random-weight copies and skeletons of GGUF models (formats/gguf_random.h): the metadata and tensor
// table carried over exactly, the bytes fixed by the seed whether made from the model or its skeleton,
// weights at the stated scale once dequantized, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "formats/gguf_random.h"
#include "gguf_test_util.h"
#include "kernels/kernels.h"

namespace dspark::formats {
namespace {

using testing::Bytes;
using testing::parse_bytes;

struct Spec {
  const char* name;
  DType type;
  std::vector<int64_t> ne;
};
// Every type with a fill, 1-D norm weights and 2-D / 3-D matrices.
const std::vector<Spec> kSpecs = {
    {"blk.0.attn_norm.weight", DType::F32, {64}},  {"blk.0.f32.weight", DType::F32, {64, 64}},
    {"blk.0.one_row.weight", DType::Q8_0, {256, 1}},  // 2-D with one row: its 2 dims survive a skeleton
    {"blk.0.f16.weight", DType::F16, {64, 64}},    {"blk.0.bf16.weight", DType::BF16, {64, 64}},
    {"blk.0.q8_0.weight", DType::Q8_0, {256, 32}}, {"blk.0.q4_0.weight", DType::Q4_0, {256, 32}},
    {"blk.0.q4_1.weight", DType::Q4_1, {256, 32}}, {"blk.0.q5_0.weight", DType::Q5_0, {256, 32}},
    {"blk.0.q5_1.weight", DType::Q5_1, {256, 32}}, {"blk.0.q4_k.weight", DType::Q4_K, {256, 32}},
    {"blk.0.q5_k.weight", DType::Q5_K, {256, 32}}, {"blk.0.q6_k.weight", DType::Q6_K, {256, 16, 2}},
};

Bytes source_model() {
  GgufWriter w;
  w.set_alignment(64);
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 1);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_u64("v.u64", 1234567890123ull);
  w.add_i8("v.i8", -3);
  w.add_f64("v.f64", -2.5);
  const std::vector<std::string> toks = {"<s>", "a", "b", "ab"};
  w.add_string_array("tokenizer.ggml.tokens", toks);
  w.add_f32_array("tokenizer.ggml.scores", std::vector<float>{0.f, -1.f, -2.f, -3.f});
  w.add_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>{3, 1, 1, 1});
  for (const Spec& s : kSpecs) {
    int64_t n = 1;
    for (int64_t d : s.ne) n *= d;
    const DTypeInfo& info = dtype_info(s.type);
    const std::vector<uint8_t> zero((size_t)(n / info.block_elems) * info.block_bytes, 0);
    EXPECT_TRUE(w.add_tensor(s.name, s.type, s.ne, zero.data(), zero.size()).is_ok()) << s.name;
  }
  return w.build();
}

Bytes random_bytes(const GgufFile& f, uint64_t seed) {
  auto w = random_like(f, seed);
  EXPECT_TRUE(w.is_ok()) << w.message();
  return w ? w->build() : Bytes{};
}

TEST(GgufRandom, MetadataAndTensorTableCarriedOver) {
  const Bytes src_bytes = source_model();
  auto src = parse_bytes(src_bytes);
  ASSERT_TRUE(src.is_ok()) << src.message();
  const Bytes out_bytes = random_bytes(*src, 7);
  auto out = parse_bytes(out_bytes, "random.gguf");
  ASSERT_TRUE(out.is_ok()) << out.message();
  EXPECT_EQ(out->alignment(), 64u);
  ASSERT_EQ(out->kvs().size(), src->kvs().size());
  for (const GgufKV& kv : src->kvs()) {
    const GgufKV* got = out->find(kv.key);
    ASSERT_NE(got, nullptr) << kv.key;
    EXPECT_EQ(describe_kv(*got), describe_kv(kv));
  }
  ASSERT_EQ(out->tensors().size(), src->tensors().size());
  for (size_t i = 0; i < src->tensors().size(); ++i) {
    const GgufTensorInfo &a = src->tensors()[i], &b = out->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.n_dims, b.n_dims);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(a.ne[d], b.ne[d]) << a.name;
    EXPECT_EQ(a.n_bytes, b.n_bytes);
  }
  EXPECT_EQ(out_bytes.size(), src_bytes.size());  // the same layout: the same bytes per token
}

TEST(GgufRandom, SeedFixesTheBytesFromAModelOrItsSkeleton) {
  const Bytes src_bytes = source_model();
  auto src = parse_bytes(src_bytes);
  ASSERT_TRUE(src.is_ok());
  const Bytes a = random_bytes(*src, 7), b = random_bytes(*src, 7), c = random_bytes(*src, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  auto sk = skeleton_of(*src);
  ASSERT_TRUE(sk.is_ok()) << sk.message();
  const Bytes sk_bytes = sk->build();
  auto skf = parse_bytes(sk_bytes, "skeleton.gguf");
  ASSERT_TRUE(skf.is_ok()) << skf.message();
  EXPECT_TRUE(is_skeleton(*skf));
  EXPECT_FALSE(is_skeleton(*src));
  EXPECT_TRUE(skf->tensors().empty());
  EXPECT_LT(sk_bytes.size(), src_bytes.size() / 10);
  EXPECT_EQ(random_bytes(*skf, 7), a);
  // A skeleton of a skeleton is the same skeleton.
  auto sk2 = skeleton_of(*skf);
  ASSERT_TRUE(sk2.is_ok());
  EXPECT_EQ(sk2->build(), sk_bytes);
}

TEST(GgufRandom, WeightsAtTheStatedScale) {
  const Bytes src_bytes = source_model();
  auto src = parse_bytes(src_bytes);
  ASSERT_TRUE(src.is_ok());
  const Bytes out_bytes = random_bytes(*src, 3);
  auto out = parse_bytes(out_bytes);
  ASSERT_TRUE(out.is_ok());
  for (const GgufTensorInfo& t : out->tensors()) {
    std::vector<float> y((size_t)t.n_elements);
    const int64_t row = t.ne[0], rows = t.n_elements / row;
    const size_t row_b = row_bytes(t.type, row);
    for (int64_t r = 0; r < rows; ++r)
      kernels::dequantize_row(t.type, out->tensor_data(t) + r * row_b, y.data() + r * row, row);
    double sum = 0, sq = 0;
    for (float v : y) {
      ASSERT_TRUE(std::isfinite(v)) << t.name;
      sum += v;
      sq += (double)v * v;
    }
    const double mean = sum / (double)y.size(), sd = std::sqrt(std::max(0.0, sq / (double)y.size() - mean * mean));
    if (t.n_dims == 1) {  // norm weights around 1
      EXPECT_NEAR(mean, 1.0, 0.05) << t.name;
      EXPECT_NEAR(sd, 0.1, 0.03) << t.name;
    } else {  // matrices: std within 2x of kRandomWeightStd, mean well inside it
      EXPECT_GT(sd, 0.5 * kRandomWeightStd) << t.name;
      EXPECT_LT(sd, 2.0 * kRandomWeightStd) << t.name;
      EXPECT_LT(std::fabs(mean), 0.5 * kRandomWeightStd) << t.name;
    }
  }
}

// random_like's error for a skeleton with this table, read from file `name` ("" when it succeeds).
std::string skeleton_error(const std::vector<std::string>& names, const std::vector<uint32_t>& types,
                           const std::vector<int64_t>& shapes, const std::string& name) {
  GgufWriter w;
  w.add_string_array(kSkeletonNames, names);
  w.add_u32_array(kSkeletonTypes, types);
  w.add_i64_array(kSkeletonShapes, shapes);
  const Bytes b = w.build();
  auto f = parse_bytes(b, name);
  EXPECT_TRUE(f.is_ok()) << f.message();
  if (!f) return "";
  auto r = random_like(*f, 1);
  return r.is_ok() ? "" : r.message();
}

TEST(GgufRandom, ErrorsNameTheTensorOrTheFile) {
  // A type the parser reads no model of (Q2_K) can still sit in a skeleton's table: no fill for it.
  const std::string q2k = skeleton_error({"blk.0.q2_k.weight"}, {(uint32_t)DType::Q2_K}, {256, -1, -1, -1}, "q2k.gguf");
  EXPECT_NE(q2k.find("q2k.gguf"), std::string::npos) << q2k;
  EXPECT_NE(q2k.find("blk.0.q2_k.weight"), std::string::npos) << q2k;
  EXPECT_NE(q2k.find("Q2_K"), std::string::npos) << q2k;
  // A table short of shapes; an unknown type id.
  const std::string short_table = skeleton_error({"a", "b"}, {0, 0}, {4, -1, -1, -1}, "short.gguf");
  EXPECT_NE(short_table.find("short.gguf"), std::string::npos) << short_table;
  EXPECT_NE(short_table.find("shape"), std::string::npos) << short_table;
  const std::string unknown = skeleton_error({"a"}, {99}, {32, -1, -1, -1}, "unknown.gguf");
  EXPECT_NE(unknown.find("unknown type id 99"), std::string::npos) << unknown;
  // Shapes a table must not ask for: no dimension, negative, a dimension after the end (-1), overflowing,
  // too large, or off the type's block.
  const std::vector<std::vector<int64_t>> bad = {{-1, -1, -1, -1}, {-32, 2, -1, -1}, {32, -1, 2, -1},
                                                 {int64_t{1} << 40, int64_t{1} << 40, -1, -1},
                                                 {int64_t{1} << 33, -1, -1, -1}, {48, -1, -1, -1}};
  for (const auto& shape : bad) {
    const std::string e = skeleton_error({"t"}, {(uint32_t)DType::Q8_0}, shape, "bad_shape.gguf");
    EXPECT_NE(e.find("bad_shape.gguf: skeleton tensor 't'"), std::string::npos) << shape[0] << ": " << e;
  }
}

}  // namespace
}  // namespace dspark::formats
