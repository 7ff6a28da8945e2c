// BpeGoldens: the SmolLM2-135M-Instruct tokenizer ($DSPARK_SMOLLM2_MODEL, skipped when unset)
// against llama.cpp's ids in tests/goldens/smollm2/tokens.jsonl (scripts/gen_goldens.py --name
// smollm2): every first turn of data/spec_bench_dev.jsonl, raw (add_special, no special parsing)
// and chat (the recorded rendering of the GGUF's chat template, no added specials, special
// parsing), exactly as the script called llama_tokenize.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/chat_template.h"

namespace dspark::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

std::string first_difference(const Ids& got, const Ids& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "first difference at " + std::to_string(i) + " of " + std::to_string(want.size()) +
         " (ours " + (i < got.size() ? std::to_string(got[i]) : "end") + ", llama.cpp " +
         (i < want.size() ? std::to_string(want[i]) : "end") + ")";
}

TEST(BpeGoldens, Smollm2TokensMatchLlamaCpp) {
  const char* path = std::getenv("DSPARK_SMOLLM2_MODEL");
  if (path == nullptr || *path == '\0') {
    GTEST_SKIP() << "DSPARK_SMOLLM2_MODEL is not set (path to the SmolLM2-135M-Instruct GGUF)";
  }
  const std::string golden = std::string(DSPARK_SOURCE_DIR) + "/tests/goldens/smollm2/tokens.jsonl";
  std::ifstream in(golden);
  ASSERT_TRUE(in.good()) << "cannot read " << golden;
  Result<formats::GgufFile> file = formats::GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  Result<BpeTokenizer> tok = load_bpe_tokenizer(*file);
  ASSERT_TRUE(tok.is_ok()) << tok.message();

  // Our ChatML renderer, with the template detected from the GGUF, must give jinja2's text.
  Result<ChatTemplate> tmpl = resolve_chat_template(*file, "");
  ASSERT_TRUE(tmpl.is_ok()) << tmpl.message();
  EXPECT_EQ(tmpl->family, ChatFamily::kChatML);
  int total = 0, raw_same = 0, chat_same = 0, rendered_same = 0, reported = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json rec = nlohmann::json::parse(line);
    const std::string qid = rec.at("question_id").dump();
    const Ids raw = tok->encode(rec.at("text").get<std::string>(), true, false);
    const Ids chat = tok->encode(rec.at("chat_text").get<std::string>(), false, true);
    const Ids want_raw = rec.at("raw_ids").get<Ids>();
    const Ids want_chat = rec.at("chat_ids").get<Ids>();
    ++total;
    Result<std::string> rendered = render_chat(*tmpl, {{"user", rec.at("text").get<std::string>()}}, true, false);
    rendered_same += rendered.is_ok() && *rendered == rec.at("chat_text").get<std::string>();
    raw_same += raw == want_raw;
    chat_same += chat == want_chat;
    if (raw != want_raw && reported++ < 5) {
      ADD_FAILURE() << "q" << qid << " raw: " << first_difference(raw, want_raw);
    }
    if (chat != want_chat && reported++ < 5) {
      ADD_FAILURE() << "q" << qid << " chat: " << first_difference(chat, want_chat);
    }
  }
  std::printf("[ BpeGoldens ] smollm2: raw %d / %d identical, chat %d / %d identical, chat template "
              "rendering %d / %d identical to jinja2\n", raw_same, total, chat_same, total, rendered_same, total);
  EXPECT_GT(total, 0);
  EXPECT_EQ(raw_same, total);
  EXPECT_EQ(chat_same, total);
  EXPECT_EQ(rendered_same, total);
}

}  // namespace
}  // namespace dspark::tokenizer
