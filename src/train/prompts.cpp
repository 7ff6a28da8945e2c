#include "train/prompts.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tokenizer/chat_template.h"

namespace dspark::train {

Result<std::vector<PromptRecord>> read_prompt_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open the prompt file");
  std::vector<PromptRecord> out;
  std::string line;
  for (int64_t no = 0; std::getline(in, line); ++no) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("turns") || !j["turns"].is_array() ||
        j["turns"].empty() || !j["turns"][0].is_string() || j["turns"][0].get<std::string>().empty())
      return Status::error(path + ":" + std::to_string(no + 1) + ": expected {\"turns\": [\"text\", ...]}");
    PromptRecord r;
    r.line = no;
    r.text = j["turns"][0].get<std::string>();
    if (j.contains("id") && j["id"].is_string()) r.id = j["id"].get<std::string>();
    if (j.contains("category") && j["category"].is_string()) r.category = j["category"].get<std::string>();
    out.push_back(std::move(r));
  }
  if (out.empty()) return Status::error(path + ": no prompts");
  return out;
}

Status check_no_overlap(const std::string& train_path, const std::vector<PromptRecord>& train,
                        const std::string& eval_path, const std::vector<PromptRecord>& eval) {
  std::error_code ec;
  if (std::filesystem::equivalent(train_path, eval_path, ec))
    return Status::error(train_path + " is the evaluation prompt file; training must never read it");
  std::unordered_map<std::string, const PromptRecord*> ev;
  for (const PromptRecord& e : eval) ev.emplace(tokenizer::trim_python_whitespace(e.text), &e);
  int64_t n = 0;
  const PromptRecord* first = nullptr;
  const PromptRecord* first_eval = nullptr;
  for (const PromptRecord& t : train) {
    auto it = ev.find(tokenizer::trim_python_whitespace(t.text));
    if (it == ev.end()) continue;
    if (!first) { first = &t; first_eval = it->second; }
    ++n;
  }
  if (n == 0) return Status::ok();
  return Status::error(train_path + ":" + std::to_string(first->line + 1) + " (id '" + first->id +
                       "') repeats evaluation prompt '" + first_eval->id + "' of " + eval_path + "; " +
                       std::to_string(n) + " training prompt(s) overlap the evaluation set");
}

}  // namespace dspark::train
