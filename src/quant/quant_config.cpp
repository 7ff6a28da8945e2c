#include "quant/quant_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dspark::quant {

using nlohmann::json;

std::string module_of(const std::string& name) {
  static const std::string kSuffix = ".weight";
  if (name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return name.substr(0, name.size() - kSuffix.size());
  return name;
}

namespace {

Status fail(const std::string& file, const std::string& key, const std::string& what) {
  return Status::error(file + ": field 'quantization." + key + "' " + what);
}

Status read_int(const json& obj, const char* field, int64_t* out, const std::string& file, const std::string& key) {
  auto it = obj.find(field);
  if (it == obj.end()) return Status::ok();
  if (!it->is_number_integer()) return fail(file, key + "." + field, "= " + it->dump() + " is not an integer");
  *out = it->get<int64_t>();
  return Status::ok();
}

// Fills `s` from obj's mode / bits / group_size / rotation_* (absent fields keep s's values).
Status read_spec(const json& obj, QuantSpec* s, const std::string& file, const std::string& key, bool module) {
  static const char* kFields[] = {"mode", "bits", "group_size", "rotation", "rotation_block", "rotation_seed"};
  if (module)
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (std::find(std::begin(kFields), std::end(kFields), it.key()) == std::end(kFields))
        return fail(file, key + "." + it.key(),
                    "is not a known quantization field (mode, bits, group_size, rotation, rotation_block, rotation_seed)");
  if (auto it = obj.find("rotation"); it != obj.end() && *it != "hadamard")
    return fail(file, key + ".rotation", "= " + it->dump() + " is not 'hadamard'");
  if (auto it = obj.find("mode"); it != obj.end()) {
    if (!it->is_string() || !method_from_name(it->get<std::string>(), &s->method))
      return fail(file, (key.empty() ? "" : key + ".") + "mode", "= " + it->dump() + " is not 'affine' or 'turbo'");
  } else if (s->method == Method::kNone) {
    s->method = Method::kAffine;  // MLX's default mode
  }
  const std::string pre = key.empty() ? "" : key + ".";
  int64_t bits = s->bits, g = s->group_size, block = s->rotation_block, seed = (int64_t)s->rotation_seed;
  DSPARK_RETURN_IF_ERROR(read_int(obj, "bits", &bits, file, key));
  DSPARK_RETURN_IF_ERROR(read_int(obj, "group_size", &g, file, key));
  DSPARK_RETURN_IF_ERROR(read_int(obj, "rotation_block", &block, file, key));
  DSPARK_RETURN_IF_ERROR(read_int(obj, "rotation_seed", &seed, file, key));
  if (seed < 0) return fail(file, pre + "rotation_seed", "must be >= 0");
  s->bits = (int)bits;
  s->group_size = (int)g;
  s->rotation_block = (int)block;
  s->rotation_seed = (uint64_t)seed;
  return check_spec(*s, file + ": field 'quantization" + (key.empty() ? "" : "." + key) + "'");
}

}  // namespace

Result<QuantConfig> parse_quant_config(const json& cfg, const std::string& file) {
  QuantConfig qc;
  auto it = cfg.find("quantization");
  if (it == cfg.end() || it->is_null()) it = cfg.find("quantization_config");
  if (it == cfg.end() || it->is_null()) return qc;
  if (!it->is_object()) return Status::error(file + ": field 'quantization' is not an object");
  qc.present = true;
  const json& q = *it;
  if (q.contains("bits") || q.contains("group_size") || q.contains("mode")) {
    DSPARK_RETURN_IF_ERROR(read_spec(q, &qc.defaults, file, "", false));
    if (qc.defaults.bits == 0 || qc.defaults.group_size == 0)
      return fail(file, "bits", "and 'group_size' are both needed for the default");
  }
  for (auto m = q.begin(); m != q.end(); ++m) {
    const std::string& key = m.key();
    if (key == "bits" || key == "group_size" || key == "mode") continue;
    if (key == "turbo_codebooks") {
      if (!m->is_object()) return fail(file, key, "is not an object");
      for (auto c = m->begin(); c != m->end(); ++c) {
        const int bits = std::atoi(c.key().c_str());
        if (bits < 1 || bits > 8 || std::to_string(bits) != c.key() || !c->is_array() || (int64_t)c->size() != (1 << bits))
          return fail(file, key + "." + c.key(), "must map a bit width to 2^bits levels");
        std::vector<float> lv;
        for (const auto& v : *c) {
          if (!v.is_number() || !std::isfinite(v.get<double>())) return fail(file, key + "." + c.key(), "has a non-number level");
          if (!lv.empty() && !(v.get<float>() > lv.back())) return fail(file, key + "." + c.key(), "levels are not ascending");
          lv.push_back(v.get<float>());
        }
        qc.turbo_codebooks[bits] = std::move(lv);
      }
      continue;
    }
    if (m->is_boolean() && !m->get<bool>()) {
      qc.modules[key] = std::nullopt;
      continue;
    }
    if (!m->is_object()) return fail(file, key, "= " + m->dump() + " is neither false nor an object");
    QuantSpec s = qc.defaults;  // fields absent from the entry inherit the defaults
    DSPARK_RETURN_IF_ERROR(read_spec(*m, &s, file, key, true));
    if (s.bits == 0 || s.group_size == 0) return fail(file, key, "needs 'bits' and 'group_size'");
    qc.modules[key] = s;
  }
  return qc;
}

Result<QuantConfig> read_quant_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::error(path + ": not a JSON object");
  return parse_quant_config(j, path);
}

json quant_spec_json(const QuantSpec& s) {
  if (!s.quantized()) return false;
  json j = {{"mode", method_name(s.method)}, {"bits", s.bits}, {"group_size", s.group_size}};
  if (s.method == Method::kTurbo) {
    j["rotation"] = "hadamard";
    j["rotation_block"] = s.rotation_block;
    j["rotation_seed"] = s.rotation_seed;
  }
  return j;
}

json quant_config_json(const QuantConfig& qc) {
  json q = json::object();
  if (qc.defaults.quantized()) {
    q["mode"] = method_name(qc.defaults.method);
    q["bits"] = qc.defaults.bits;
    q["group_size"] = qc.defaults.group_size;
  }
  for (const auto& [name, s] : qc.modules) q[name] = s ? quant_spec_json(*s) : json(false);
  if (!qc.turbo_codebooks.empty()) {
    json cb = json::object();
    for (const auto& [bits, lv] : qc.turbo_codebooks) cb[std::to_string(bits)] = lv;
    q["turbo_codebooks"] = cb;
  }
  return q;
}

}  // namespace dspark::quant
