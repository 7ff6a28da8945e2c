// Helpers shared by the GGUF tests: byte builders, a small valid fixture and error matchers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace dspark::formats::testing {

using Bytes = std::vector<uint8_t>;

inline Bytes le32(uint32_t v) {
  Bytes b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
inline Bytes le64(uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
inline Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
inline Bytes str_bytes(const std::string& s) { return cat({le64(s.size()), Bytes(s.begin(), s.end())}); }

inline void patch32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
inline void patch64(Bytes& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

inline Result<GgufFile> parse_bytes(const Bytes& b, const std::string& name = "t.gguf") {
  return GgufFile::parse(b.data(), b.size(), name);
}

// A small valid file: a few pairs of different kinds and two tensors (F32 [8], Q8_0 [32, 2]).
inline GgufWriter small_fixture() {
  GgufWriter w;
  w.add_string("general.architecture", "gemma3");
  w.add_u32("gemma3.block_count", 2);
  w.add_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  const std::vector<std::string> toks = {"<pad>", "<eos>", "a"};
  w.add_string_array("tokenizer.ggml.tokens", toks);
  const std::vector<int32_t> types = {3, 3, 1};
  w.add_i32_array("tokenizer.ggml.token_type", types);
  std::vector<uint8_t> a(32), b(2 * 34);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(200 - i);
  const int64_t ne_a[] = {8}, ne_b[] = {32, 2};
  EXPECT_TRUE(w.add_tensor("norm.weight", DType::F32, ne_a, a.data(), a.size()).is_ok());
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", DType::Q8_0, ne_b, b.data(), b.size()).is_ok());
  return w;
}

// Expects parsing to fail with a message containing every needle (and the file name).
inline void expect_parse_error(const Bytes& b, std::initializer_list<std::string> needles) {
  auto r = parse_bytes(b, "bad.gguf");
  ASSERT_FALSE(r.is_ok()) << "parse unexpectedly succeeded";
  const std::string& msg = r.message();
  EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
}

}  // namespace dspark::formats::testing
