// Blockwise randomized Hadamard rotation of the input dimension (TurboQuant for weights,
// docs/QUANT-FORMAT.md §3). For an input dim n_cols = k * b (b a power of two, the rotation block):
//   R = diag(H_b D_0, H_b D_1, ...) / sqrt(b),   D_i = diag of ±1 signs (seeded),
// H_b = Sylvester Hadamard (H_1 = [1], H_2m = [[H_m, H_m], [H_m, -H_m]]). R is orthogonal, so
// W x = (W Rᵀ)(R x): weights are stored rotated (W' = W Rᵀ, i.e. each row w' = R w) and
// activations are rotated at run time by the fast Walsh-Hadamard transform (O(n log b) adds).
// A gathered row (embedding-like table) is un-rotated: w = Rᵀ w' = D H w' / sqrt(b).
//
// Sign vector of seed s: Rng(s) (core/rng.h, xoshiro256** seeded by splitmix64); element i is -1
// iff bit (i mod 64) of the (i div 64)-th next() output is set (docs/QUANT-FORMAT.md §3).
// The SIMD transforms do the same additions in the same order as the scalar references, so they
// are bitwise equal (tests/unit/quant/test_hadamard.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace dspark::quant {

struct Rotation {
  int64_t n_cols = 0;
  int block = 0;              // b: power of two dividing n_cols
  uint64_t seed = 0;
  std::vector<float> signs;   // [n_cols] ±1
  float inv_sqrt_block = 1;   // f32(1 / sqrt(b))
};

std::vector<float> rotation_signs(uint64_t seed, int64_t n);
Rotation make_rotation(int64_t n_cols, int block, uint64_t seed);

// Unnormalized Walsh-Hadamard transform of x [n] in place (n a power of two), natural order.
void fwht_ref(float* x, int64_t n);
// x [n_cols] <- R x  /  x <- Rᵀ x (scalar references).
void rotate_ref(const Rotation& r, float* x);
void unrotate_ref(const Rotation& r, float* x);

// The same with the best SIMD transform for `isa` (bitwise equal to the references).
void rotate(const Rotation& r, float* x, kernels::Isa isa);
void unrotate(const Rotation& r, float* x, kernels::Isa isa);

}  // namespace dspark::quant
