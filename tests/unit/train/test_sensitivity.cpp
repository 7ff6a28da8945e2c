// The quantization sensitivity table on a small random drafter: "kept" is KL 0, every simulated
// quantization gives KL >= 0, fewer bits hurt at least as much as 8 bits, the weights are restored
// after every candidate (the reference forward is unchanged), and the knapsack consumes the table.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "quant/fake_quant.h"
#include "quant/knapsack.h"
#include "train/draft_net.h"
#include "train/sensitivity.h"

namespace dspark::train {
namespace {

constexpr int64_t kH = 64, kHeads = 2, kHd = 32, kI = 64, kV = 48, kTargetLayers = 4, kGamma = 3;

double normal(Rng& rng) {
  const double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

TEST(Sensitivity, TableOnARandomDrafter) {
  Rng rng(3);
  std::vector<float> table((size_t)(kV * kH));
  for (float& x : table) x = (float)(0.1 * normal(rng));  // moderate logits: KL is not saturated
  const kernels::QMatrix qtable{DType::F32, kV, kH, table.data(), (size_t)kH * 4};
  std::vector<int32_t> d2t;
  for (int32_t i = 0; i < 40; ++i) d2t.push_back(i);
  auto p = init_draft_params(DraftArch{{0, 2}, 1, 32, kGamma, kI}, kTargetLayers, kH, kHeads, kHd, kI, kV, 4, d2t, 5);
  ASSERT_TRUE(p.is_ok()) << p.message();
  for (Param* q : p->all())
    for (float& x : q->w) x = (q->shape.size() == 1 ? 1.0f : 0.0f) + (float)(0.3 * normal(rng));
  FrozenTables frozen = make_frozen_tables(qtable, p->d2t, kH);
  TrainBatch batch;
  batch.top_k = 2;
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> probs;
  ids.reserve(64);
  probs.reserve(64);
  std::vector<int32_t> tok(14);
  for (auto& x : tok) x = (int32_t)(rng.next() % 40);
  TrainSeq seq;
  seq.n_ctx = 12;
  seq.taps.resize((size_t)(12 * 2 * kH));
  for (float& x : seq.taps) x = (float)normal(rng);
  batch.seqs.push_back(seq);
  for (int64_t a : {3, 6, 9, 12}) {
    TrainBlock b;
    b.anchor = a;
    for (int64_t k = 0; k < kGamma; ++k) {
      const bool valid = a + k + 1 < (int64_t)tok.size();
      b.prev.push_back(a + k < (int64_t)tok.size() ? tok[(size_t)(a + k)] : 0);
      b.label.push_back(valid ? tok[(size_t)(a + k + 1)] : -1);
      ids.push_back({valid ? tok[(size_t)(a + k + 1)] : 0, 41});
      probs.push_back({0.7f, 0.3f});
      b.dist_ids.push_back(valid ? ids.back().data() : nullptr);
      b.dist_probs.push_back(valid ? probs.back().data() : nullptr);
    }
    batch.blocks.push_back(b);
  }
  DraftNet ref(*p, frozen);
  ref.run(batch, false);
  const std::vector<float> ref_logits = ref.logits();

  const std::vector<quant::Candidate> cands = {{"affine", 2, 32, 3.0, 0}, {"affine", 8, 32, 9.0, 0},
                                               {"turbo", 2, 32, 2.5, 0}, {"turbo", 4, 32, 4.5, 0}};
  auto fq = [](const std::string& tensor, const quant::Candidate& c, float* w, int64_t rows, int64_t cols) {
    quant::QuantSpec s;
    s.method = c.method == "affine" ? quant::Method::kAffine : quant::Method::kTurbo;
    s.bits = c.bits;
    s.group_size = c.group;
    return quant::fake_quantize(s, tensor, 1, w, rows, cols);
  };
  int64_t calls = 0;
  auto r = measure_sensitivity(*p, frozen, batch, cands, fq, [&](int64_t, int64_t) { ++calls; });
  ASSERT_TRUE(r.is_ok()) << r.message();
  const size_t n_units = sensitivity_units(*p, frozen).size();
  EXPECT_EQ(r->table.size(), n_units);  // q k o gate up down fc w1 w2 lm_head
  EXPECT_EQ(n_units, 10u);
  EXPECT_EQ(calls, (int64_t)(n_units * cands.size()));
  for (const quant::TensorSensitivity& t : r->table) {
    ASSERT_EQ(t.candidates.size(), cands.size() + 1);
    EXPECT_EQ(t.candidates[0].method, "none");
    EXPECT_EQ(t.candidates[0].kl, 0.0);
    for (const quant::Candidate& c : t.candidates) EXPECT_GE(c.kl, 0.0) << t.name;
    EXPECT_LT(t.candidates[2].kl, t.candidates[1].kl) << t.name << ": affine 8 hurts more than affine 2";
    EXPECT_LT(t.candidates[4].kl, t.candidates[3].kl) << t.name << ": turbo 4 hurts more than turbo 2";
    EXPECT_GT(t.candidates[1].kl, 0.0) << t.name << ": 2-bit quantization changed nothing";
  }
  // Restored: the forward is bitwise the reference again.
  DraftNet again(*p, frozen);
  again.run(batch, false);
  EXPECT_EQ(again.logits(), ref_logits);
  auto a = quant::allocate_bits(r->table, 4.6);
  ASSERT_TRUE(a.is_ok()) << a.message();
  EXPECT_LE(a->bpw, 4.6 + 1e-9);
}

}  // namespace
}  // namespace dspark::train
