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

TEST(GgufRandom, ErrorsNameTheTensorOrTheFile) {
  // A type the parser reads no model of (Q2_K) can still sit in a skeleton's table: no fill for it.
  GgufWriter w;
  w.add_string_array(kSkeletonNames, std::vector<std::string>{"blk.0.q2_k.weight"});
  w.add_u32_array(kSkeletonTypes, std::vector<uint32_t>{(uint32_t)DType::Q2_K});
  w.add_i64_array(kSkeletonShapes, std::vector<int64_t>{256, 1, 1, 1});
  const Bytes b = w.build();
  auto f = parse_bytes(b, "q2k.gguf");
  ASSERT_TRUE(f.is_ok()) << f.message();
  auto r = random_like(*f, 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("q2k.gguf"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("blk.0.q2_k.weight"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("Q2_K"), std::string::npos) << r.message();

  GgufWriter s;  // a skeleton whose table is short of shapes
  s.add_string_array(kSkeletonNames, std::vector<std::string>{"a", "b"});
  s.add_u32_array(kSkeletonTypes, std::vector<uint32_t>{0, 0});
  s.add_i64_array(kSkeletonShapes, std::vector<int64_t>{4, 1, 1, 1});
  const Bytes sb = s.build();
  auto sf = parse_bytes(sb, "short.gguf");
  ASSERT_TRUE(sf.is_ok());
  auto sr = random_like(*sf, 1);
  ASSERT_FALSE(sr.is_ok());
  EXPECT_NE(sr.message().find("short.gguf"), std::string::npos) << sr.message();
  EXPECT_NE(sr.message().find("shape"), std::string::npos) << sr.message();

  GgufWriter u;  // an unknown type id in the table
  u.add_string_array(kSkeletonNames, std::vector<std::string>{"a"});
  u.add_u32_array(kSkeletonTypes, std::vector<uint32_t>{99});
  u.add_i64_array(kSkeletonShapes, std::vector<int64_t>{32, 1, 1, 1});
  const Bytes ub = u.build();
  auto uf = parse_bytes(ub, "unknown.gguf");
  ASSERT_TRUE(uf.is_ok());
  auto ur = random_like(*uf, 1);
  ASSERT_FALSE(ur.is_ok());
  EXPECT_NE(ur.message().find("unknown type id 99"), std::string::npos) << ur.message();

  // Shapes a table must not ask for: negative, overflowing, too large, or off the type's block.
  const std::vector<std::vector<int64_t>> bad = {
      {-32, 1, 1, 1}, {int64_t{1} << 40, int64_t{1} << 40, 1, 1}, {int64_t{1} << 33, 1, 1, 1}, {48, 1, 1, 1}};
  for (const auto& shape : bad) {
    GgufWriter v;
    v.add_string_array(kSkeletonNames, std::vector<std::string>{"t"});
    v.add_u32_array(kSkeletonTypes, std::vector<uint32_t>{(uint32_t)DType::Q8_0});
    v.add_i64_array(kSkeletonShapes, shape);
    const Bytes vb = v.build();
    auto vf = parse_bytes(vb, "bad_shape.gguf");
    ASSERT_TRUE(vf.is_ok());
    auto vr = random_like(*vf, 1);
    ASSERT_FALSE(vr.is_ok()) << shape[0];
    EXPECT_NE(vr.message().find("bad_shape.gguf: skeleton tensor 't'"), std::string::npos) << vr.message();
  }
}

}  // namespace
}  // namespace dspark::formats
