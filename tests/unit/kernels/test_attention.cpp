// SIMD attention vs the scalar reference, including ring wrap and odd key counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/f16.h"
#include "kernels/attention.h"

namespace dspark::kernels {
namespace {

// Same f16 roundings on both sides; differences come from f32 summation order and the
// polynomial exp (~2 ulp), which can flip an f16 rounding of a probability (2^-11 relative).
constexpr float kTolAttnRel = 2e-3f;

TEST(Attention, SimdMatchesReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t hd : {16, 64, 256}) {
    for (int n_q : {1, 3, 4, 8}) {
      for (int64_t n_keys : {1, 5, 17, 300}) {
        const int64_t capacity = 40 + n_keys, stride = hd * 2;  // two heads per row; use head 1
        std::vector<uint16_t> k(capacity * stride), v(capacity * stride);
        for (auto& x : k) x = fp32_to_fp16(nd(rng));
        for (auto& x : v) x = fp32_to_fp16(nd(rng));
        std::vector<float> q(n_q * hd);
        for (auto& x : q) x = nd(rng) * 0.3f;
        const KvView view{k.data() + hd, v.data() + hd, capacity, stride};
        const int64_t first = capacity - 3;  // wraps after 3 keys
        std::vector<float> s(n_q * n_keys), want(n_q * hd), got(n_q * hd);
        attention_f16kv_ref(q.data(), n_q, hd, view, first, n_keys, s.data(), want.data());
        for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
          if (isa > detect_isa()) continue;
          attention_f16kv(isa, q.data(), n_q, hd, view, first, n_keys, s.data(), got.data());
          float scale = 0;
          for (float x : want) scale = std::max(scale, std::fabs(x));
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], kTolAttnRel * scale + 1e-6f)
                << isa_name(isa) << " hd " << hd << " n_q " << n_q << " n_keys " << n_keys << " i " << i;
        }
      }
    }
  }
}

// Query heads are grouped so a K/V row is read once per group of up to 4; a head's result must not
// depend on the grouping (n_q heads at once == each head alone, bitwise), or a GQA model's output
// would change with its head count.
TEST(Attention, HeadGroupingDoesNotChangeBits) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0, 1);
  const int64_t hd = 64, n_keys = 37, capacity = 64, stride = hd;
  std::vector<uint16_t> k(capacity * stride), v(capacity * stride);
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  const KvView view{k.data(), v.data(), capacity, stride};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detect_isa()) continue;
    for (int n_q : {2, 3, 5, 6, 7}) {
      std::vector<float> q(n_q * hd);
      for (auto& x : q) x = nd(rng) * 0.3f;
      std::vector<float> s(n_q * n_keys), all(n_q * hd), one(hd), s1(n_keys);
      attention_f16kv(isa, q.data(), n_q, hd, view, 5, n_keys, s.data(), all.data());
      for (int h = 0; h < n_q; ++h) {
        attention_f16kv(isa, q.data() + h * hd, 1, hd, view, 5, n_keys, s1.data(), one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + h * hd, hd * 4)) << isa_name(isa) << " n_q " << n_q << " head " << h;
      }
    }
  }
}

TEST(Attention, SingleKeyReturnsItsValue) {
  std::vector<uint16_t> k(16, fp32_to_fp16(1.0f)), v(16);
  for (int i = 0; i < 16; ++i) v[i] = fp32_to_fp16((float)i);
  const float q[16] = {0.5f};
  float s[1], out[16];
  attention_f16kv(detect_isa(), q, 1, 16, {k.data(), v.data(), 1, 16}, 0, 1, s, out);
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(out[i], (float)i);
}

}  // namespace
}  // namespace dspark::kernels
