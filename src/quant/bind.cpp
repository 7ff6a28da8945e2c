#include "quant/bind.h"

#include <cstring>

namespace dspark::quant {

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

bool float_dtype(formats::StDType t, DType* out) {
  switch (t) {
    case formats::StDType::kF32: *out = DType::F32; return true;
    case formats::StDType::kF16: *out = DType::F16; return true;
    case formats::StDType::kBF16: *out = DType::BF16; return true;
    default: return false;
  }
}

}  // namespace

std::string MatrixBinder::file_of(const formats::StTensorInfo& info) const {
  const formats::SafetensorsFile* f = st_.file_of(info);
  return f ? f->path() : dir_;
}

Status MatrixBinder::bind(const std::string& name, int64_t rows, int64_t cols, DraftMatrix* out) {
  const std::string module = module_of(name);
  const bool has_scales = module != name && st_.find(module + ".scales") != nullptr;
  auto entry = qc_.modules.find(module);
  const bool listed = entry != qc_.modules.end();
  if (listed && entry->second) {
    if (!has_scales)
      return Status::error(config_file_ + ": field 'quantization." + module + "' describes a quantized module, but " +
                           dir_ + " has no tensor " + in_quotes(module + ".scales"));
    return bind_quantized(module, *entry->second, rows, cols, out);
  }
  if (has_scales) {
    if (listed)
      return Status::error(config_file_ + ": field 'quantization." + module + "' is false, but " + dir_ +
                           " has a tensor " + in_quotes(module + ".scales"));
    if (!qc_.defaults.quantized())
      return Status::error(dir_ + ": tensor " + in_quotes(module + ".scales") + " exists but " + config_file_ +
                           " has no 'quantization' settings for it");
    return bind_quantized(module, qc_.defaults, rows, cols, out);
  }
  return bind_dense(name, rows, cols, out);
}

Status MatrixBinder::bind_dense(const std::string& name, int64_t rows, int64_t cols, DraftMatrix* out) {
  const formats::StTensorInfo* info = st_.find(name);
  if (!info) return Status::error(dir_ + ": missing tensor " + in_quotes(name));
  DType t;
  if (!float_dtype(info->dtype, &t))
    return Status::error(file_of(*info) + ": tensor " + in_quotes(name) + " has dtype " + formats::st_dtype_name(info->dtype) +
                         ", expected F32, F16 or BF16" +
                         (info->dtype == formats::StDType::kU32 ? " (or quantized: no '.scales' tensor found)" : ""));
  auto p = tensor(name, info->dtype, {rows, cols}, formats::st_dtype_size(info->dtype));
  if (!p) return p.status();
  *out = DraftMatrix::dense(kernels::QMatrix{t, rows, cols, p.value(), (size_t)cols * formats::st_dtype_size(info->dtype)});
  return Status::ok();
}

Result<const uint8_t*> MatrixBinder::tensor(const std::string& name, formats::StDType dtype, std::vector<int64_t> shape,
                                            size_t align) {
  const formats::StTensorInfo* info = st_.find(name);
  if (!info) return Status::error(dir_ + ": missing tensor " + in_quotes(name));
  used_.insert(name);
  if (info->dtype != dtype)
    return Status::error(file_of(*info) + ": tensor " + in_quotes(name) + " has dtype " + formats::st_dtype_name(info->dtype) +
                         ", expected " + formats::st_dtype_name(dtype));
  if (info->shape != shape)
    return Status::error(file_of(*info) + ": tensor " + in_quotes(name) + " has shape " + formats::st_shape_string(info->shape) +
                         ", expected " + formats::st_shape_string(shape));
  const uint8_t* p = st_.data(*info);
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    owned_.emplace_back(new uint8_t[info->n_bytes]);
    std::memcpy(owned_.back().get(), p, info->n_bytes);
    p = owned_.back().get();
  }
  return p;
}

Status MatrixBinder::bind_quantized(const std::string& module, const QuantSpec& spec, int64_t rows, int64_t cols,
                                    DraftMatrix* out) {
  const std::string what = config_file_ + ": field 'quantization." + module + "'";
  DSPARK_RETURN_IF_ERROR(check_spec_shape(spec, cols, what));
  QuantMatrix q;
  q.spec = spec;
  q.n_rows = rows;
  q.n_cols = cols;
  const int64_t ng = cols / spec.group_size;
  auto codes = tensor(module + ".weight", formats::StDType::kU32, {rows, cols * spec.bits / 32}, 1);
  if (!codes) return codes.status();
  q.codes = codes.value();
  auto scales = tensor(module + ".scales", formats::StDType::kBF16, {rows, ng}, 2);
  if (!scales) return scales.status();
  q.scales = reinterpret_cast<const uint16_t*>(scales.value());
  if (spec.method == Method::kAffine) {
    auto biases = tensor(module + ".biases", formats::StDType::kBF16, {rows, ng}, 2);
    if (!biases) return biases.status();
    q.biases = reinterpret_cast<const uint16_t*>(biases.value());
  } else {
    auto cb = qc_.turbo_codebooks.find(spec.bits);
    if (cb == qc_.turbo_codebooks.end())
      return Status::error(config_file_ + ": field 'quantization.turbo_codebooks." + std::to_string(spec.bits) +
                           "' is missing (needed by turbo module " + in_quotes(module) + ")");
    auto tables = std::make_shared<TurboTables>();
    tables->levels = cb->second;
    tables->rot = make_rotation(cols, spec.rotation_block, spec.rotation_seed);
    q.turbo = std::move(tables);
  }
  *out = DraftMatrix::quantized(std::move(q));
  return Status::ok();
}

}  // namespace dspark::quant
