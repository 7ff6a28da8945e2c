// The `quantization` block of a drafter's config.json (docs/QUANT-FORMAT.md §2; mlx-lm's
// convention, extended for turbo):
//   "quantization": {"mode": "affine", "bits": 4, "group_size": 64,          defaults
//                    "<module>": {"mode": .., "bits": .., "group_size": ..}    per module
//                    "<module>": {"mode": "turbo", ..., "rotation_block": 128, "rotation_seed": 7}
//                    "<module>": false,                                        kept dense
//                    "turbo_codebooks": {"4": [16 ascending levels]}}
// A module path is the tensor name without ".weight" ("layers.0.mlp.up_proj"). A module is
// quantized iff `<module>.scales` exists (MLX); its settings are its entry, else the defaults.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "quant/quant_types.h"

namespace dspark::quant {

struct QuantConfig {
  bool present = false;
  QuantSpec defaults;                                        // method kNone when no default is given
  std::map<std::string, std::optional<QuantSpec>> modules;   // nullopt = `false` (kept dense)
  std::map<int, std::vector<float>> turbo_codebooks;         // bits -> [2^bits] levels
};

// "layers.0.mlp.up_proj.weight" -> "layers.0.mlp.up_proj"; other names unchanged.
std::string module_of(const std::string& tensor_name);

// Parses cfg["quantization"] (else cfg["quantization_config"]); absent -> present = false.
// Errors name the file and the key: "<file>: field 'quantization.fc' ...".
Result<QuantConfig> parse_quant_config(const nlohmann::json& cfg, const std::string& file);
Result<QuantConfig> read_quant_config(const std::string& config_path);

// The block as written by the converter (every module listed explicitly).
nlohmann::json quant_config_json(const QuantConfig& qc);
nlohmann::json quant_spec_json(const QuantSpec& s);

}  // namespace dspark::quant
