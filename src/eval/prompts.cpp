#include "eval/prompts.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace dspark::eval {

Result<std::vector<Prompt>> load_prompts(const std::string& path, int64_t n) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open the prompt file (--prompts)");
  std::map<std::string, std::vector<Prompt>> by_cat;
  std::string line;
  int64_t line_no = 0, n_total = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("turns") || !j["turns"].is_array() || j["turns"].empty() ||
        !j["turns"][0].is_string())
      return Status::error(path + ":" + std::to_string(line_no) + ": expected {\"category\", \"turns\": [text, ...]}");
    std::string cat = j.contains("category") && j["category"].is_string() ? j["category"].get<std::string>() : "all";
    by_cat[cat].push_back({cat, j["turns"][0].get<std::string>()});
    ++n_total;
  }
  if (n <= 0) n = n_total;
  std::vector<Prompt> out;  // round robin over categories, file order within each
  for (size_t i = 0; (int64_t)out.size() < n; ++i) {
    bool any = false;
    for (auto& [cat, v] : by_cat)
      if (i < v.size() && (int64_t)out.size() < n) { out.push_back(v[i]); any = true; }
    if (!any) break;
  }
  if (out.empty()) return Status::error(path + ": no prompts");
  return out;
}

Result<std::vector<int32_t>> encode_prompt(const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& tmpl,
                                           const std::string& text, bool chat) {
  if (!chat) return tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  auto rendered = tokenizer::render_chat(tmpl, {{"user", text}}, /*add_generation_prompt=*/true, /*include_bos=*/false);
  if (!rendered) return rendered.status();
  return tok.encode(*rendered, /*add_special=*/true, /*parse_special=*/true);
}

}  // namespace dspark::eval
