// SIMD attention vs the scalar reference, including ring wrap and odd key counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/f16.h"
#include "kernels/attention.h"
#include "kernels/attention_f32.h"

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

// Several rows at once (a prefill chunk, a verify window) == a call per row, bit for bit: causal rows
// (row r sees one key more than row r - 1), rows with their own windows (sliding-window layers),
// ring wrap, head dims 16 / 64 / 256, 1-8 query heads, key counts off the 16-key blocks.
TEST(Attention, RowsMatchOneRowBitwise) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t hd : {16, 64, 256}) {
    for (int n_q : {1, 3, 4, 5, 8}) {
      for (int n_rows : {1, 2, 5, 8, 17}) {
        for (int64_t first : {0, 3, 29}) {
          for (bool window : {false, true}) {
            const int64_t capacity = 96, stride = hd * 2 + 16;  // head 1 of two, padded rows
            std::vector<uint16_t> k(capacity * stride), v(capacity * stride);
            for (auto& x : k) x = fp32_to_fp16(nd(rng));
            for (auto& x : v) x = fp32_to_fp16(nd(rng));
            const KvView view{k.data() + hd, v.data() + hd, capacity, stride};
            std::vector<int64_t> fp(n_rows), nk(n_rows);
            for (int r = 0; r < n_rows; ++r) {
              const int64_t pos = 60 + first + r;  // slots wrap past 96
              fp[r] = window ? pos - std::min<int64_t>(pos, 19) : first;
              nk[r] = pos - fp[r] + 1;
            }
            const int64_t q_stride = n_q * hd + 16;
            std::vector<float> q(n_rows * q_stride), got(n_rows * q_stride, 7.f), want(got);
            for (auto& x : q) x = nd(rng) * 0.3f;
            std::vector<float> s(n_q * 200);
            for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
              if (isa > detect_isa()) continue;
              for (int r = 0; r < n_rows; ++r)
                attention_f16kv(isa, q.data() + r * q_stride, n_q, hd, view, fp[r], nk[r], s.data(),
                                want.data() + r * q_stride);
              const AttnRows rows{q.data(), q_stride, got.data(), q_stride, fp.data(), nk.data(), n_rows};
              attention_f16kv_rows(isa, rows, n_q, hd, view, s.data());
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
                  << isa_name(isa) << " hd " << hd << " n_q " << n_q << " rows " << n_rows << " first " << first
                  << " window " << window;
            }
          }
        }
      }
    }
  }
}

// One row's attention split over 1-3 parts (decode on several threads), the phases run in order
// for every part, == the one-row kernel bit for bit: head dims 16 / 64 / 256, 1-8 query heads, key
// counts off the 16-key blocks and shorter than the parts, a ring that wraps.
TEST(Attention, SplitMatchesOneRowBitwise) {
  std::mt19937 rng(33);
  std::normal_distribution<float> nd(0, 1);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detect_isa()) continue;
    for (int64_t hd : {16, 64, 256}) {
      ASSERT_TRUE(attention_split_supported(isa, hd));
      const int64_t capacity = 640, stride = hd * 2;  // head 1 of two
      std::vector<uint16_t> k(capacity * stride), v(capacity * stride);
      for (auto& x : k) x = fp32_to_fp16(nd(rng));
      for (auto& x : v) x = fp32_to_fp16(nd(rng));
      const KvView view{k.data() + hd, v.data() + hd, capacity, stride};
      for (int n_q : {1, 3, 4, 5, 8}) {
        for (int64_t n_keys : {1, 15, 16, 17, 40, 255, 600}) {
          for (int parts : {1, 2, 3}) {
            const int64_t first = n_keys == 600 ? 500 : 7;  // 600 keys from slot 500 wrap
            std::vector<float> q(n_q * hd), want(n_q * hd), got(n_q * hd, 7.f), sc(n_q * n_keys);
            for (auto& x : q) x = nd(rng) * 0.3f;
            attention_f16kv(isa, q.data(), n_q, hd, view, first, n_keys, sc.data(), want.data());
            std::vector<float> scores(n_q * n_keys), part_max(parts * n_q), sums(n_q * (n_keys / 8 + 1));
            std::vector<std::vector<float>> p(parts, std::vector<float>(n_q * n_keys));
            const AttnSplit s{q.data(), n_q, hd, view, first, n_keys, parts, scores.data(), part_max.data(),
                              sums.data(), got.data()};
            // the columns shared out evenly, or all to one part
            const int64_t all_first[3] = {0, hd, hd}, all_last[3] = {0, 0, hd};
            for (const int64_t* cols : {(const int64_t*)nullptr, all_first, all_last}) {
              if (cols && parts != 2) continue;
              AttnSplit sc2 = s;
              sc2.cols = cols;
              std::fill(got.begin(), got.end(), 7.f);
              for (int phase = 0; phase < 3; ++phase)
                for (int part = parts - 1; part >= 0; --part) attention_f16kv_split(isa, sc2, phase, part, p[part].data());
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
                  << isa_name(isa) << " hd " << hd << " n_q " << n_q << " keys " << n_keys << " parts " << parts;
            }
          }
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

// A token tree's verify reads the committed prefix as a range and the row's ancestors by position
// (KvView::extra); the result must be bitwise what the same keys give laid out contiguously, as a
// chain's verify and serial decoding read them, or tree verification would change the output.
TEST(Attention, ExtraKeysEqualTheSameKeysContiguousBitwise) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t hd : {64, 256}) {
    for (int64_t n_main : {0, 1, 16, 37}) {
      const std::vector<int64_t> extra = {n_main + 9, n_main + 3, n_main + 12};  // ancestors, out of order in the cache
      const int64_t capacity = n_main + 16, n = n_main + (int64_t)extra.size();
      std::vector<uint16_t> k(capacity * hd), v(capacity * hd), kc(n * hd), vc(n * hd);
      for (auto& x : k) x = fp32_to_fp16(nd(rng));
      for (auto& x : v) x = fp32_to_fp16(nd(rng));
      for (int64_t j = 0; j < n; ++j) {  // the same keys in read order
        const int64_t src = j < n_main ? j : extra[(size_t)(j - n_main)];
        std::memcpy(kc.data() + j * hd, k.data() + src * hd, hd * 2);
        std::memcpy(vc.data() + j * hd, v.data() + src * hd, hd * 2);
      }
      KvView tree{k.data(), v.data(), capacity, hd};
      tree.extra = extra.data();
      tree.n_extra = (int64_t)extra.size();
      const KvView chain{kc.data(), vc.data(), n, hd};
      const int n_q = 3;
      std::vector<float> q(n_q * hd);
      for (auto& x : q) x = nd(rng) * 0.3f;
      std::vector<float> s(n_q * n), want(n_q * hd), got(n_q * hd);
      attention_f16kv_ref(q.data(), n_q, hd, chain, 0, n, s.data(), want.data());
      attention_f16kv_ref(q.data(), n_q, hd, tree, 0, n_main, s.data(), got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "ref hd " << hd << " n_main " << n_main;
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (isa > detect_isa()) continue;
        attention_f16kv(isa, q.data(), n_q, hd, chain, 0, n, s.data(), want.data());
        attention_f16kv(isa, q.data(), n_q, hd, tree, 0, n_main, s.data(), got.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
            << isa_name(isa) << " hd " << hd << " n_main " << n_main;
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

// Blocks of keys are reduced W at a time and the tail one by one; a score's bits must not depend
// on which (mixed magnitudes and signs, so any change of pairing shows).
TEST(Attention, BlockReductionEqualsSingleReductionBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_int_distribution<int> ex(-20, 20);
  for (int trial = 0; trial < 200; ++trial) {
    float x[256], block[16], single[16];
    for (float& v : x) v = std::ldexp(nd(rng), ex(rng));
    if (detect_isa() >= Isa::kAvx2) {
      cpu::attention_reduce_w_avx2(x, block, single);
      ASSERT_EQ(0, std::memcmp(block, single, 8 * sizeof(float))) << "avx2 trial " << trial;
    }
    if (detect_isa() >= Isa::kAvx512) {
      cpu::attention_reduce_w_avx512(x, block, single);
      ASSERT_EQ(0, std::memcmp(block, single, 16 * sizeof(float))) << "avx512 trial " << trial;
    }
  }
}

// The drafter's f32 attention: the dot products' summation order differs from the reference (W
// lanes and a tree instead of left to right), ~1e-7 relative per score, and the SIMD versions' exp
// by ~2 ulp; 1e-5 of the output's scale bounds it with room (softmax keeps the error relative).
constexpr float kTolAttnF32Rel = 1e-5f;

TEST(AttentionF32, MatchesReferenceOverTwoSegments) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detect_isa()) continue;
    for (int64_t hd : {16, 64, 70, 256}) {
      for (int64_t n_q : {1, 5, 12, 28}) {
        for (int64_t n_ctx : {0, 1, 37, 300}) {
          for (int64_t n_blk : {1, 4, 7}) {
            const int64_t stride = hd * 3;  // three heads per row; use head 2
            std::vector<float> kc(std::max<int64_t>(n_ctx, 1) * stride), vc(kc.size()), kb(n_blk * stride), vb(kb.size());
            for (auto* t : {&kc, &vc, &kb, &vb})
              for (float& x : *t) x = nd(rng);
            std::vector<float> q(n_q * hd), want(n_q * hd), got(n_q * hd, 123.0f), s((n_ctx + n_blk) * n_q);
            for (float& x : q) x = nd(rng) * 0.2f;
            std::vector<const float*> qp;
            std::vector<float*> wp, gp;
            for (int64_t j = 0; j < n_q; ++j) {
              qp.push_back(&q[j * hd]);
              wp.push_back(&want[j * hd]);
              gp.push_back(&got[j * hd]);
            }
            const F32Rows segs[2] = {{kc.data() + 2 * hd, vc.data() + 2 * hd, n_ctx, stride},
                                     {kb.data() + 2 * hd, vb.data() + 2 * hd, n_blk, stride}};
            attention_f32_ref(qp.data(), wp.data(), n_q, hd, segs, 2, s.data());
            attention_f32(isa, qp.data(), gp.data(), n_q, hd, segs, 2, s.data());
            float scale = 0;
            for (float x : want) scale = std::max(scale, std::fabs(x));
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_NEAR(got[i], want[i], kTolAttnF32Rel * scale) << isa_name(isa) << " hd " << hd << " n_q " << n_q
                                                                   << " ctx " << n_ctx << " block " << n_blk << " at " << i;
          }
        }
      }
    }
  }
}

TEST(AttentionF32, SingleKeyReturnsItsValue) {
  const float k[4] = {1, 2, 3, 4}, v[4] = {5, -6, 7, 8}, q[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  const float* qp[1] = {q};
  float out[4], s[1];
  float* op[1] = {out};
  const F32Rows segs[2] = {{nullptr, nullptr, 0, 4}, {k, v, 1, 4}};
  attention_f32(detect_isa(), qp, op, 1, 4, segs, 2, s);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], v[i]);
  // The same on the SIMD paths (head_dim 16): one key's probability is exactly 1.
  float k16[16], v16[16], q16[16], out16[16];
  for (int i = 0; i < 16; ++i) k16[i] = 0.1f * i, v16[i] = 1.5f - i, q16[i] = 0.01f * i;
  const float* qp16[1] = {q16};
  float* op16[1] = {out16};
  const F32Rows segs16[2] = {{nullptr, nullptr, 0, 16}, {k16, v16, 1, 16}};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detect_isa()) continue;
    attention_f32(isa, qp16, op16, 1, 16, segs16, 2, s);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out16[i], v16[i]) << isa_name(isa);
  }
}

}  // namespace
}  // namespace dspark::kernels
