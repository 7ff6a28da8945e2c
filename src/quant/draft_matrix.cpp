#include "quant/draft_matrix.h"

#include <cstring>

#include "core/f16.h"
#include "kernels/packed.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"
#include "quant/pack.h"

namespace dspark::quant {

namespace {

// Row r of a 4-bit affine matrix (ŵ = scale · code + bias per group, bf16 scale and bias, groups a
// multiple of 32) as Q4_1 blocks holding the same codes, d = scale, m = bias: exact whenever both
// convert to f16 without rounding (bf16's 8 significant bits fit f16's 11 inside its range).
// Returns false (nothing to rely on in `dst`) when one does not; the caller then rounds the row.
bool affine4_row_as_q4_1(const QuantMatrix& w, int64_t r, std::vector<uint8_t>& codes, uint8_t* dst) {
  const int64_t n = w.n_cols, g = w.spec.group_size, ng = w.n_groups();
  unpack_codes(w.codes + (size_t)(r * w.row_bytes()), n, 4, codes.data());
  auto* y = reinterpret_cast<kernels::BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / 32; ++b) {
    const int64_t grp = r * ng + b * 32 / g;
    const float s = bf16_to_fp32(w.scales[grp]), bias = bf16_to_fp32(w.biases[grp]);
    const uint16_t d = fp32_to_fp16(s), m = fp32_to_fp16(bias);
    if (fp16_to_fp32(d) != s || fp16_to_fp32(m) != bias) return false;
    y[b].d = d;
    y[b].m = m;
    const uint8_t* c = &codes[(size_t)(b * 32)];
    for (int j = 0; j < 16; ++j) y[b].qs[j] = (uint8_t)(c[j] | (c[j + 16] << 4));
  }
  return true;
}

}  // namespace

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

DraftMatrix DraftMatrix::integer_copy(const DraftMatrix& src, int bits, kernels::Isa isa,
                                      std::vector<std::unique_ptr<uint8_t[]>>* owned) {
  const bool float_dense = !src.quantized_ && (src.dense_.type == DType::F32 || src.dense_.type == DType::F16 ||
                                               src.dense_.type == DType::BF16);
  if (src.empty() || (!src.quantized_ && !float_dense) || src.n_cols() % 32 != 0) return src;
  const int64_t rows = src.n_rows(), cols = src.n_cols();
  const DType type = bits == 4 ? DType::Q4_1 : DType::Q8_0;
  const size_t stride = row_bytes(type, cols);
  owned->emplace_back(new uint8_t[(size_t)rows * stride]);
  uint8_t* dst = owned->back().get();
  // A 4-bit affine source keeps its own codes (exact); anything else is rounded to the blocks.
  const QuantSpec& qs = src.quant_.spec;
  const bool same_grid = type == DType::Q4_1 && src.quantized_ && qs.method == Method::kAffine && qs.bits == 4 &&
                         qs.group_size % 32 == 0;
  std::vector<float> row((size_t)cols);
  std::vector<uint8_t> codes(same_grid ? (size_t)cols : 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (same_grid && affine4_row_as_q4_1(src.quant_, r, codes, dst + (size_t)r * stride)) continue;
    src.dequantize_row(r, row.data(), isa);
    kernels::quantize_row_ref(type, row.data(), dst + (size_t)r * stride, cols);
  }
  kernels::QMatrix q{type, rows, cols, dst, stride};
  if (kernels::pack_supported(type, isa)) {
    owned->emplace_back(new uint8_t[kernels::packed_bytes(q, kernels::packed_group_rows(type, isa))]);
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

void DraftMatrix::dequantize_row(int64_t r, float* out, kernels::Isa isa) const {
  if (quantized_) quant::dequantize_row(quant_, r, out, std::min(isa, kernels::detect_isa()));
  else kernels::dequantize_row(dense_.type, static_cast<const uint8_t*>(dense_.data) + (size_t)r * dense_.row_stride, out,
                               dense_.n_cols);
}

size_t DraftMatrix::storage_bytes() const {
  return quantized_ ? quant_.storage_bytes() : (size_t)dense_.n_rows * row_bytes(dense_.type, dense_.n_cols);
}

std::string DraftMatrix::describe() const { return quantized_ ? spec_string(quant_.spec) : dtype_name(dense_.type); }

}  // namespace dspark::quant
