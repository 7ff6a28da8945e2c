// Quantization methods and per-tensor settings for drafter weights (docs/QUANT-FORMAT.md,
// covering the MLX affine and TurboQuant formats).
//
// A quantized matrix W [n_rows, n_cols] is cut into groups of `group_size` consecutive elements
// along the last (input) axis. Affine (MLX): codes + bf16 scale + bf16 bias per group. Turbo: the
// input axis is rotated by a blockwise randomized Hadamard transform first, then codes index a
// Lloyd-Max codebook for N(0, 1) with one bf16 scale per group.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace dspark::quant {

enum class Method { kNone = 0, kAffine = 1, kTurbo = 2 };

// "none", "affine", "turbo" (the config.json spelling of `mode`).
const char* method_name(Method m);
bool method_from_name(const std::string& s, Method* out);

inline constexpr int kGroupSizes[] = {32, 64, 128};
inline constexpr int kAffineBits[] = {2, 3, 4, 5, 6, 8};
inline constexpr int kTurboBits[] = {2, 3, 4};
inline constexpr int kMaxRotationBlock = 256;  // default cap of the Hadamard block (docs/QUANT-FORMAT.md §3)
inline constexpr int kMinRotationBlock = 16;   // smaller power-of-two factors are refused

// How one tensor is stored. method == kNone: dense (bf16 / f16 / f32 as in the source).
struct QuantSpec {
  Method method = Method::kNone;
  int bits = 0;
  int group_size = 0;
  int rotation_block = 0;      // turbo: Hadamard block n_b (power of two dividing n_cols)
  uint64_t rotation_seed = 0;  // turbo: seed of the ±1 sign vector (hadamard.h rotation_signs)
  bool quantized() const { return method != Method::kNone; }
  bool operator==(const QuantSpec&) const = default;
};

// "affine 4-bit g64", "turbo 4-bit g32 (hadamard 128)", "dense".
std::string spec_string(const QuantSpec& s);

// Checks bits / group_size for the method (no shape involved). `what` names the tensor or field.
Status check_spec(const QuantSpec& s, const std::string& what);
// Checks that `s` can store a [n_rows, n_cols] tensor: n_cols % group_size == 0 and, for turbo,
// a valid rotation block. `what` names the tensor in errors.
Status check_spec_shape(const QuantSpec& s, int64_t n_cols, const std::string& what);

// Largest power of two dividing n_cols, capped at kMaxRotationBlock (docs/QUANT-FORMAT.md §3: blockwise
// Hadamard over power-of-two blocks, e.g. 640 = 5 x 128, 3840 = 15 x 256). 0 if below kMinRotationBlock.
int default_rotation_block(int64_t n_cols);

// Stored bits per weight of one tensor: bits + 16 (turbo scale) or 32 (affine scale + bias) / g.
double spec_bpw(const QuantSpec& s);

// Packed code bytes of one row: n_cols * bits / 8 (n_cols * bits is a multiple of 32).
inline int64_t code_row_bytes(int64_t n_cols, int bits) { return n_cols * bits / 8; }

}  // namespace dspark::quant
