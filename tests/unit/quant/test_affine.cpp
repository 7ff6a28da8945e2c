// MLX affine quantization: bit-exact against the NumPy transcription of MLX's CPU quantizer
// (tests/goldens/quant/affine_golden.safetensors, scripts/gen_quant_goldens.py), packing layout and
// round trips, and MLX's corner cases (docs/QUANT-FORMAT.md §1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/f16.h"
#include "core/rng.h"
#include "formats/safetensors.h"
#include "quant/affine.h"
#include "quant/pack.h"
#include "quant/quant_types.h"

namespace dspark::quant {
namespace {

const std::string kGolden = std::string(DSPARK_SOURCE_DIR) + "/tests/goldens/quant/affine_golden.safetensors";

template <class T>
std::vector<T> read(const formats::SafetensorsFile& f, const std::string& name) {
  const formats::StTensorInfo* info = f.find(name);
  EXPECT_NE(info, nullptr) << name;
  if (!info) return {};
  std::vector<T> v(info->n_bytes / sizeof(T));
  std::memcpy(v.data(), f.data(*info), info->n_bytes);
  return v;
}

TEST(QuantAffine, BitExactAgainstMlxFormulaGolden) {
  auto f = formats::SafetensorsFile::open(kGolden);
  ASSERT_TRUE(f.is_ok()) << f.message();
  const int64_t cols = 256;
  std::vector<float> in_bf16, in_f32 = read<float>(*f, "input.f32");
  for (uint16_t b : read<uint16_t>(*f, "input.bf16")) in_bf16.push_back(bf16_to_fp32(b));
  int checked = 0;
  for (int bits : kAffineBits)
    for (int g : kGroupSizes)
      for (const std::string kind : {"bf16", "f32"}) {
        const std::vector<float>& in = kind == "bf16" ? in_bf16 : in_f32;
        const int64_t rows = (int64_t)in.size() / cols, ng = cols / g, rb = cols * bits / 8;
        const std::string pre = kind + ".b" + std::to_string(bits) + ".g" + std::to_string(g);
        const std::vector<uint32_t> want_codes = read<uint32_t>(*f, pre + ".weight");
        std::vector<uint16_t> want_s, want_b;
        if (kind == "bf16") {
          want_s = read<uint16_t>(*f, pre + ".scales");
          want_b = read<uint16_t>(*f, pre + ".biases");
        } else {  // MLX keeps f32 scales for f32 weights; we store bf16 of the same f32 values
          for (float x : read<float>(*f, pre + ".scales")) want_s.push_back(fp32_to_bf16(x));
          for (float x : read<float>(*f, pre + ".biases")) want_b.push_back(fp32_to_bf16(x));
        }
        std::vector<uint8_t> codes((size_t)(rows * rb));
        std::vector<uint16_t> s((size_t)(rows * ng)), b((size_t)(rows * ng));
        for (int64_t r = 0; r < rows; ++r)
          affine_quantize_row(&in[(size_t)(r * cols)], cols, bits, g, &codes[(size_t)(r * rb)], &s[(size_t)(r * ng)],
                              &b[(size_t)(r * ng)]);
        ASSERT_EQ(codes.size(), want_codes.size() * 4) << pre;
        EXPECT_EQ(std::memcmp(codes.data(), want_codes.data(), codes.size()), 0) << pre << ": codes differ";
        EXPECT_EQ(s, want_s) << pre << ": scales differ";
        EXPECT_EQ(b, want_b) << pre << ": biases differ";
        if (kind == "bf16" && g == 64) {
          const std::vector<float> want = read<float>(*f, pre + ".dequant");
          std::vector<float> got((size_t)(rows * cols));
          for (int64_t r = 0; r < rows; ++r)
            affine_dequantize_row(&codes[(size_t)(r * rb)], &s[(size_t)(r * ng)], &b[(size_t)(r * ng)], cols, bits, g,
                                  &got[(size_t)(r * cols)]);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << pre << ": dequantized values differ";
        }
        ++checked;
      }
  EXPECT_EQ(checked, 36);
}

TEST(QuantAffine, PackUnpackRoundTripAndLayout) {
  Rng rng(3);
  for (int bits = 1; bits <= 8; ++bits) {
    const int64_t n = 256;
    std::vector<uint8_t> codes((size_t)n), back((size_t)n), packed((size_t)(n * bits / 8));
    for (auto& c : codes) c = (uint8_t)(rng.next() & ((1u << bits) - 1));
    pack_codes(codes.data(), n, bits, packed.data());
    unpack_codes(packed.data(), n, bits, back.data());
    EXPECT_EQ(back, codes) << bits << " bits";
    // LSB-first bit stream: bit i of the stream is bit (i % bits) of code i / bits.
    for (int64_t i = 0; i < n * bits; ++i)
      ASSERT_EQ((packed[(size_t)(i / 8)] >> (i % 8)) & 1, (codes[(size_t)(i / bits)] >> (i % bits)) & 1) << bits << " bits, bit " << i;
  }
  // 4-bit: code k of a little-endian uint32 word at bit 4k (MLX's 8 codes per word).
  const uint8_t c[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t p[4];
  pack_codes(c, 8, 4, p);
  uint32_t word;
  std::memcpy(&word, p, 4);
  EXPECT_EQ(word, 0x87654321u);
}

TEST(QuantAffine, MlxCornerCases) {
  // Symmetric [-1, 1] group at 4 bits. In exact arithmetic q0 = rint(-7.5)
  // = -8 and -1 decodes to -0.875; in f32, as MLX computes, s = -f32(2/15) makes edge / s =
  // -7.4999995, so q0 = -7, s = -1/7, b = 1: the edge 1 is exact and -1 gets code 14.
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[(size_t)i] = -1.0f + 2.0f * (float)i / 31.0f;
  w[0] = -1.0f;
  w[31] = 1.0f;
  uint8_t packed[16];
  uint16_t s, b;
  affine_quantize_row(w.data(), 32, 4, 32, packed, &s, &b);
  EXPECT_EQ(s, fp32_to_bf16(-1.0f / 7.0f));
  EXPECT_EQ(bf16_to_fp32(b), 1.0f);
  float deq[32];
  affine_dequantize_row(packed, &s, &b, 32, 4, 32, deq);
  EXPECT_EQ(deq[31], 1.0f);                                    // the edge is exact
  EXPECT_EQ(deq[0], 1.0f + 14.0f * bf16_to_fp32(s));           // code 14
  // A grid group k/8, k = -8..7 (exact in f32): edge -1, s = 0.125, b = -1, zero is code 8 and
  // exact half-steps round half to even: 1/16 -> 8.5 -> 8, 3/16 -> 9.5 -> 10.
  std::vector<float> g(32);
  for (int i = 0; i < 32; ++i) g[(size_t)i] = (float)(i % 16 - 8) / 8.0f;
  g[16] = 1.0f / 16.0f;
  g[17] = 3.0f / 16.0f;
  affine_quantize_row(g.data(), 32, 4, 32, packed, &s, &b);
  EXPECT_EQ(bf16_to_fp32(s), 0.125f);
  EXPECT_EQ(bf16_to_fp32(b), -1.0f);
  affine_dequantize_row(packed, &s, &b, 32, 4, 32, deq);
  EXPECT_EQ(deq[8], 0.0f);
  EXPECT_EQ(deq[16], 0.0f);     // code 8
  EXPECT_EQ(deq[17], 0.25f);    // code 10
  for (int i = 0; i < 16; ++i) EXPECT_EQ(deq[(size_t)i], g[(size_t)i]) << i;
  // All-zero group: q0 = 0 -> bias 0, every value decodes to 0.
  std::vector<float> z(64, 0.0f);
  uint8_t pz[32];
  uint16_t sz[1], bz[1];
  affine_quantize_row(z.data(), 64, 4, 64, pz, sz, bz);
  float dz[64];
  affine_dequantize_row(pz, sz, bz, 64, 4, 64, dz);
  for (float x : dz) EXPECT_EQ(x, 0.0f);
}

TEST(QuantAffine, ErrorShrinksWithBits) {
  Rng rng(5);
  std::vector<float> w(1024);
  for (float& x : w) x = (float)(rng.uniform() - 0.5);
  double prev = 1e9;
  for (int bits : kAffineBits) {
    std::vector<uint8_t> p((size_t)(1024 * bits / 8));
    std::vector<uint16_t> s(16), b(16);
    affine_quantize_row(w.data(), 1024, bits, 64, p.data(), s.data(), b.data());
    std::vector<float> d(1024);
    affine_dequantize_row(p.data(), s.data(), b.data(), 1024, bits, 64, d.data());
    double err = 0;
    for (int i = 0; i < 1024; ++i) err = std::max(err, (double)std::fabs(d[(size_t)i] - w[(size_t)i]));
    // At most one grid step (a clamped extreme after the edge refit) plus bf16 rounding of scale and bias.
    EXPECT_LT(err, 1.1 / ((1 << bits) - 1) + 4e-3) << bits << " bits";
    EXPECT_LT(err, prev);
    prev = err;
  }
}

TEST(QuantAffine, SpecChecksAndBpw) {
  EXPECT_TRUE(check_spec({Method::kAffine, 5, 64}, "t").is_ok());
  EXPECT_FALSE(check_spec({Method::kAffine, 7, 64}, "t").is_ok());
  EXPECT_FALSE(check_spec({Method::kTurbo, 5, 64}, "t").is_ok());
  EXPECT_FALSE(check_spec({Method::kAffine, 4, 48}, "t").is_ok());
  const Status s = check_spec_shape({Method::kAffine, 4, 128}, 640 + 64, "tensor 'x'");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tensor 'x'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("group_size 128"), std::string::npos) << s.message();
  // Equal bits per weight (docs/QUANT-FORMAT.md §1): affine b g64 = turbo b g32, affine b g128 = turbo b g64.
  EXPECT_DOUBLE_EQ(spec_bpw({Method::kAffine, 4, 64}), 4.5);
  EXPECT_DOUBLE_EQ(spec_bpw({Method::kTurbo, 4, 32}), 4.5);
  EXPECT_DOUBLE_EQ(spec_bpw({Method::kAffine, 4, 128}), spec_bpw({Method::kTurbo, 4, 64}));
  EXPECT_DOUBLE_EQ(spec_bpw({Method::kAffine, 3, 64}), spec_bpw({Method::kTurbo, 3, 32}));
  EXPECT_EQ(default_rotation_block(640), 128);
  EXPECT_EQ(default_rotation_block(3840), 256);
  EXPECT_EQ(default_rotation_block(704), 64);
  EXPECT_EQ(default_rotation_block(2048), 256);
  EXPECT_EQ(default_rotation_block(40), 0);
}

}  // namespace
}  // namespace dspark::quant
