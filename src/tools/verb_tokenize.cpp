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
  if (Status st = args.parse(argc, argv, 2); !st) {
    std::fprintf(stderr, "dspark tokenize: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  const int sources = !prompt.empty() + !prompt_file.empty() + !detok.empty();
  if (sources != 1) {
    std::fprintf(stderr, "dspark tokenize: give exactly one of -p TEXT, -f FILE or --detokenize IDS\n");
    return kExitBadInput;
  }
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) { std::fprintf(stderr, "dspark tokenize: cannot read %s\n", prompt_file.c_str()); return kExitBadInput; }
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto lm = load_model(model_spec, cache, chat_template);
  if (!lm) { std::fprintf(stderr, "dspark tokenize: %s\n", lm.message().c_str()); return kExitBadInput; }
  const auto& tok = *lm->tok;

  if (!detok.empty()) {
    std::vector<int32_t> ids;
    std::string cur;
    for (size_t i = 0; i <= detok.size(); ++i) {
      const char c = i < detok.size() ? detok[i] : ',';
      if (c == ',' || c == ' ' || c == '[' || c == ']') {
        if (cur.empty()) continue;
        char* end = nullptr;
        const long long v = std::strtoll(cur.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v >= tok.n_vocab()) {
          std::fprintf(stderr, "dspark tokenize: --detokenize: '%s' is not a token id in [0, %d)\n", cur.c_str(),
                       tok.n_vocab());
          return kExitBadInput;
        }
        ids.push_back((int32_t)v);
        cur.clear();
      } else {
        cur += c;
      }
    }
    const std::string text = tok.decode(ids, /*render_special=*/true);
    if (json) std::printf("%s\n", nlohmann::json{{"content", text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else std::printf("%s\n", text.c_str());
    return 0;
  }

  std::string text = prompt;
  bool parse_special = !no_parse_special;
  if (chat) {
    auto t = tokenizer::render_chat(lm->chat, {{"user", prompt}}, /*add_generation_prompt=*/true, /*include_bos=*/false);
    if (!t) { std::fprintf(stderr, "dspark tokenize: %s\n", t.message().c_str()); return kExitBadInput; }
    text = *t;
    parse_special = true;
  }
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/!no_special, parse_special);
  if (json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tok.token_to_piece(id, true));
    nlohmann::json j = {{"tokens", ids}, {"pieces", pieces}, {"n_tokens", ids.size()}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
  } else {
    for (int32_t id : ids) {
      const std::string piece = nlohmann::json(tok.token_to_piece(id, true)).dump(-1, ' ', false,
                                                                                     nlohmann::json::error_handler_t::replace);
      std::printf("%6d  %s\n", id, piece.c_str());
    }
    std::printf("%zu tokens\n", ids.size());
  }
  return 0;
}

}  // namespace dspark::tools
