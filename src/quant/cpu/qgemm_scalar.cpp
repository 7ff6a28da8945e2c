// Portable kernels (ISA kScalar): the canonical order of qcpu.h with L = 1.
#include <cstring>
#include <vector>

#include "core/f16.h"
#include "quant/cpu/qcpu.h"
#include "quant/pack.h"

namespace dspark::quant::cpu {

const uint8_t* row_codes(const QuantMatrix& w, int64_t r) {
  const int64_t rb = w.row_bytes();
  const uint8_t* p = w.codes + r * rb;
  if (r * rb + rb + kCodeOverread <= w.n_rows * rb) return p;
  thread_local std::vector<uint8_t> pad;
  pad.assign((size_t)(rb + kCodeOverread), 0);
  std::memcpy(pad.data(), p, (size_t)rb);
  return pad.data();
}

namespace {

template <Method M>
void qgemm(const QGemmArgs& a, int64_t i0, int64_t i1) {
  const QuantMatrix& w = *a.w;
  const int64_t n = w.n_cols, g = w.spec.group_size, ng = w.n_groups();
  std::vector<uint8_t> codes((size_t)n);
  std::vector<float> v((size_t)n);
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = a.rows ? a.rows[i] : i;
    unpack_codes(w.codes + r * w.row_bytes(), n, w.spec.bits, codes.data());
    for (int64_t j = 0; j < n; ++j)
      v[(size_t)j] = M == Method::kTurbo ? w.turbo->levels[codes[(size_t)j]] : (float)codes[(size_t)j];
    const uint16_t* sc = w.scales + r * ng;
    const uint16_t* bs = M == Method::kAffine ? w.biases + r * ng : nullptr;
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const float* x = a.x + t * n;
      float acc = 0, bacc = 0;
      for (int64_t gi = 0; gi < ng; ++gi) {
        float p = 0;
        for (int64_t j = gi * g; j < gi * g + g; ++j) p += v[(size_t)j] * x[j];
        acc += p * bf16_to_fp32(sc[gi]);
        if constexpr (M == Method::kAffine) bacc += bf16_to_fp32(bs[gi]) * a.xsum[t * ng + gi];
      }
      a.y[t * a.ldy + i] = acc + bacc;
    }
  }
}

}  // namespace

QGemmFn qgemm_scalar(Method m) { return m == Method::kTurbo ? &qgemm<Method::kTurbo> : &qgemm<Method::kAffine>; }

}  // namespace dspark::quant::cpu
