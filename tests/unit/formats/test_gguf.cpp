// GgufWriter -> GgufFile round trips, typed getters, open(), and the real model (RealModel*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include "gguf_test_util.h"

namespace dspark::formats {
namespace {

using testing::Bytes;
using testing::parse_bytes;

template <class T>
std::vector<T> vals(std::initializer_list<T> v) { return std::vector<T>(v); }

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.add_u8("v.u8", 250);
  w.add_i8("v.i8", -7);
  w.add_u16("v.u16", 65000);
  w.add_i16("v.i16", -32000);
  w.add_u32("v.u32", 4000000000u);
  w.add_i32("v.i32", -2000000000);
  w.add_f32("v.f32", 0.125f);
  w.add_bool("v.bool", true);
  w.add_bool("v.false", false);
  w.add_string("v.string", "h\xC3\xA9llo \"x\"\n");
  w.add_u64("v.u64", std::numeric_limits<uint64_t>::max());
  w.add_i64("v.i64", std::numeric_limits<int64_t>::min());
  w.add_f64("v.f64", 1e300);
  const Bytes b = w.build();
  auto r = parse_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const GgufFile& f = *r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size(), b.size());
  EXPECT_EQ(f.kvs().size(), 13u);
  EXPECT_EQ(f.tensors().size(), 0u);

  EXPECT_EQ(f.find("v.u8")->type, GgufType::UINT8);
  EXPECT_EQ(f.find("v.f64")->type, GgufType::FLOAT64);
  EXPECT_EQ(*f.get_uint("v.u8"), 250u);
  EXPECT_EQ(*f.get_int("v.i8"), -7);
  EXPECT_EQ(*f.get_uint("v.u16"), 65000u);
  EXPECT_EQ(*f.get_int("v.i16"), -32000);
  EXPECT_EQ(*f.get_uint("v.u32"), 4000000000u);
  EXPECT_EQ(*f.get_int("v.u32"), 4000000000);
  EXPECT_EQ(*f.get_int("v.i32"), -2000000000);
  EXPECT_EQ(*f.get_float("v.f32"), 0.125);
  EXPECT_TRUE(*f.get_bool("v.bool"));
  EXPECT_FALSE(*f.get_bool("v.false"));
  EXPECT_EQ(*f.get_string("v.string"), "h\xC3\xA9llo \"x\"\n");
  EXPECT_EQ(*f.get_uint("v.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f.get_int("v.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.get_float("v.f64"), 1e300);
  EXPECT_TRUE(f.has("v.u8"));
  EXPECT_FALSE(f.has("v.nope"));
  EXPECT_EQ(f.find("v.nope"), nullptr);
  EXPECT_EQ(describe_kv(*f.find("v.i8")), "v.i8: i8 = -7");
  EXPECT_EQ(describe_kv(*f.find("v.bool")), "v.bool: bool = true");
  EXPECT_EQ(describe_kv(*f.find("v.string")), "v.string: string = \"h\xC3\xA9llo \\\"x\\\"\\n\"");
}

TEST(GgufRoundTrip, GetterErrorsNameTheKey) {
  GgufWriter w;
  w.add_i8("neg.i8", -1);
  w.add_u64("big.u64", std::numeric_limits<uint64_t>::max());
  w.add_string("a.string", "x");
  w.add_i32("an.int", 5);
  const Bytes b = w.build();
  auto r = parse_bytes(b, "m.gguf");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const GgufFile& f = *r;
  auto expect_err = [](const auto& res, const std::string& key) {
    ASSERT_FALSE(res.is_ok());
    EXPECT_NE(res.message().find("m.gguf: key '" + key + "'"), std::string::npos) << res.message();
  };
  expect_err(f.get_uint("neg.i8"), "neg.i8");          // negative
  expect_err(f.get_int("big.u64"), "big.u64");         // > INT64_MAX
  expect_err(f.get_uint("a.string"), "a.string");      // wrong type
  expect_err(f.get_float("an.int"), "an.int");         // integers are not floats
  expect_err(f.get_bool("an.int"), "an.int");
  expect_err(f.get_string("an.int"), "an.int");
  expect_err(f.get_string_array("a.string"), "a.string");
  expect_err(f.get_float_array("an.int"), "an.int");
  expect_err(f.get_int_array("an.int"), "an.int");
  expect_err(f.get_uint("missing.key"), "missing.key");
  EXPECT_NE(f.get_uint("missing.key").message().find("not found"), std::string::npos);
  EXPECT_NE(f.get_uint("neg.i8").message().find("-1"), std::string::npos);
}

TEST(GgufRoundTrip, ArraysOfEveryElementType) {
  GgufWriter w;
  const auto u8 = vals<uint8_t>({0, 255});
  const auto i8 = vals<int8_t>({-128, 127});
  const auto u16 = vals<uint16_t>({1, 65535});
  const auto i16 = vals<int16_t>({-32768, 2});
  const auto u32 = vals<uint32_t>({3, 4294967295u});
  const auto i32 = vals<int32_t>({3, 3, 3, 3, 3, 4, 3, 1, 1, -5});
  const auto f32 = vals<float>({-1000.0f, 0.5f});
  const auto bools = vals<uint8_t>({1, 0, 1});
  const auto u64 = vals<uint64_t>({7, uint64_t{1} << 63});
  const auto i64 = vals<int64_t>({-9, 9});
  const auto f64 = vals<double>({0.25, -2.5});
  const std::vector<std::string> strs = {"<pad>", "", "\xE2\x96\x81the"};
  w.add_array("a.u8", GgufType::UINT8, u8.data(), u8.size());
  w.add_array("a.i8", GgufType::INT8, i8.data(), i8.size());
  w.add_array("a.u16", GgufType::UINT16, u16.data(), u16.size());
  w.add_array("a.i16", GgufType::INT16, i16.data(), i16.size());
  w.add_u32_array("a.u32", u32);
  w.add_i32_array("a.i32", i32);
  w.add_f32_array("a.f32", f32);
  w.add_array("a.bool", GgufType::BOOL, bools.data(), bools.size());
  w.add_string_array("a.string", strs);
  w.add_array("a.u64", GgufType::UINT64, u64.data(), u64.size());
  w.add_i64_array("a.i64", i64);
  w.add_array("a.f64", GgufType::FLOAT64, f64.data(), f64.size());
  w.add_f32_array("a.empty", std::vector<float>{});
  const Bytes b = w.build();
  auto r = parse_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const GgufFile& f = *r;
  ASSERT_EQ(f.kvs().size(), 13u);
  EXPECT_EQ(*f.get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(*f.get_int_array("a.i8"), (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(*f.get_int_array("a.u16"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(*f.get_int_array("a.i16"), (std::vector<int64_t>{-32768, 2}));
  EXPECT_EQ(*f.get_int_array("a.u32"), (std::vector<int64_t>{3, 4294967295}));
  EXPECT_EQ(*f.get_int_array("a.i32"), (std::vector<int64_t>{3, 3, 3, 3, 3, 4, 3, 1, 1, -5}));
  EXPECT_EQ(*f.get_float_array("a.f32"), f32);
  EXPECT_EQ(*f.get_float_array("a.f64"), (std::vector<float>{0.25f, -2.5f}));
  EXPECT_EQ(*f.get_string_array("a.string"), strs);
  EXPECT_EQ(*f.get_int_array("a.i64"), (std::vector<int64_t>{-9, 9}));
  EXPECT_TRUE(f.get_float_array("a.empty")->empty());
  const GgufKV* kb = f.find("a.bool");
  ASSERT_NE(kb, nullptr);
  EXPECT_TRUE(kb->is_array());
  EXPECT_EQ(kb->elem_type, GgufType::BOOL);
  EXPECT_EQ(kb->n_elems, 3u);
  EXPECT_FALSE(f.get_int_array("a.bool").is_ok());  // bools are not integers
  // u64 element above INT64_MAX cannot widen to int64.
  auto big = f.get_int_array("a.u64");
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.message().find("'a.u64'"), std::string::npos) << big.message();
  EXPECT_NE(big.message().find("element 1"), std::string::npos) << big.message();
  // Wrong element types name the key.
  EXPECT_NE(f.get_float_array("a.i32").message().find("'a.i32'"), std::string::npos);
  EXPECT_NE(f.get_string_array("a.f32").message().find("'a.f32'"), std::string::npos);
  // Zero-copy string views.
  EXPECT_EQ(f.find("a.string")->strs[2], "\xE2\x96\x81the");
  // describe_kv summarizes arrays: type, count, the first few elements.
  EXPECT_EQ(describe_kv(*f.find("a.i32")), "a.i32: array<i32>[10] = [3, 3, 3, 3, 3, 4, 3, 1, ...]");
  EXPECT_EQ(describe_kv(*f.find("a.string")), "a.string: array<string>[3] = [\"<pad>\", \"\", \"\xE2\x96\x81the\"]");
  EXPECT_EQ(describe_kv(*f.find("a.f64")), "a.f64: array<f64>[2] = [0.25, -2.5]");
  EXPECT_EQ(describe_kv(*f.find("a.empty")), "a.empty: array<f32>[0] = []");
}

TEST(GgufRoundTrip, TensorsShapesAndData) {
  GgufWriter w = testing::small_fixture();
  const Bytes b = w.build();
  auto r = parse_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const GgufFile& f = *r;
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* a = f.find_tensor("norm.weight");
  const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_EQ(a->n_dims, 1);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->ne[0], 8);
  EXPECT_EQ(a->ne[1], 1);
  EXPECT_EQ(a->ne[3], 1);
  EXPECT_EQ(a->n_elements, 8);
  EXPECT_EQ(a->n_bytes, 32u);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(q->n_dims, 2);
  EXPECT_EQ(q->type, DType::Q8_0);
  EXPECT_EQ(q->ne[0], 32);
  EXPECT_EQ(q->ne[1], 2);
  EXPECT_EQ(q->n_bytes, 68u);
  EXPECT_EQ(q->offset, 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.data_offset() + 32 + 68, b.size());
  EXPECT_EQ(f.tensor_data(*a)[0], 1);
  EXPECT_EQ(f.tensor_data(*a)[31], 32);
  EXPECT_EQ(f.tensor_data(*q)[0], 200);
  EXPECT_EQ(f.tensor_data(*q)[67], 200 - 67);
  EXPECT_EQ(*f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(*f.get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{3, 3, 1}));
}

TEST(GgufRoundTrip, CustomAlignmentAndZeroSizedTensor) {
  GgufWriter w;
  w.set_alignment(64);
  std::vector<uint8_t> a(20 * 2, 7), c(4, 9);
  const int64_t ne_a[] = {20}, ne_z[] = {0, 5}, ne_c[] = {1, 1, 1, 1};
  ASSERT_TRUE(w.add_tensor("a", DType::F16, ne_a, a.data(), a.size()).is_ok());
  ASSERT_TRUE(w.add_tensor("z", DType::F32, ne_z, nullptr, 0).is_ok());
  ASSERT_TRUE(w.add_tensor("c", DType::F32, ne_c, c.data(), c.size()).is_ok());
  const Bytes b = w.build();
  auto r = parse_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->alignment(), 64u);
  EXPECT_EQ(*r->get_uint("general.alignment"), 64u);
  EXPECT_EQ(r->data_offset() % 64, 0u);
  for (const GgufTensorInfo& t : r->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
  EXPECT_EQ(r->find_tensor("z")->n_bytes, 0u);
  EXPECT_EQ(r->find_tensor("c")->n_dims, 4);
  EXPECT_EQ(r->tensor_data(*r->find_tensor("c"))[3], 9);
}

TEST(GgufRoundTrip, VersionTwoIsAccepted) {
  Bytes b = testing::small_fixture().build();
  testing::patch32(b, 4, 2);
  auto r = parse_bytes(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->version(), 2u);
}

TEST(GgufWriterTest, CheckedAddTensorRejectsBadInput) {
  GgufWriter w;
  std::vector<uint8_t> d(34);
  const int64_t ne[] = {32}, bad_ne[] = {16};
  EXPECT_FALSE(w.add_tensor("x", DType::Q8_0, ne, d.data(), 33).is_ok());      // size mismatch
  EXPECT_FALSE(w.add_tensor("x", DType::Q8_0, bad_ne, d.data(), 17).is_ok());  // ne0 % 32
  EXPECT_FALSE(w.add_tensor("x", DType::Q8_K, ne, d.data(), 34).is_ok());      // unsupported
  EXPECT_TRUE(w.add_tensor("x", DType::Q8_0, ne, d.data(), 34).is_ok());
  EXPECT_FALSE(w.add_tensor("x", DType::Q8_0, ne, d.data(), 34).is_ok());      // duplicate
  EXPECT_EQ(w.n_tensors(), 1u);
}

TEST(GgufOpen, MapsAFileAndReportsErrorsWithThePath) {
  char tmpl[] = "/tmp/dspark_gguf_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  ASSERT_TRUE(testing::small_fixture().write_file(path).is_ok());
  {
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.is_ok()) << r.message();
    GgufFile moved = std::move(*r);
    EXPECT_EQ(moved.path(), path);
    EXPECT_EQ(moved.tensors().size(), 2u);
    EXPECT_EQ(moved.tensor_data(*moved.find_tensor("norm.weight"))[0], 1);
    EXPECT_EQ(*moved.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<pad>", "<eos>", "a"}));
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);  // empty file
  auto empty = GgufFile::open(path);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.message().find(path), std::string::npos) << empty.message();
  std::remove(path.c_str());
  auto missing = GgufFile::open(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find(path), std::string::npos) << missing.message();
  auto dir = GgufFile::open("/tmp");
  EXPECT_FALSE(dir.is_ok());
}

// The fuzzer seeds (tests/fuzz/gen_corpus.py, an independent Python writer) are all valid.
TEST(GgufCorpus, FuzzSeedsParse) {
  const std::filesystem::path dir = std::filesystem::path(DSPARK_SOURCE_DIR) / "tests/fuzz/corpus";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto r = GgufFile::open(e.path().string());
    EXPECT_TRUE(r.is_ok()) << r.message();
    ++n;
  }
  EXPECT_GE(n, 5u);
}

// The real Gemma 3 270M Q4_K_M file, from $DSPARK_MODEL.
TEST(RealModel, Gemma3_270M_Q4_K_M_Header) {
  const char* path = std::getenv("DSPARK_MODEL");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "DSPARK_MODEL is not set (path to gemma-3-270m GGUF)";
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const GgufFile& f = *r;
  EXPECT_EQ(*f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.tensors().size(), 236u);
  size_t total = 0;
  for (const GgufTensorInfo& t : f.tensors()) total += t.n_bytes;
  EXPECT_EQ(total, 246587904u);
  EXPECT_EQ(*f.get_uint("gemma3.block_count"), 18u);
  EXPECT_EQ(*f.get_string("tokenizer.ggml.model"), "llama");
  const GgufKV* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->n_elems, 262144u);
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne[0], 640);
  EXPECT_EQ(emb->ne[1], 262144);
  EXPECT_EQ(emb->type, DType::Q8_0);
  for (const GgufKV& kv : f.kvs()) EXPECT_FALSE(describe_kv(kv).empty());
}

}  // namespace
}  // namespace dspark::formats
