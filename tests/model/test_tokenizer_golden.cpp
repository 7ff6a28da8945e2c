// Tokenization identical to llama.cpp on 100% of Spec-Bench dev prompts, raw and chat-templated
// (goldens: scripts/gen_goldens.py -> tests/goldens/tokens.jsonl).
#include "real_model.h"

namespace dspark::testing {
namespace {

TEST(TokenizerGolden, AllSpecBenchPromptsMatchLlamaCpp) {
  DSPARK_REQUIRE_REAL_MODEL();
  const auto rows = read_jsonl(golden_path("tokens.jsonl"));
  ASSERT_GE(rows.size(), 240u);
  int raw_bad = 0, chat_bad = 0;
  for (const auto& r : rows) {
    const std::string text = r["text"];
    const auto raw = real_model()->tok->encode(text, /*add_special=*/true, /*parse_special=*/false);
    const auto chat = real_model()->tok->encode(r["chat_text"].get<std::string>(), false, true);
    if (raw != r["raw_ids"].get<std::vector<int32_t>>()) {
      ++raw_bad;
      ADD_FAILURE() << "raw tokenization differs for question " << r["question_id"];
    }
    if (chat != r["chat_ids"].get<std::vector<int32_t>>()) {
      ++chat_bad;
      ADD_FAILURE() << "chat tokenization differs for question " << r["question_id"];
    }
  }
  std::printf("tokenizer golden: %zu prompts, raw mismatches %d, chat mismatches %d\n", rows.size(), raw_bad, chat_bad);
}

}  // namespace
}  // namespace dspark::testing
