// safetensors reader / writer / model directory: round trips, f32 conversion, and one test per
// validation rule; every rejected input must fail with a message naming the file and the
// tensor, key or offset.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "core/f16.h"
#include "formats/safetensors.h"

namespace dspark::formats {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dspark_st_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

template <class T>
Bytes to_bytes(std::initializer_list<T> v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

// Raw file: u64 header length, `header` verbatim, then `data`.
Bytes raw_file(const std::string& header, const Bytes& data = {}) {
  // Sized once, then filled (GCC 12 reports a false -Warray-bounds for insert() after the memcpy).
  Bytes b(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::copy(header.begin(), header.end(), b.begin() + 8);
  std::copy(data.begin(), data.end(), b.begin() + 8 + (std::ptrdiff_t)header.size());
  return b;
}

Result<SafetensorsFile> parse(const Bytes& b, const std::string& name = "t.safetensors") {
  return SafetensorsFile::parse(b.data(), b.size(), name);
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void write_text(const std::string& path, const std::string& s) { std::ofstream(path) << s; }

// The parse must fail, the message must start with the file name and contain every fragment.
void expect_error(const Bytes& b, std::initializer_list<const char*> fragments) {
  auto r = parse(b, "bad.safetensors");
  ASSERT_FALSE(r.is_ok()) << "parsed although expected to fail";
  EXPECT_EQ(r.message().rfind("bad.safetensors: ", 0), 0u) << r.message();
  for (const char* f : fragments) EXPECT_NE(r.message().find(f), std::string::npos) << "'" << f << "' not in: " << r.message();
}

std::vector<StWriteTensor> all_dtype_tensors() {
  std::vector<StWriteTensor> t;
  t.push_back({"f64", StDType::kF64, {2}, to_bytes<double>({1.5, -2.25})});
  t.push_back({"f32", StDType::kF32, {2, 3}, to_bytes<float>({0, 1, 2, 3, 4, 5})});
  t.push_back({"f16", StDType::kF16, {3}, to_bytes<uint16_t>({0x3c00, 0xc000, 0x3800})});
  t.push_back({"bf16", StDType::kBF16, {1, 2}, to_bytes<uint16_t>({0x3f80, 0xc040})});
  t.push_back({"i64", StDType::kI64, {1}, to_bytes<int64_t>({-(int64_t{1} << 40)})});
  t.push_back({"i32", StDType::kI32, {2, 1}, to_bytes<int32_t>({-7, 9})});
  t.push_back({"i16", StDType::kI16, {3}, to_bytes<int16_t>({-1, 2, -3})});
  t.push_back({"i8", StDType::kI8, {5}, to_bytes<int8_t>({-128, 0, 1, 2, 127})});
  t.push_back({"u8", StDType::kU8, {1, 1, 3}, to_bytes<uint8_t>({0, 200, 255})});
  t.push_back({"bool", StDType::kBool, {2}, to_bytes<uint8_t>({1, 0})});
  t.push_back({"scalar", StDType::kF32, {}, to_bytes<float>({42.0f})});
  t.push_back({"empty", StDType::kF32, {0, 4}, {}});
  t.push_back({"empty.bf16", StDType::kBF16, {3, 0}, {}});
  t.push_back({"unicode.\xc3\xa9\xe2\x82\xac", StDType::kU8, {1}, to_bytes<uint8_t>({7})});
  return t;
}

// ---- dtype table ----

TEST(Safetensors, DTypeTable) {
  const StDType all[] = {StDType::kF64, StDType::kF32, StDType::kF16, StDType::kBF16, StDType::kI64,
                         StDType::kI32, StDType::kI16, StDType::kI8,  StDType::kU8,   StDType::kBool, StDType::kU32};
  const size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 4};
  const char* names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U32"};
  for (int i = 0; i < kStDTypeCount; ++i) {
    EXPECT_EQ(st_dtype_size(all[i]), sizes[i]);
    EXPECT_STREQ(st_dtype_name(all[i]), names[i]);
    StDType back{};
    ASSERT_TRUE(st_dtype_from_name(names[i], back));
    EXPECT_EQ(back, all[i]);
  }
  StDType x{};
  EXPECT_FALSE(st_dtype_from_name("f32", x));
  EXPECT_FALSE(st_dtype_from_name("F8_E4M3", x));
  EXPECT_STREQ(st_dtype_name(static_cast<StDType>(99)), "invalid");
  EXPECT_EQ(st_dtype_size(static_cast<StDType>(99)), 0u);
}

// ---- round trips ----

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  const auto in = all_dtype_tensors();
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "quote \" and \xc3\xa9"}};
  ASSERT_TRUE(write_safetensors(path, in, meta).is_ok());

  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const SafetensorsFile& f = *r;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.data_offset() % 8, 0u) << "header is padded to a multiple of 8";
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), in.size());
  for (size_t i = 1; i < f.tensors().size(); ++i) EXPECT_LT(f.tensors()[i - 1].name, f.tensors()[i].name);
  for (const StWriteTensor& w : in) {
    const StTensorInfo* t = f.find(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->dtype, w.dtype) << w.name;
    EXPECT_EQ(t->shape, w.shape) << w.name;
    EXPECT_EQ(t->n_bytes, w.bytes.size()) << w.name;
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    EXPECT_EQ(t->n_elements, n) << w.name;
    if (!w.bytes.empty()) {
      EXPECT_EQ(std::memcmp(f.data(*t), w.bytes.data(), w.bytes.size()), 0) << w.name;
    }
  }
  EXPECT_EQ(f.find("scalar")->n_elements, 1);
  EXPECT_TRUE(f.find("scalar")->shape.empty());
  EXPECT_EQ(f.find("empty")->n_elements, 0);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.find(""), nullptr);

  // parse() on the same bytes agrees, and a moved-from-file keeps its tensor pointers.
  std::ifstream is(path, std::ios::binary);
  const Bytes bytes((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  auto built = build_safetensors(in, meta);
  ASSERT_TRUE(built.is_ok());
  EXPECT_EQ(*built, bytes);
  auto p = parse(bytes);
  ASSERT_TRUE(p.is_ok()) << p.message();
  const StTensorInfo* before = p->find("f32");
  SafetensorsFile moved = std::move(p).value();
  EXPECT_EQ(moved.find("f32"), before);
  EXPECT_EQ(moved.data(*before), bytes.data() + moved.data_offset() + before->begin);
}

TEST(Safetensors, EmptyFileRoundTrip) {
  auto b = build_safetensors({}, {});
  ASSERT_TRUE(b.is_ok());
  auto r = parse(*b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->tensors().empty());
  EXPECT_TRUE(r->metadata().empty());
  EXPECT_EQ(b->size() % 8, 0u);
}

// The example file of the reference implementation's serialization test, written by hand.
TEST(Safetensors, ReadsReferenceLayout) {
  const Bytes data = to_bytes<float>({0, 1, 2, 3, 4, 5});
  const Bytes b = raw_file(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", data);
  auto r = parse(b);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const StTensorInfo* t = r->find("attn.0");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(t->begin, 0u);
  EXPECT_EQ(t->n_bytes, 24u);
  auto v = r->read_f32("attn.0", std::vector<int64_t>{1, 2, 3});
  ASSERT_TRUE(v.is_ok()) << v.message();
  EXPECT_EQ(*v, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Our writer produces the same bytes for the same tensor (no metadata, 64-byte header).
  auto w = build_safetensors({{"attn.0", StDType::kF32, {1, 2, 3}, data}});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(*w, b);
}

TEST(Safetensors, AcceptsHolesPaddingAndUnknownFields) {
  // Tensor b starts 4 bytes after a ends, 4 unused bytes at the end, trailing whitespace in the
  // header, an unknown extra field, and __metadata__ null.
  const std::string h = R"({"__metadata__":null,"b":{"dtype":"U8","shape":[2],"data_offsets":[8,10],"x":[1,{}]},)"
                        R"("a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[0],)"
                        R"("data_offsets":[2,2]}}   )"
                        "\n\t";
  auto r = parse(raw_file(h, Bytes(14, 1)));
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->tensors()[0].name, "a");
  EXPECT_EQ(r->tensors()[1].name, "b");
  EXPECT_TRUE(r->metadata().empty());
}

TEST(Safetensors, OpenErrorsNameThePath) {
  TempDir dir;
  auto r = SafetensorsFile::open(dir.file("missing.safetensors"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("missing.safetensors: cannot open"), std::string::npos) << r.message();
  auto d = SafetensorsFile::open(dir.path());
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.message().find("not a regular file"), std::string::npos) << d.message();
  write_bytes(dir.file("empty.safetensors"), {});
  auto e = SafetensorsFile::open(dir.file("empty.safetensors"));
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("empty.safetensors: offset 0: file truncated"), std::string::npos) << e.message();
  write_bytes(dir.file("bad.safetensors"), raw_file("[]"));
  auto b = SafetensorsFile::open(dir.file("bad.safetensors"));
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("bad.safetensors: offset 8: header JSON is an array"), std::string::npos) << b.message();
}

// The fuzz seeds (tests/fuzz/corpus_safetensors) are all valid files.
TEST(Safetensors, FuzzSeedsParse) {
  const fs::path dir = fs::path(DSPARK_SOURCE_DIR) / "tests/fuzz/corpus_safetensors";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto r = SafetensorsFile::open(e.path().string());
    EXPECT_TRUE(r.is_ok()) << r.message();
    ++n;
  }
  EXPECT_GE(n, 5);
}

// ---- writer ----

TEST(SafetensorsWriter, RejectsBadTensorsWithoutPartialOutput) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  auto expect_write_error = [&](std::vector<StWriteTensor> t, const char* fragment,
                                std::map<std::string, std::string> meta = {}) {
    Status st = write_safetensors(path, t, meta);
    ASSERT_FALSE(st.is_ok()) << fragment;
    EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::is_empty(dir.path())) << "temporary file left behind";
  };
  expect_write_error({{"w", StDType::kF32, {2, 2}, Bytes(12)}}, "tensor 'w': F32 [2, 2] needs 16 bytes, got 12");
  expect_write_error({{"w", StDType::kF32, {-1}, {}}}, "tensor 'w': negative dimension");
  expect_write_error({{"w", StDType::kU8, {1}, Bytes(1)}, {"w", StDType::kU8, {1}, Bytes(1)}},
                     "tensor 'w': duplicate name");
  expect_write_error({{"__metadata__", StDType::kU8, {1}, Bytes(1)}}, "reserved");
  expect_write_error({{"", StDType::kU8, {1}, Bytes(1)}}, "empty name");
  expect_write_error({{"bad\xff", StDType::kU8, {1}, Bytes(1)}}, "not valid UTF-8");
  expect_write_error({{"w", StDType::kU8, {int64_t{1} << 62, 8}, Bytes(1)}}, "tensor 'w': shape");
  expect_write_error({{"w", static_cast<StDType>(42), {1}, Bytes(1)}}, "invalid dtype");
  expect_write_error({}, "metadata value of 'k'", {{"k", "\xc0\x80"}});

  // A failed write leaves an existing file untouched.
  ASSERT_TRUE(write_safetensors(path, {{"ok", StDType::kU8, {1}, Bytes{5}}}).is_ok());
  ASSERT_FALSE(write_safetensors(path, {{"w", StDType::kF32, {2}, Bytes(3)}}).is_ok());
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_NE(r->find("ok"), nullptr);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  Status nodir = write_safetensors(dir.file("no/such/dir.safetensors"), {});
  ASSERT_FALSE(nodir.is_ok());
  EXPECT_NE(nodir.message().find("no/such/dir.safetensors: "), std::string::npos) << nodir.message();
}

// ---- f32 conversion ----

TEST(Safetensors, ReadF32ConvertsHalfTypes) {
  const std::vector<float> want = {1.0f, -2.0f, 0.5f, 1024.0f, 0.0f, -0.25f};
  std::vector<uint16_t> h, bf;
  for (float v : want) {
    h.push_back(fp32_to_fp16(v));
    bf.push_back(fp32_to_bf16(v));
  }
  Bytes hb(h.size() * 2), bb(bf.size() * 2), fb(want.size() * 4);
  std::memcpy(hb.data(), h.data(), hb.size());
  std::memcpy(bb.data(), bf.data(), bb.size());
  std::memcpy(fb.data(), want.data(), fb.size());
  // An odd-sized leading tensor makes the others unaligned.
  auto b = build_safetensors({{"a.pad", StDType::kU8, {3}, Bytes(3)},
                              {"h", StDType::kF16, {2, 3}, hb},
                              {"bf", StDType::kBF16, {2, 3}, bb},
                              {"f", StDType::kF32, {2, 3}, fb},
                              {"i", StDType::kI32, {2, 3}, Bytes(24)}});
  ASSERT_TRUE(b.is_ok()) << b.message();
  auto r = parse(*b, "model.safetensors");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const std::vector<int64_t> shape = {2, 3};
  for (const char* name : {"h", "bf", "f"}) {
    auto v = r->read_f32(name, shape);
    ASSERT_TRUE(v.is_ok()) << v.message();
    EXPECT_EQ(*v, want) << name;  // all values are exact in f16 and bf16
  }
  auto bad_shape = r->read_f32("f", std::vector<int64_t>{3, 2});
  ASSERT_FALSE(bad_shape.is_ok());
  EXPECT_EQ(bad_shape.message(), "model.safetensors: tensor 'f' has shape [2, 3], expected [3, 2]");
  auto bad_rank = r->read_f32("f", std::vector<int64_t>{6});
  ASSERT_FALSE(bad_rank.is_ok());
  EXPECT_EQ(bad_rank.message(), "model.safetensors: tensor 'f' has shape [2, 3], expected [6]");
  auto bad_type = r->read_f32("i", shape);
  ASSERT_FALSE(bad_type.is_ok());
  EXPECT_EQ(bad_type.message(), "model.safetensors: tensor 'i' has dtype I32, expected F32, F16 or BF16");
  auto missing = r->read_f32("nope", shape);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.message(), "model.safetensors: tensor 'nope' not found");
}

// ---- model directories ----

TEST(SafetensorsModel, SingleFileDirectory) {
  TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"), all_dtype_tensors()).is_ok());
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_EQ(m->dir(), dir.path() + "/");
  EXPECT_EQ(m->files().size(), 1u);
  EXPECT_EQ(m->n_tensors(), all_dtype_tensors().size());
  const StTensorInfo* t = m->find("f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(m->data(*t), m->data("f32"));
  EXPECT_EQ(m->file_of(*t), &m->files()[0]);
  auto v = m->read_f32("f32", std::vector<int64_t>{2, 3});
  ASSERT_TRUE(v.is_ok()) << v.message();
  EXPECT_EQ(*v, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  auto bad = m->read_f32("f32", std::vector<int64_t>{2, 4});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.message(), dir.path() + "/model.safetensors: tensor 'f32' has shape [2, 3], expected [2, 4]");
  auto missing = m->read_f32("fc.weight", std::vector<int64_t>{1});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.message(), dir.path() + "/: tensor 'fc.weight' not found");
  EXPECT_EQ(m->find("fc.weight"), nullptr);
  EXPECT_EQ(m->data("fc.weight"), nullptr);
  StTensorInfo foreign = *t;
  EXPECT_EQ(m->data(foreign), nullptr);
}

// Writes two shards and their index; returns the tensors by name.
void write_sharded(const TempDir& dir, const std::string& extra_index_entries = "") {
  ASSERT_TRUE(write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                                {{"embed.weight", StDType::kBF16, {2, 2}, to_bytes<uint16_t>({0x3f80, 0x4000, 0x4040, 0x4080})},
                                 {"layer.0.w", StDType::kF32, {2}, to_bytes<float>({5, 6})}})
                  .is_ok());
  ASSERT_TRUE(write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                                {{"layer.1.w", StDType::kF16, {1}, to_bytes<uint16_t>({0x3c00})},
                                 {"extra.unlisted", StDType::kU8, {1}, Bytes{9}}})
                  .is_ok());
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata": {"total_size": 26}, "weight_map": {)"
             R"("embed.weight": "model-00001-of-00002.safetensors",)"
             R"("layer.0.w": "model-00001-of-00002.safetensors",)" +
                 extra_index_entries + R"("layer.1.w": "model-00002-of-00002.safetensors"}})");
}

TEST(SafetensorsModel, ShardedRoundTrip) {
  TempDir dir;
  write_sharded(dir);
  auto m = SafetensorsModel::open_dir(dir.path() + "/");
  ASSERT_TRUE(m.is_ok()) << m.message();
  EXPECT_EQ(m->files().size(), 2u);
  EXPECT_EQ(m->tensor_names(),
            (std::vector<std::string>{"embed.weight", "extra.unlisted", "layer.0.w", "layer.1.w"}));
  auto e = m->read_f32("embed.weight", std::vector<int64_t>{2, 2});
  ASSERT_TRUE(e.is_ok()) << e.message();
  EXPECT_EQ(*e, (std::vector<float>{1, 2, 3, 4}));
  auto l1 = m->read_f32("layer.1.w", std::vector<int64_t>{1});
  ASSERT_TRUE(l1.is_ok()) << l1.message();
  EXPECT_EQ((*l1)[0], 1.0f);
  const StTensorInfo* t = m->find("layer.1.w");
  ASSERT_NE(t, nullptr);
  ASSERT_NE(m->file_of(*t), nullptr);
  EXPECT_NE(m->file_of(*t)->path().find("model-00002-of-00002.safetensors"), std::string::npos);
  // The model stays valid after a move.
  SafetensorsModel moved = std::move(m).value();
  EXPECT_EQ(moved.find("layer.1.w"), t);
  EXPECT_EQ(*reinterpret_cast<const uint8_t*>(moved.data("extra.unlisted")), 9);
  auto bad = moved.read_f32("layer.0.w", std::vector<int64_t>{3});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("model-00001-of-00002.safetensors: tensor 'layer.0.w' has shape [2], expected [3]"),
            std::string::npos)
      << bad.message();
}

TEST(SafetensorsModel, MissingFilesNameTheDirectory) {
  TempDir dir;
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.message(), dir.path() + "/: missing model.safetensors and model.safetensors.index.json");
  auto nodir = SafetensorsModel::open_dir(dir.file("drafter"));
  ASSERT_FALSE(nodir.is_ok());
  EXPECT_NE(nodir.message().find("drafter/: cannot open directory"), std::string::npos) << nodir.message();
}

TEST(SafetensorsModel, IndexNamingMissingShard) {
  TempDir dir;
  write_sharded(dir, R"("lm_head.weight": "model-00003-of-00003.safetensors",)");
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("model.safetensors.index.json: tensor 'lm_head.weight' maps to missing shard"),
            std::string::npos)
      << m.message();
  EXPECT_NE(m.message().find("model-00003-of-00003.safetensors"), std::string::npos) << m.message();
}

TEST(SafetensorsModel, TensorMissingFromItsShard) {
  TempDir dir;
  write_sharded(dir, R"("lm_head.weight": "model-00002-of-00002.safetensors",)");
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("model-00002-of-00002.safetensors: tensor 'lm_head.weight' listed in"),
            std::string::npos)
      << m.message();
  EXPECT_NE(m.message().find("is not in this shard"), std::string::npos) << m.message();
}

TEST(SafetensorsModel, TensorMappedToTheWrongShard) {
  TempDir dir;
  write_sharded(dir, R"("extra.unlisted": "model-00001-of-00002.safetensors",)");
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("model-00001-of-00002.safetensors: tensor 'extra.unlisted'"), std::string::npos)
      << m.message();
}

TEST(SafetensorsModel, DuplicateTensorAcrossShards) {
  TempDir dir;
  write_sharded(dir);
  ASSERT_TRUE(write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                                {{"layer.1.w", StDType::kF16, {1}, Bytes(2)}, {"layer.0.w", StDType::kF32, {2}, Bytes(8)}})
                  .is_ok());
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("tensor 'layer.0.w' appears in both"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("model-00001-of-00002.safetensors and"), std::string::npos) << m.message();
}

TEST(SafetensorsModel, BadIndexFiles) {
  struct Case {
    const char* json;
    const char* fragment;
  };
  const Case cases[] = {
      {"{not json", "model.safetensors.index.json: offset 2: not valid JSON"},
      {"[1]", "model.safetensors.index.json: top level is an array"},
      {R"({"metadata": {}})", "model.safetensors.index.json: missing \"weight_map\""},
      {R"({"weight_map": []})", "\"weight_map\" is an array"},
      {R"({"weight_map": {}})", "\"weight_map\" is empty"},
      {R"({"weight_map": {"a": 3}})", "entry for tensor 'a' is an integer"},
      {R"({"weight_map": {"a": "../model.safetensors"}})", "tensor 'a' maps to '../model.safetensors', which is not a plain file name"},
      {R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})", "duplicate key 'a'"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    write_text(dir.file("model.safetensors.index.json"), c.json);
    auto m = SafetensorsModel::open_dir(dir.path());
    ASSERT_FALSE(m.is_ok()) << c.json;
    EXPECT_NE(m.message().find(c.fragment), std::string::npos) << c.json << " -> " << m.message();
  }
}

TEST(SafetensorsModel, BadShardNamesTheShard) {
  TempDir dir;
  write_sharded(dir);
  write_bytes(dir.file("model-00002-of-00002.safetensors"), raw_file(R"({"x": 1})"));
  auto m = SafetensorsModel::open_dir(dir.path());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.message().find("model-00002-of-00002.safetensors: tensor 'x': entry is an integer"), std::string::npos)
      << m.message();
}

// ---- validation: one test per rule ----

// Every strict prefix of a valid file is rejected without reading past it (each prefix is its own
// heap allocation, so ASan builds catch any overread).
TEST(SafetensorsValidation, EveryTruncationFailsCleanly) {
  auto full = build_safetensors({{"a", StDType::kF32, {2}, to_bytes<float>({1, 2})},
                                 {"b", StDType::kU8, {3}, Bytes{1, 2, 3}}},
                                {{"k", "v"}});
  ASSERT_TRUE(full.is_ok());
  ASSERT_TRUE(parse(*full).is_ok());
  for (size_t len = 0; len < full->size(); ++len) {
    const Bytes prefix(full->begin(), full->begin() + static_cast<std::ptrdiff_t>(len));
    auto r = SafetensorsFile::parse(prefix.data(), prefix.size(), "cut.safetensors");
    ASSERT_FALSE(r.is_ok()) << "prefix of " << len << " bytes parsed";
    EXPECT_EQ(r.message().rfind("cut.safetensors: ", 0), 0u) << r.message();
    if (len < 8) {
      EXPECT_NE(r.message().find("offset 0: file truncated"), std::string::npos) << r.message();
    } else if (len < parse(*full)->data_offset()) {
      EXPECT_NE(r.message().find("offset 0: header length"), std::string::npos) << r.message();
    } else {
      EXPECT_NE(r.message().find("run past the end of the data region"), std::string::npos) << r.message();
    }
  }
  EXPECT_FALSE(SafetensorsFile::parse(nullptr, 0, "null.safetensors").is_ok());
  EXPECT_FALSE(SafetensorsFile::parse(nullptr, 100, "null.safetensors").is_ok());
}

TEST(SafetensorsValidation, HeaderLengthHuge) {
  Bytes b = raw_file("{}");
  const uint64_t huge = ~uint64_t{0};
  std::memcpy(b.data(), &huge, 8);
  expect_error(b, {"offset 0", "header length 18446744073709551615 exceeds the limit"});
  const uint64_t past = 3;  // 3 > the 2 bytes that follow
  std::memcpy(b.data(), &past, 8);
  expect_error(b, {"offset 0", "header length 3 exceeds the 2 bytes"});
  // Larger than the 100 MB limit, even though the bytes exist.
  Bytes big = raw_file(std::string(kStMaxHeaderBytes + 1, ' '));
  expect_error(big, {"offset 0", "header length 100000001 exceeds the limit of 100000000"});
  expect_error(raw_file(" "), {"offset 0", "too small"});
}

TEST(SafetensorsValidation, HeaderNotJson) {
  expect_error(raw_file("{\"a\": }"), {"offset 14", "header is not valid JSON", "syntax error"});
  expect_error(raw_file("{\"a\": {}} x"), {"header is not valid JSON"});
  expect_error(raw_file(std::string("{\"a\xff\": 1}")), {"header is not valid JSON"});  // bad UTF-8 in a key
  expect_error(raw_file(std::string("{}\0\0", 4)), {"offset 10", "header is not valid JSON: raw NUL byte"});
  expect_error(raw_file(std::string("{}\0{\"a\":", 8)), {"offset 10", "raw NUL byte"});  // garbage after a NUL
  expect_error(raw_file("{/*c*/}"), {"header is not valid JSON"});
}

TEST(SafetensorsValidation, HeaderNotAnObject) {
  expect_error(raw_file("[]"), {"offset 8", "header JSON is an array, expected an object"});
  expect_error(raw_file("\"x\""), {"offset 8", "header JSON is a string"});
  expect_error(raw_file("12"), {"offset 8", "header JSON is an integer"});
  expect_error(raw_file(R"({"w": [1]})"), {"tensor 'w': entry is an array, expected an object"});
}

TEST(SafetensorsValidation, DuplicateKeys) {
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("w": {"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                        Bytes(2)),
               {"duplicate key 'w'"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
               {"duplicate key 'dtype' in a nested object"});
}

TEST(SafetensorsValidation, NestingTooDeep) {
  std::string deep = R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)";
  deep += std::string(200, '[') + std::string(200, ']') + "}}";
  expect_error(raw_file(deep, Bytes(1)), {"header is not valid JSON", "nests deeper than 64 levels"});
}

TEST(SafetensorsValidation, MissingFields) {
  expect_error(raw_file(R"({"w": {"shape":[1],"data_offsets":[0,1]}})", Bytes(1)), {"tensor 'w': missing \"dtype\""});
  expect_error(raw_file(R"({"w": {"dtype":"U8","data_offsets":[0,1]}})", Bytes(1)), {"tensor 'w': missing \"shape\""});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1]}})", Bytes(1)), {"tensor 'w': missing \"data_offsets\""});
  expect_error(raw_file(R"({"w": {"dtype":8,"shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
               {"tensor 'w': \"dtype\" is an integer, expected a string"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":{},"data_offsets":[0,1]}})", Bytes(1)),
               {"tensor 'w': \"shape\" is an object, expected an array"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0]}})", Bytes(1)),
               {"tensor 'w': \"data_offsets\" must be an array [begin, end]"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", Bytes(1)),
               {"tensor 'w': \"data_offsets\" must be an array [begin, end]"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,"1"]}})", Bytes(1)),
               {"tensor 'w': \"data_offsets\" must hold two non-negative integers"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", Bytes(1)),
               {"tensor 'w': \"data_offsets\" must hold two non-negative integers"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}})", Bytes(1)),
               {"tensor 'w': \"data_offsets\" must hold two non-negative integers"});
}

TEST(SafetensorsValidation, UnknownDtype) {
  expect_error(raw_file(R"({"w": {"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
               {"tensor 'w': unknown dtype 'Q4_K'"});
  expect_error(raw_file(R"({"w": {"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
               {"tensor 'w': unknown dtype 'f32'"});
  expect_error(raw_file(R"({"w": {"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
               {"tensor 'w': dtype 'F8_E4M3' is not supported"});
}

TEST(SafetensorsValidation, OffsetsReversed) {
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", Bytes(4)),
               {"tensor 'w': data_offsets [2, 1] are reversed"});
}

TEST(SafetensorsValidation, OffsetsOutOfRange) {
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[2],"data_offsets":[3,5]}})", Bytes(4)),
               {"tensor 'w': data_offsets [3, 5] run past the end of the data region (4 bytes"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", Bytes(4)),
               {"tensor 'w': data_offsets [18446744073709551615, 0] are reversed"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})", Bytes(4)),
               {"tensor 'w': data_offsets", "run past the end"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}})", Bytes(4)),
               {"tensor 'w': \"data_offsets\" must hold two non-negative integers"});
}

TEST(SafetensorsValidation, OverlappingTensors) {
  expect_error(raw_file(R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b": {"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                        Bytes(8)),
               {"tensor 'b': data [4, 8) overlaps tensor 'a' [0, 8)"});
  expect_error(raw_file(R"({"a": {"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                        R"("b": {"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                        Bytes(8)),
               {"overlaps tensor 'a'"});
  // Empty tensors may sit anywhere, also inside another tensor's bytes.
  EXPECT_TRUE(parse(raw_file(R"({"a": {"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b": {"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                             Bytes(4)))
                  .is_ok());
}

TEST(SafetensorsValidation, SizeMismatch) {
  expect_error(raw_file(R"({"w": {"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", Bytes(16)),
               {"tensor 'w': data_offsets [0, 12] hold 12 bytes, but F32 [2, 2] needs 16"});
  expect_error(raw_file(R"({"w": {"dtype":"BF16","shape":[],"data_offsets":[0,4]}})", Bytes(4)),
               {"tensor 'w'", "BF16 [] needs 2"});
  expect_error(raw_file(R"({"w": {"dtype":"I8","shape":[0],"data_offsets":[0,1]}})", Bytes(4)),
               {"tensor 'w'", "I8 [0] needs 0"});
}

TEST(SafetensorsValidation, NegativeShape) {
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape dimension 1 is negative (-1)"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape dimension 0 is a non-integer number"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":["2"],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape dimension 0 is a string"});
}

TEST(SafetensorsValidation, OverflowingShape) {
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape [4294967296, 4294967296] element count overflows"});
  expect_error(raw_file(R"({"w": {"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape [4611686018427387904] byte size overflows"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape dimension 0 (9223372036854775808) is too large"});
  expect_error(raw_file(R"({"w": {"dtype":"U8","shape":[1e30],"data_offsets":[0,0]}})"),
               {"tensor 'w': shape dimension 0 is a non-integer number"});
  // A zero dimension makes the element count 0 whatever the others are.
  auto r = parse(raw_file(R"({"w": {"dtype":"F64","shape":[4611686018427387904, 0, 4],"data_offsets":[0,0]}})"));
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->find("w")->n_elements, 0);
}

TEST(SafetensorsValidation, NonStringMetadata) {
  expect_error(raw_file(R"({"__metadata__": {"format": "pt", "step": 100}})"),
               {"offset 8", "\"__metadata__\" key 'step' is an integer, expected a string"});
  expect_error(raw_file(R"({"__metadata__": ["pt"]})"), {"\"__metadata__\" is an array, expected an object"});
  expect_error(raw_file(R"({"__metadata__": {"nested": {}}})"), {"key 'nested' is an object"});
}

TEST(SafetensorsValidation, QuotesControlCharactersInNames) {
  expect_error(raw_file("{\"a\\n'b\": {\"dtype\":\"XX\",\"shape\":[],\"data_offsets\":[0,0]}}"),
               {"tensor 'a\\x0a\\x27b': unknown dtype 'XX'"});
}

}  // namespace
}  // namespace dspark::formats
