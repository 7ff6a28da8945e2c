// Multi-sequence forward on the real model: each session gets bitwise what its own forward gives
// (the quantized kernels, AMX included, are batch-invariant).
#include <cstring>

#include "real_model.h"

namespace dspark::testing {
namespace {

TEST(MultiReal, BatchedSequencesEqualSeparateForwards) {
  DSPARK_REQUIRE_REAL_MODEL();
  const auto& model = *real_model()->model;
  const auto& tok = *real_model()->tok;
  const std::vector<std::string> texts = {"The capital of France is", "def add(a, b):\n    return",
                                          "Water boils at 100 degrees"};
  const model::SessionOptions opt{.n_ctx = 256, .max_batch = 64};
  model::ForwardScratch scratch(model.backend(), model.config(), 64, 256, &test_pool());
  std::vector<std::unique_ptr<model::Session>> alone, batched;
  std::vector<std::vector<int32_t>> ids;
  std::vector<model::SeqInput> seqs;
  for (const auto& t : texts) {
    ids.push_back(tok.encode(t, true, false));
    alone.push_back(std::make_unique<model::Session>(model, opt, &test_pool()));
    batched.push_back(std::make_unique<model::Session>(model, opt, &test_pool()));
  }
  for (size_t i = 0; i < texts.size(); ++i) seqs.push_back({batched[i].get(), ids[i]});
  const model::ForwardOptions fo{model::LogitsMode::kAll, {6}};
  ASSERT_TRUE(model.forward_multi(seqs, fo, scratch).is_ok());
  const int64_t n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE(model.forward(*alone[i], ids[i], fo).is_ok());
    EXPECT_EQ(std::memcmp(batched[i]->logits(), alone[i]->logits(), ids[i].size() * n_vocab * sizeof(float)), 0)
        << texts[i];
    EXPECT_EQ(batched[i]->tap(0), alone[i]->tap(0)) << texts[i];
  }
}

}  // namespace
}  // namespace dspark::testing
