#include "quant/fake_quant.h"

#include <memory>
#include <vector>

#include "quant/affine.h"
#include "quant/convert.h"
#include "quant/lloyd_max.h"
#include "quant/qmatrix.h"
#include "quant/turbo.h"

namespace dspark::quant {

Status fake_quantize(const QuantSpec& spec0, const std::string& module, uint64_t seed, float* w, int64_t rows,
                     int64_t cols) {
  if (!spec0.quantized()) return Status::ok();
  QuantSpec spec = spec0;
  if (spec.method == Method::kTurbo) {
    if (spec.rotation_block == 0) spec.rotation_block = default_rotation_block(cols);
    spec.rotation_seed = module_rotation_seed(seed, module);
  }
  DSPARK_RETURN_IF_ERROR(check_spec(spec, module));
  DSPARK_RETURN_IF_ERROR(check_spec_shape(spec, cols, module));
  const int g = spec.group_size, bits = spec.bits;
  std::vector<uint8_t> codes((size_t)code_row_bytes(cols, bits));
  std::vector<uint16_t> scales((size_t)(cols / g)), biases((size_t)(cols / g));
  if (spec.method == Method::kAffine) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = w + r * cols;
      affine_quantize_row(row, cols, bits, g, codes.data(), scales.data(), biases.data());
      affine_dequantize_row(codes.data(), scales.data(), biases.data(), cols, bits, g, row);
    }
    return Status::ok();
  }
  auto tables = std::make_shared<TurboTables>();
  tables->levels = turbo_levels(bits);
  tables->rot = make_rotation(cols, spec.rotation_block, spec.rotation_seed);
  QuantMatrix m;
  m.spec = spec;
  m.n_rows = 1;
  m.n_cols = cols;
  m.codes = codes.data();
  m.scales = scales.data();
  m.turbo = tables;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = w + r * cols;
    turbo_quantize_row(row, tables->rot, tables->levels, bits, g, codes.data(), scales.data());
    dequantize_row(m, 0, row, kernels::Isa::kScalar);
  }
  return Status::ok();
}

}  // namespace dspark::quant
