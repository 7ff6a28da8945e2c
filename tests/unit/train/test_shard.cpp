// Regen shards: round trip, and the damage resume must detect (checksum, truncation, format).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "kernels/ops.h"
#include "core/rng.h"
#include "train/dataset.h"
#include "train/prompts.h"
#include "train/regen.h"
#include "train/shard.h"

namespace dspark::train {
namespace {

ShardLayout layout() { return ShardLayout{{1, 4}, 3, 8}; }

std::vector<RegenSeq> sample_seqs() {
  std::vector<RegenSeq> v;
  for (int s = 0; s < 3; ++s) {
    RegenSeq q;
    q.prompt_index = 10 + s;
    q.prompt_len = 4 + s;
    q.temperature = s == 1 ? 0.7f : 0.0f;
    const int len = q.prompt_len + 5 + s;
    for (int i = 0; i < len; ++i) q.tokens.push_back(100 + 7 * i + s);
    q.taps.resize((size_t)len * 16);
    for (size_t i = 0; i < q.taps.size(); ++i) q.taps[i] = (uint16_t)(i * 31 + s);
    const int resp = len - q.prompt_len;
    for (int i = 0; i < resp * 3; ++i) {
      q.dist_ids.push_back(200 + i);
      q.dist_probs.push_back(0.1f * (float)(i % 3 + 1));
    }
    v.push_back(q);
  }
  return v;
}

std::string tmp_path(const char* name) { return ::testing::TempDir() + name; }

TEST(Shard, RoundTrip) {
  const auto seqs = sample_seqs();
  const std::string path = tmp_path("shard_rt.safetensors");
  ASSERT_TRUE(write_shard(path, layout(), seqs).is_ok());
  auto sh = Shard::open(path, 1000, true);
  ASSERT_TRUE(sh.is_ok()) << sh.message();
  ASSERT_EQ(sh->n_seq(), 3);
  EXPECT_EQ(sh->layout().tap_ids, layout().tap_ids);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(sh->seq_len(s), (int64_t)seqs[s].tokens.size());
    EXPECT_EQ(sh->prompt_len(s), seqs[s].prompt_len);
    EXPECT_EQ(sh->prompt_index(s), seqs[s].prompt_index);
    EXPECT_EQ(sh->temperature(s), seqs[s].temperature);
    for (size_t i = 0; i < seqs[s].tokens.size(); ++i) EXPECT_EQ(sh->tokens(s)[i], seqs[s].tokens[i]);
    for (size_t i = 0; i < seqs[s].taps.size(); ++i) ASSERT_EQ(sh->taps(s)[i], seqs[s].taps[i]);
    for (size_t i = 0; i < seqs[s].dist_ids.size(); ++i) {
      EXPECT_EQ(sh->dist_ids(s)[i], seqs[s].dist_ids[i]);
      EXPECT_EQ(sh->dist_probs(s)[i], seqs[s].dist_probs[i]);
    }
  }
}

TEST(Shard, DetectsDamage) {
  const std::string path = tmp_path("shard_dmg.safetensors");
  ASSERT_TRUE(write_shard(path, layout(), sample_seqs()).is_ok());
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // A flipped byte in the data region: the file still parses, only the checksum catches it.
  auto flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x40;
  const std::string p1 = tmp_path("shard_flip.safetensors");
  std::ofstream(p1, std::ios::binary).write(flipped.data(), (std::streamsize)flipped.size());
  auto a = Shard::open(p1, 1000, true);
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.message().find("checksum"), std::string::npos) << a.message();
  EXPECT_TRUE(Shard::open(p1, 1000, false).is_ok());  // without verification it opens
  // Truncated (a killed writer without the atomic rename would leave this).
  const std::string p2 = tmp_path("shard_trunc.safetensors");
  std::ofstream(p2, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size() / 2);
  EXPECT_FALSE(Shard::open(p2, 1000, true).is_ok());
  // Token ids beyond the vocabulary.
  auto b = Shard::open(path, 150, false);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.message().find("vocabulary"), std::string::npos) << b.message();
}

TEST(Shard, RejectsInconsistentSequence) {
  auto seqs = sample_seqs();
  seqs[1].taps.pop_back();
  EXPECT_FALSE(write_shard(tmp_path("shard_bad.safetensors"), layout(), seqs).is_ok());
  EXPECT_FALSE(std::filesystem::exists(tmp_path("shard_bad.safetensors")));
}

// The copyable-slot weight (train-drafter --copyable-weight): a slot gets it exactly when the latest
// earlier occurrence of its last 3 (else 2) true tokens is followed by its label.
TEST(Dataset, CopyableSlotsGetTheirWeight) {
  const std::string dir = tmp_path("copyable_ds");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RegenSeq q;
  q.prompt_index = 1;
  q.prompt_len = 4;
  q.tokens = {50, 51, 52, 53, 1, 2, 3, 9, 1, 2, 3, 9, 4, 1, 2, 5, 2, 3, 8, 1, 2, 3, 9, 6};
  const int len = (int)q.tokens.size(), resp = len - q.prompt_len;
  q.taps.assign((size_t)len * 16, 0x3f80);  // bf16 1.0
  for (int i = 0; i < resp; ++i)
    for (int j = 0; j < 3; ++j) {
      q.dist_ids.push_back(q.tokens[(size_t)std::min(q.prompt_len + i + 1, len - 1)] + j);
      q.dist_probs.push_back(j == 0 ? 0.8f : 0.1f);
    }
  ASSERT_TRUE(write_shard(dir + "/shard-00000.safetensors", layout(), std::vector<RegenSeq>{q}).is_ok());
  auto ds = Dataset::open({dir}, 100, 0);
  ASSERT_TRUE(ds.is_ok()) << ds.message();
  const std::vector<int> cols = {0, 1};
  // Independent rule: latest earlier start s of the last n tokens of x_0..x_p (n = 3, then 2).
  auto copyable = [&](int64_t p, int32_t label) {
    for (int n = 3; n >= 2; --n) {
      if (p + 1 < n + 1) continue;
      for (int64_t s = p - n; s >= 0; --s) {
        bool eq = true;
        for (int i = 0; i < n; ++i) eq = eq && q.tokens[(size_t)(s + i)] == q.tokens[(size_t)(p - n + 1 + i)];
        if (eq) return q.tokens[(size_t)(s + n)] == label;
      }
    }
    return false;
  };
  for (float w : {1.0f, 0.25f}) {
    Rng rng(3);
    TrainBatch b;
    BlockInputs in;
    in.copyable_weight = w;
    ds->make_batch(rng, 4, 64, 4, cols, &b, nullptr, in);
    int n_copyable = 0, n_other = 0;
    for (const TrainBlock& blk : b.blocks) {
      if (w == 1.0f) {
        EXPECT_TRUE(blk.weight.empty()) << "weight 1: no per-slot weights";
        continue;
      }
      ASSERT_EQ(blk.weight.size(), 4u);
      for (int k = 0; k < 4; ++k) {
        if (blk.label[(size_t)k] < 0) continue;
        const bool c = copyable(blk.anchor + k, blk.label[(size_t)k]);
        EXPECT_EQ(blk.weight[(size_t)k], c ? 0.25f : 1.0f) << "anchor " << blk.anchor << " slot " << k;
        (c ? n_copyable : n_other)++;
      }
    }
    if (w != 1.0f) {
      EXPECT_GT(n_copyable, 0);
      EXPECT_GT(n_other, 0);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Prompts, OverlapIsRefused) {
  const std::string tr = tmp_path("train.jsonl"), ev = tmp_path("eval.jsonl");
  std::ofstream(tr) << "{\"id\": \"a\", \"turns\": [\"hello there\"]}\n{\"id\": \"b\", \"turns\": [\" What is 2+2? \"]}\n";
  std::ofstream(ev) << "{\"id\": \"e1\", \"turns\": [\"What is 2+2?\"]}\n";
  auto t = read_prompt_file(tr);
  auto e = read_prompt_file(ev);
  ASSERT_TRUE(t.is_ok() && e.is_ok());
  const Status st = check_no_overlap(tr, *t, ev, *e);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("e1"), std::string::npos) << st.message();
  EXPECT_FALSE(check_no_overlap(ev, *e, ev, *e).is_ok());  // the evaluation file itself
  std::ofstream(ev) << "{\"id\": \"e1\", \"turns\": [\"Something else\"]}\n";
  EXPECT_TRUE(check_no_overlap(tr, *t, ev, *read_prompt_file(ev)).is_ok());
}

TEST(Regen, SoftmaxTopKMatchesReference) {
  std::vector<float> logits(5000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = (float)std::sin((double)i * 0.37) * 9.0f + (i == 4321 ? 12.0f : 0.0f);
  std::vector<float> exps;
  std::vector<int32_t> cand;
  int32_t ids[8];
  float probs[8];
  softmax_top_k(logits.data(), (int64_t)logits.size(), 8, ids, probs, exps, cand);
  // Reference: double softmax, full sort.
  double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
  for (float l : logits) z += std::exp((double)l - mx);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = (int32_t)i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(ids[j], order[j]);
    EXPECT_NEAR(probs[j], std::exp((double)logits[order[j]] - mx) / z, 1e-6);
  }
}

TEST(Kernels, ExpShiftSumMatchesReference) {
  std::vector<float> x(3000), a(3000), b(3000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float)std::cos((double)i) * 40.0f;
  const double s1 = kernels::exp_shift_sum(x.data(), 3000, 40.0f, 0.7f, a.data());
  const double s2 = kernels::exp_shift_sum_ref(x.data(), 3000, 40.0f, 0.7f, b.data());
  EXPECT_NEAR(s1, s2, 1e-5 * s2);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(a[i], b[i], 4e-7f * b[i] + 1e-37f);
}

}  // namespace
}  // namespace dspark::train
