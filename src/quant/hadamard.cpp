#include "quant/hadamard.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "core/status.h"
#include "quant/cpu/qcpu.h"

namespace dspark::quant {

std::vector<float> rotation_signs(uint64_t seed, int64_t n) {
  Rng rng(seed);
  std::vector<float> s((size_t)n);
  uint64_t word = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 64 == 0) word = rng.next();
    s[(size_t)i] = (word >> (i % 64)) & 1 ? -1.0f : 1.0f;
  }
  return s;
}

Rotation make_rotation(int64_t n_cols, int block, uint64_t seed) {
  DSPARK_CHECK(block >= 1 && (block & (block - 1)) == 0 && n_cols % block == 0);
  Rotation r;
  r.n_cols = n_cols;
  r.block = block;
  r.seed = seed;
  r.signs = rotation_signs(seed, n_cols);
  r.inv_sqrt_block = (float)(1.0 / std::sqrt((double)block));
  return r;
}

void fwht_ref(float* x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

namespace {

using BlockFn = void (*)(float* x, int64_t n);

BlockFn block_fn(kernels::Isa isa, int block) {
  isa = std::min(isa, kernels::detect_isa());
  if (isa == kernels::Isa::kAvx512 && block >= 16) return &cpu::fwht_block_avx512;
  if (isa >= kernels::Isa::kAvx2 && block >= 8) return &cpu::fwht_block_avx2;
  return &fwht_ref;
}

void rotate_with(const Rotation& r, float* x, BlockFn fwht) {
  for (int64_t i = 0; i < r.n_cols; ++i) x[i] *= r.signs[(size_t)i];
  for (int64_t b0 = 0; b0 < r.n_cols; b0 += r.block) fwht(x + b0, r.block);
  for (int64_t i = 0; i < r.n_cols; ++i) x[i] *= r.inv_sqrt_block;
}

void unrotate_with(const Rotation& r, float* x, BlockFn fwht) {
  for (int64_t b0 = 0; b0 < r.n_cols; b0 += r.block) fwht(x + b0, r.block);
  for (int64_t i = 0; i < r.n_cols; ++i) x[i] = x[i] * r.inv_sqrt_block * r.signs[(size_t)i];
}

}  // namespace

void rotate_ref(const Rotation& r, float* x) { rotate_with(r, x, &fwht_ref); }
void unrotate_ref(const Rotation& r, float* x) { unrotate_with(r, x, &fwht_ref); }
void rotate(const Rotation& r, float* x, kernels::Isa isa) { rotate_with(r, x, block_fn(isa, r.block)); }
void unrotate(const Rotation& r, float* x, kernels::Isa isa) { unrotate_with(r, x, block_fn(isa, r.block)); }

}  // namespace dspark::quant
