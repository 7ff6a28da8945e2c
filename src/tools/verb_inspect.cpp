// dspark inspect: a GGUF file's metadata and tensor table (name, type, shape, offset, bytes).
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/registry.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

int verb_inspect(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache;
  bool json = false;
  Args args("dspark inspect --model M [--json]", "Print the metadata keys and tensor table of a GGUF file.");
  add_model_flags(args, &model_spec, &cache);
  add_json_flag(args, &json, "print one JSON object");
  const VerbError fail{"inspect"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  auto path = resolve_model_path(model_spec, resolve_cache_dir(cache));
  if (!path) return fail(path.message());
  auto f = formats::GgufFile::open(*path);
  if (!f) return fail(f.message());

  std::map<std::string, uint64_t> bytes_by_type;
  uint64_t total = 0;
  for (const auto& t : f->tensors()) {
    bytes_by_type[dtype_name(t.type)] += t.n_bytes;
    total += t.n_bytes;
  }
  if (json) {
    nlohmann::json j = {{"path", *path}, {"version", f->version()}, {"alignment", f->alignment()},
                        {"tensor_bytes", total}, {"bytes_by_type", bytes_by_type}};
    for (const auto& kv : f->kvs()) j["metadata"].push_back(describe_kv(kv));
    for (const auto& t : f->tensors()) {
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      j["tensors"].push_back({{"name", t.name}, {"type", dtype_name(t.type)}, {"ne", ne},
                              {"offset", t.offset}, {"bytes", t.n_bytes}});
    }
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s: GGUF v%u, alignment %zu, %zu metadata keys, %zu tensors, %llu tensor bytes\n\n", path->c_str(),
              (unsigned)f->version(), (size_t)f->alignment(), f->kvs().size(), f->tensors().size(),
              (unsigned long long)total);
  for (const auto& kv : f->kvs()) std::printf("%s\n", describe_kv(kv).c_str());
  std::printf("\n%-36s %-6s %-22s %12s\n", "tensor", "type", "shape (ne0, ne1, ...)", "bytes");
  for (const auto& t : f->tensors()) {
    std::string shape;
    for (int d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    std::printf("%-36s %-6s %-22s %12zu\n", t.name.c_str(), dtype_name(t.type), shape.c_str(), t.n_bytes);
  }
  std::printf("\nbytes by type:");
  for (const auto& [type, b] : bytes_by_type) std::printf(" %s %.1f MB;", type.c_str(), b / 1e6);
  std::printf("\n");
  return 0;
}

}  // namespace dspark::tools
