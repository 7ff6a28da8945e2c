// Shared fixture for the real-model tests: the GGUF named by $DSPARK_MODEL (scripts/test.sh sets it
// from `dspark get`), loaded once per test binary. Without it the tests skip and say why.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "runtime/loaded_model.h"

namespace dspark::testing {

// The model named by environment variable `env`, loaded once; nullptr when the variable is unset.
inline std::unique_ptr<runtime::LoadedModel> load_env_model(const char* env) {
  std::unique_ptr<runtime::LoadedModel> out;
  const char* path = std::getenv(env);
  if (!path || !*path) return out;
  auto r = runtime::load_model(path, "");
  if (r.is_ok()) out = std::make_unique<runtime::LoadedModel>(std::move(r).value());
  else ADD_FAILURE() << env << "=" << path << " does not load: " << r.message();
  return out;
}

inline runtime::LoadedModel* real_model() {
  static std::unique_ptr<runtime::LoadedModel> lm = load_env_model("DSPARK_MODEL");
  return lm.get();
}

// The second target, SmolLM2-135M-Instruct Q4_1 ($DSPARK_SMOLLM2_MODEL; scripts/test.sh sets it).
inline runtime::LoadedModel* real_smollm2() {
  static std::unique_ptr<runtime::LoadedModel> lm = load_env_model("DSPARK_SMOLLM2_MODEL");
  return lm.get();
}

inline ThreadPool& test_pool() {
  static ThreadPool pool(ThreadPool::default_threads());
  return pool;
}

#define DSPARK_REQUIRE_REAL_MODEL()                                                       \
  if (::dspark::testing::real_model() == nullptr)                                         \
  GTEST_SKIP() << "set DSPARK_MODEL to the Gemma 3 270M Q4_K_M GGUF (scripts/test.sh does)"

#define DSPARK_REQUIRE_SMOLLM2()                                                          \
  if (::dspark::testing::real_smollm2() == nullptr)                                       \
  GTEST_SKIP() << "set DSPARK_SMOLLM2_MODEL to the SmolLM2-135M-Instruct Q4_1 GGUF (scripts/test.sh does)"

// Goldens of the default model live in tests/goldens/, those of other models in tests/goldens/<model>/.
inline std::string golden_path(const std::string& name) { return std::string(DSPARK_SOURCE_DIR) + "/tests/goldens/" + name; }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace dspark::testing
