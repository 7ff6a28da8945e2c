// One test per GGUF validation rule (rules 1-10 as listed in src/formats/gguf.h): corrupted buffers must fail
// cleanly with a message naming the file, the offset and the key or tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf_test_util.h"

namespace dspark::formats {
namespace {

using testing::Bytes;
using testing::cat;
using testing::expect_parse_error;
using testing::le32;
using testing::le64;
using testing::str_bytes;

constexpr uint64_t kHuge = uint64_t{1} << 40;

// Header (magic, version 3, counts) followed by `body`.
Bytes raw_file(uint64_t n_tensors, uint64_t n_kvs, const Bytes& body) {
  return cat({le32(0x46554747), le32(3), le64(n_tensors), le64(n_kvs), body});
}

// Rule 1-3: every strict prefix of a valid file is rejected without reading past it (each prefix is
// its own heap allocation, so ASan builds catch any overread).
TEST(GgufValidation, EveryTruncationFailsCleanly) {
  const Bytes full = testing::small_fixture().build();
  ASSERT_TRUE(testing::parse_bytes(full).is_ok());
  for (size_t len = 0; len < full.size(); ++len) {
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    auto r = GgufFile::parse(prefix.data(), prefix.size(), "cut.gguf");
    ASSERT_FALSE(r.is_ok()) << "prefix of " << len << " bytes parsed";
    EXPECT_EQ(r.message().rfind("cut.gguf: ", 0), 0u) << r.message();
  }
  EXPECT_FALSE(GgufFile::parse(nullptr, 0, "null.gguf").is_ok());
}

TEST(GgufValidation, BadMagic) {
  Bytes b = testing::small_fixture().build();
  b[0] = 'X';
  expect_parse_error(b, {"offset 0", "bad magic"});
}

TEST(GgufValidation, TooSmallForHeader) {
  const Bytes b = cat({le32(0x46554747), le32(3), le64(0)});
  expect_parse_error(b, {"too small"});
}

TEST(GgufValidation, VersionOneZeroFourAndByteSwapped) {
  Bytes b = testing::small_fixture().build();
  testing::patch32(b, 4, 1);
  expect_parse_error(b, {"offset 4", "version 1"});
  testing::patch32(b, 4, 0);
  expect_parse_error(b, {"offset 4", "byte-swapped"});
  testing::patch32(b, 4, 4);
  expect_parse_error(b, {"offset 4", "version 4"});
  testing::patch32(b, 4, 0x03000000);  // a v3 file written big-endian
  expect_parse_error(b, {"offset 4", "byte-swapped"});
}

TEST(GgufValidation, HugeAndNegativeCounts) {
  Bytes b = testing::small_fixture().build();
  testing::patch64(b, 16, kHuge);
  expect_parse_error(b, {"offset 16", "metadata kv count"});
  b = testing::small_fixture().build();
  testing::patch64(b, 8, kHuge);
  expect_parse_error(b, {"offset 8", "tensor count"});
  b = testing::small_fixture().build();
  testing::patch64(b, 8, ~uint64_t{0});
  expect_parse_error(b, {"tensor count", "negative"});
  b = testing::small_fixture().build();
  testing::patch64(b, 16, uint64_t{1} << 63);
  expect_parse_error(b, {"kv count", "negative"});
}

TEST(GgufValidation, HugeStringLength) {
  GgufWriter w;
  w.add_raw_kv("big.str", 8, cat({le64(kHuge), str_bytes("abc")}));
  expect_parse_error(w.build(), {"'big.str'", "string value length 1099511627776"});
  // Over the 1 GiB cap even before comparing with the file size.
  GgufWriter w2;
  w2.add_raw_kv("cap.str", 8, cat({le64((uint64_t{1} << 30) + 1), Bytes(16)}));
  expect_parse_error(w2.build(), {"'cap.str'", "limit"});
  // A key whose length runs past the end of the file.
  expect_parse_error(raw_file(0, 1, cat({le64(kHuge), Bytes(20)})), {"offset 24", "key of metadata pair 0"});
  // String elements of an array.
  GgufWriter w3;
  w3.add_raw_kv("arr.str", 9, cat({le32(8), le64(2), str_bytes("ok"), le64(kHuge)}));
  expect_parse_error(w3.build(), {"'arr.str'", "element 1"});
}

TEST(GgufValidation, HugeArrayCounts) {
  GgufWriter w;
  w.add_raw_kv("big.arr", 9, cat({le32(4), le64((uint64_t{1} << 30) + 1), Bytes(64)}));
  expect_parse_error(w.build(), {"'big.arr'", "array count 1073741825 exceeds the limit"});
  GgufWriter w2;
  w2.add_raw_kv("fit.arr", 9, cat({le32(10), le64(1000), Bytes(64)}));  // 1000 u64 in 64 bytes
  expect_parse_error(w2.build(), {"'fit.arr'", "cannot fit"});
  GgufWriter w3;
  w3.add_raw_kv("str.arr", 9, cat({le32(8), le64(100), Bytes(64)}));  // 100 strings need >= 800 bytes
  expect_parse_error(w3.build(), {"'str.arr'", "cannot fit"});
}

TEST(GgufValidation, NestedArrayRejected) {
  GgufWriter w;
  w.add_raw_kv("nest", 9, cat({le32(9), le64(1), le32(4), le64(1), le32(7)}));
  expect_parse_error(w.build(), {"'nest'", "nested arrays"});
}

TEST(GgufValidation, InvalidValueAndElementTypes) {
  GgufWriter w;
  w.add_raw_kv("bad.type", 13, le64(0));
  expect_parse_error(w.build(), {"'bad.type'", "value type 13"});
  GgufWriter w2;
  w2.add_raw_kv("bad.elem", 9, cat({le32(0xFFFFFFFF), le64(0)}));
  expect_parse_error(w2.build(), {"'bad.elem'", "array element type 4294967295"});
}

TEST(GgufValidation, DuplicateAndEmptyKeys) {
  GgufWriter w;
  w.add_u32("gemma3.block_count", 18);
  w.add_string("x", "y");
  w.add_u32("gemma3.block_count", 18);
  expect_parse_error(w.build(), {"'gemma3.block_count'", "duplicate key"});
  GgufWriter w2;
  w2.add_u32("", 1);
  expect_parse_error(w2.build(), {"offset 24", "empty key"});
  GgufWriter w3;
  w3.add_u32(std::string(70000, 'k'), 1);  // keys are at most 65535 bytes
  expect_parse_error(w3.build(), {"offset 24", "limit"});
}

TEST(GgufValidation, BadAlignment) {
  for (uint32_t a : {0u, 24u, 3u}) {
    GgufWriter w;
    w.add_u32("general.alignment", a);
    expect_parse_error(w.build(), {"'general.alignment'", "power of two"});
  }
  GgufWriter w;
  w.add_u64("general.alignment", 32);
  expect_parse_error(w.build(), {"'general.alignment'", "expected u32"});
}

TEST(GgufValidation, TensorNames) {
  std::vector<uint8_t> d(4);
  GgufWriter w;
  w.add_tensor_raw("dup.weight", 0, {1}, d);
  w.add_tensor_raw("dup.weight", 0, {1}, d);
  expect_parse_error(w.build(), {"'dup.weight'", "duplicate tensor name"});
  const std::string long_name(64, 'n');
  GgufWriter w2;
  w2.add_tensor_raw(long_name, 0, {1}, d);
  expect_parse_error(w2.build(), {"'" + long_name + "'", "64 bytes"});
  GgufWriter w3;
  w3.add_tensor_raw(std::string(63, 'n'), 0, {1}, d);  // 63 bytes is the longest allowed
  EXPECT_TRUE(testing::parse_bytes(w3.build()).is_ok());
  GgufWriter w4;
  w4.add_tensor_raw("", 0, {1}, d);
  expect_parse_error(w4.build(), {"tensor 0", "empty name"});
}

TEST(GgufValidation, TooManyDims) {
  GgufWriter w;
  w.add_tensor_raw("blk.0.five_d", 0, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4));
  expect_parse_error(w.build(), {"'blk.0.five_d'", "n_dims 5"});
}

TEST(GgufValidation, NegativeAndOverflowingDims) {
  GgufWriter w;
  w.add_tensor_raw("neg", 0, {4, -1}, {});
  expect_parse_error(w.build(), {"'neg'", "dimension 1 is negative"});
  GgufWriter w2;
  w2.add_tensor_raw("ovf", 0, {int64_t{1} << 40, int64_t{1} << 40}, {});
  expect_parse_error(w2.build(), {"'ovf'", "overflows int64"});
  GgufWriter w3;  // fits int64 elements but not size_t bytes: 2^62 f32 = 2^64 bytes
  w3.add_tensor_raw("bytes", 0, {int64_t{1} << 31, int64_t{1} << 31}, {});
  expect_parse_error(w3.build(), {"'bytes'", "overflows size_t"});
}

TEST(GgufValidation, UnknownAndUnsupportedTypes) {
  GgufWriter w;
  w.add_tensor_raw("blk.7.attn_v.weight", 20, {256}, std::vector<uint8_t>(256));
  expect_parse_error(w.build(), {"tensor 'blk.7.attn_v.weight': type 20 (unknown) not supported"});
  GgufWriter w2;
  w2.add_tensor_raw("q8k", 15, {256}, std::vector<uint8_t>(292));
  expect_parse_error(w2.build(), {"tensor 'q8k': type 15 (Q8_K) not supported"});
  GgufWriter w3;
  w3.add_tensor_raw("removed", 4, {32}, std::vector<uint8_t>(20));  // old Q4_2
  expect_parse_error(w3.build(), {"'removed'", "type 4 (unknown)"});
}

TEST(GgufValidation, Ne0NotAMultipleOfTheBlock) {
  GgufWriter w;
  w.add_tensor_raw("blk.0.ffn_down.weight", 12, {640, 2}, std::vector<uint8_t>(2 * 360));  // Q4_K, 256-blocks
  expect_parse_error(w.build(), {"'blk.0.ffn_down.weight'", "ne0 640", "block size 256"});
}

TEST(GgufValidation, MisalignedOffset) {
  GgufWriter w;
  w.add_tensor_raw("a", 0, {4}, std::vector<uint8_t>(16));
  w.add_tensor_raw("mis", 0, {4}, std::vector<uint8_t>(16), 40);
  expect_parse_error(w.build(), {"'mis'", "data offset 40", "alignment 32"});
}

TEST(GgufValidation, DataPastEndOfFile) {
  Bytes b = testing::small_fixture().build();
  b.pop_back();
  expect_parse_error(b, {"'blk.0.attn_q.weight'", "past the end of the file"});
  GgufWriter w;  // an offset near 2^64 must not wrap around
  w.add_tensor_raw("far", 0, {8}, {}, ~uint64_t{31});
  w.add_tensor_raw("pad", 0, {8}, std::vector<uint8_t>(32), 0);
  expect_parse_error(w.build(), {"'far'", "past the end"});
}

TEST(GgufValidation, OverlappingTensors) {
  GgufWriter w;
  w.add_tensor_raw("first", 0, {16}, std::vector<uint8_t>(64), 0);
  w.add_tensor_raw("second", 0, {16}, std::vector<uint8_t>(64), 32);
  expect_parse_error(w.build(), {"'second'", "overlaps tensor 'first'"});
  // Out-of-order but disjoint offsets are fine.
  GgufWriter ok;
  ok.add_tensor_raw("late", 0, {8}, std::vector<uint8_t>(32), 64);
  ok.add_tensor_raw("early", 0, {8}, std::vector<uint8_t>(32), 0);
  EXPECT_TRUE(testing::parse_bytes(ok.build()).is_ok());
}

TEST(GgufValidation, ErrorsCarryTheByteOffset) {
  GgufWriter w;
  w.add_u32("a", 1);                                           // 8 + 1 + 4 + 4 = 17 bytes at 24
  w.add_raw_kv("b", 9, cat({le32(9), le64(0)}));                // nested array at 41
  expect_parse_error(w.build(), {"offset 54", "'b'"});          // element type follows key + type
}

}  // namespace
}  // namespace dspark::formats
