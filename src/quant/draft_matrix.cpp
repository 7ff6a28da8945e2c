#include "quant/draft_matrix.h"

#include <cstring>

#include "kernels/packed.h"
#include "kernels/ref/ref.h"

namespace dspark::quant {

DraftMatrix DraftMatrix::dense(const kernels::QMatrix& m) {
  DraftMatrix d;
  d.dense_ = m;
  return d;
}

DraftMatrix DraftMatrix::quantized(QuantMatrix m) {
  DraftMatrix d;
  d.quantized_ = true;
  d.quant_ = std::move(m);
  return d;
}

DraftMatrix DraftMatrix::int8_copy(const DraftMatrix& src, kernels::Isa isa,
                                   std::vector<std::unique_ptr<uint8_t[]>>* owned) {
  const bool float_dense = !src.quantized_ && (src.dense_.type == DType::F32 || src.dense_.type == DType::F16 ||
                                               src.dense_.type == DType::BF16);
  if (src.empty() || (!src.quantized_ && !float_dense) || src.n_cols() % 32 != 0) return src;
  const int64_t rows = src.n_rows(), cols = src.n_cols();
  const size_t stride = row_bytes(DType::Q8_0, cols);
  owned->emplace_back(new uint8_t[(size_t)rows * stride]);
  uint8_t* dst = owned->back().get();
  std::vector<float> row((size_t)cols);
  for (int64_t r = 0; r < rows; ++r) {
    src.dequantize_row(r, row.data());
    kernels::quantize_row_ref(DType::Q8_0, row.data(), dst + (size_t)r * stride, cols);
  }
  kernels::QMatrix q{DType::Q8_0, rows, cols, dst, stride};
  if (kernels::pack_supported(DType::Q8_0, isa)) {
    owned->emplace_back(new uint8_t[kernels::packed_bytes(q, kernels::packed_group_rows(DType::Q8_0, isa))]);
    kernels::attach_packed(&q, isa, owned->back().get());
  }
  return dense(q);
}

void DraftMatrix::matmul(kernels::MatmulContext& ctx, const float* x, int64_t n_tokens, float* y, int64_t ldy) const {
  if (quantized_) quant::matmul(ctx, quant_, x, n_tokens, y, ldy);
  else kernels::matmul(ctx, dense_, x, n_tokens, y, ldy);
}

void DraftMatrix::matmul_rows(kernels::MatmulContext& ctx, const int64_t* rows, int64_t n_sel, const float* x,
                              float* y, std::vector<uint8_t>& gather) const {
  if (quantized_) {
    quant::matmul_rows(ctx, quant_, rows, n_sel, x, y);
    return;
  }
  // Dense kernels accumulate each row independently: the same kernel over the gathered rows gives
  // the full product's values.
  const size_t stride = dense_.row_stride;
  if (gather.size() < (size_t)n_sel * stride) gather.resize((size_t)n_sel * stride);
  const auto* base = static_cast<const uint8_t*>(dense_.data);
  for (int64_t i = 0; i < n_sel; ++i) std::memcpy(gather.data() + (size_t)i * stride, base + (size_t)rows[i] * stride, stride);
  const kernels::QMatrix sel{dense_.type, n_sel, dense_.n_cols, gather.data(), stride};
  kernels::matmul(ctx, sel, x, 1, y, n_sel);
}

void DraftMatrix::dequantize_row(int64_t r, float* out) const {
  if (quantized_) quant::dequantize_row(quant_, r, out, kernels::detect_isa());
  else kernels::dequantize_row(dense_.type, static_cast<const uint8_t*>(dense_.data) + (size_t)r * dense_.row_stride, out,
                               dense_.n_cols);
}

size_t DraftMatrix::storage_bytes() const {
  return quantized_ ? quant_.storage_bytes() : (size_t)dense_.n_rows * row_bytes(dense_.type, dense_.n_cols);
}

std::string DraftMatrix::describe() const { return quantized_ ? spec_string(quant_.spec) : dtype_name(dense_.type); }

}  // namespace dspark::quant
