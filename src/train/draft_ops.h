// Row operations shared by the drafter's training forward and backward (draft_net*.cpp).
#pragma once

#include <cmath>
#include <cstdint>

namespace dspark::train::ops {


// y = x * rstd * w (w may be null); returns rstd = 1 / sqrt(mean(x^2) + eps) (sum in double, as
// net::dspark_rms_norm).
inline float rms_fwd(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
  const float r = (float)(1.0 / std::sqrt(ss / (double)n + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * (w ? w[i] : 1.0f);
  return r;
}

// Backward of rms_fwd: dx += d/dx, dw += d/dw (w, dw may be null).
inline void rms_bwd(const float* x, const float* w, float r, const float* dy, float* dx, float* dw, int64_t n) {
  double dot = 0;  // Σ dxh * xh
  for (int64_t i = 0; i < n; ++i) {
    const float dxh = dy[i] * (w ? w[i] : 1.0f);
    dot += (double)dxh * x[i] * r;
    if (dw) dw[i] += dy[i] * x[i] * r;
  }
  const float mean = (float)(dot / (double)n);
  for (int64_t i = 0; i < n; ++i) {
    const float dxh = dy[i] * (w ? w[i] : 1.0f);
    dx[i] += r * (dxh - x[i] * r * mean);
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
inline float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoef * x * x))); }
inline float gelu_grad(float x) {
  const float u = kSqrt2OverPi * x * (1.0f + kGeluCoef * x * x);
  const float t = std::tanh(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

inline float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }


}  // namespace dspark::train::ops
