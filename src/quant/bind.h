// Binds a checkpoint's matrices as DraftMatrix: dense F32 / F16 / BF16 tensors over the mapped
// data, or quantized modules (docs/QUANT-FORMAT.md): affine = `<module>.weight` U32 codes +
// `<module>.scales` + `<module>.biases` (BF16); turbo = codes + scales, with the rotation from the
// module's config entry and the codebook from `turbo_codebooks`. Every tensor read is recorded in
// `used`; data not aligned to its element size is copied once into `owned`.
// Errors name the file and the tensor or config field.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/safetensors.h"
#include "quant/draft_matrix.h"
#include "quant/quant_config.h"

namespace dspark::quant {

class MatrixBinder {
 public:
  // `dir` names the checkpoint in errors; `config_file` the config.json.
  MatrixBinder(const formats::SafetensorsModel& st, const QuantConfig& qc, std::string dir, std::string config_file,
               std::set<std::string>& used, std::vector<std::unique_ptr<uint8_t[]>>& owned)
      : st_(st), qc_(qc), dir_(std::move(dir)), config_file_(std::move(config_file)), used_(used), owned_(owned) {}

  // Tensor `name` ("<module>.weight") as a [rows, cols] matrix.
  Status bind(const std::string& name, int64_t rows, int64_t cols, DraftMatrix* out);

 private:
  Status bind_dense(const std::string& name, int64_t rows, int64_t cols, DraftMatrix* out);
  Status bind_quantized(const std::string& module, const QuantSpec& spec, int64_t rows, int64_t cols, DraftMatrix* out);
  // Tensor `name` with exactly this dtype and shape; data aligned to `align` bytes.
  Result<const uint8_t*> tensor(const std::string& name, formats::StDType dtype, std::vector<int64_t> shape, size_t align);
  std::string file_of(const formats::StTensorInfo& info) const;

  const formats::SafetensorsModel& st_;
  const QuantConfig& qc_;
  std::string dir_, config_file_;
  std::set<std::string>& used_;
  std::vector<std::unique_ptr<uint8_t[]>>& owned_;
};

}  // namespace dspark::quant
