// dspark tokenize: the model's tokenizer on a text (ids and pieces), or ids back to text.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/loaded_model.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

// "2,651,6037", "2 651 6037" or "[2, 651, 6037]": ids in [0, n_vocab).
Result<std::vector<int32_t>> parse_ids(const std::string& text, int32_t n_vocab) {
  std::vector<int32_t> ids;
  std::string cur;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c != ',' && c != ' ' && c != '[' && c != ']') {
      cur += c;
      continue;
    }
    if (cur.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(cur.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= n_vocab)
      return Status::error("--detokenize: '" + cur + "' is not a token id in [0, " + std::to_string(n_vocab) + ")");
    ids.push_back((int32_t)v);
    cur.clear();
  }
  return ids;
}

std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void print_tokens(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, bool json, bool ids_only) {
  if (json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tok.token_to_piece(id, true));
    std::printf("%s\n", dump_json({{"tokens", ids}, {"pieces", pieces}, {"n_tokens", ids.size()}}).c_str());
  } else if (ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
  } else {
    for (int32_t id : ids) std::printf("%6d  %s\n", id, dump_json(tok.token_to_piece(id, true)).c_str());
    std::printf("%zu tokens\n", ids.size());
  }
}

}  // namespace

int verb_tokenize(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, chat_template, prompt, prompt_file, detok;
  bool json = false, ids_only = false, no_special = false, no_parse_special = false, chat = false;
  Args args("dspark tokenize --model M (-p TEXT | -f FILE | --detokenize IDS) [--ids] [--json]",
            "Tokenize a text with the model's tokenizer: one line per token (id, piece), --ids for the id\n"
            "list only, --json for {tokens, pieces, n_tokens}. --detokenize turns ids (comma- or\n"
            "space-separated) back into text. The server's /tokenize and /detokenize routes do the same.");
  add_model_flags(args, &model_spec, &cache, &chat_template);
  args.add("--prompt,-p", &prompt, "text to tokenize");
  args.add("--prompt-file,-f", &prompt_file, "read the text from a file");
  args.add("--detokenize", &detok, "token ids to turn back into text (e.g. \"2,651,6037\")");
  args.add_flag("--chat", &chat, "wrap the text in the chat template as one user turn (generation prompt added)");
  args.add_flag("--no-special", &no_special, "do not add the model's BOS token");
  args.add_flag("--no-parse-special", &no_parse_special, "treat control-token text (e.g. <start_of_turn>) as plain text");
  args.add_flag("--ids", &ids_only, "print only the id list, e.g. [2, 651, 6037]");
  add_json_flag(args, &json, "print one JSON object");
  const VerbError fail{"tokenize"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (!prompt.empty() + !prompt_file.empty() + !detok.empty() != 1)
    return fail("give exactly one of -p TEXT, -f FILE or --detokenize IDS");
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) return fail("cannot read " + prompt_file);
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto lm = load_model(model_spec, cache, chat_template);
  if (!lm) return fail(lm.message());
  const auto& tok = *lm->tok;
  if (!detok.empty()) {
    auto ids = parse_ids(detok, tok.n_vocab());
    if (!ids) return fail(ids.message());
    const std::string text = tok.decode(*ids, /*render_special=*/true);
    if (json) std::printf("%s\n", dump_json({{"content", text}}).c_str());
    else std::printf("%s\n", text.c_str());
    return 0;
  }
  std::string text = prompt;
  bool parse_special = !no_parse_special;
  if (chat) {
    auto t = tokenizer::render_chat(lm->chat, {{"user", prompt}}, /*add_generation_prompt=*/true, /*include_bos=*/false);
    if (!t) return fail(t.message());
    text = *t;
    parse_special = true;
  }
  print_tokens(tok, tok.encode(text, /*add_special=*/!no_special, parse_special), json, ids_only);
  return 0;
}

}  // namespace dspark::tools
