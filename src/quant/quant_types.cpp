#include "quant/quant_types.h"

#include <algorithm>
#include <cstdio>

namespace dspark::quant {

const char* method_name(Method m) {
  switch (m) {
    case Method::kNone: return "none";
    case Method::kAffine: return "affine";
    case Method::kTurbo: return "turbo";
  }
  return "unknown";
}

bool method_from_name(const std::string& s, Method* out) {
  if (s == "affine") *out = Method::kAffine;
  else if (s == "turbo") *out = Method::kTurbo;
  else return false;
  return true;
}

std::string spec_string(const QuantSpec& s) {
  if (!s.quantized()) return "dense";
  std::string r = std::string(method_name(s.method)) + " " + std::to_string(s.bits) + "-bit g" + std::to_string(s.group_size);
  if (s.method == Method::kTurbo) r += " (hadamard " + std::to_string(s.rotation_block) + ")";
  return r;
}

namespace {

template <size_t N>
bool one_of(int v, const int (&set)[N]) {
  return std::find(std::begin(set), std::end(set), v) != std::end(set);
}

template <size_t N>
std::string list(const int (&set)[N]) {
  std::string r;
  for (int v : set) r += (r.empty() ? "" : ", ") + std::to_string(v);
  return r;
}

}  // namespace

Status check_spec(const QuantSpec& s, const std::string& what) {
  if (!s.quantized()) return Status::ok();
  if (s.method == Method::kAffine && !one_of(s.bits, kAffineBits))
    return Status::error(what + ": affine bits = " + std::to_string(s.bits) + " is not supported (" + list(kAffineBits) + ")");
  if (s.method == Method::kTurbo && !one_of(s.bits, kTurboBits))
    return Status::error(what + ": turbo bits = " + std::to_string(s.bits) + " is not supported (" + list(kTurboBits) + ")");
  if (!one_of(s.group_size, kGroupSizes))
    return Status::error(what + ": group_size = " + std::to_string(s.group_size) + " is not supported (" +
                         list(kGroupSizes) + ")");
  return Status::ok();
}

int default_rotation_block(int64_t n_cols) {
  if (n_cols <= 0) return 0;
  int64_t b = 1;
  while (n_cols % (b * 2) == 0 && b * 2 <= kMaxRotationBlock) b *= 2;
  return b >= kMinRotationBlock ? (int)b : 0;
}

Status check_spec_shape(const QuantSpec& s, int64_t n_cols, const std::string& what) {
  DSPARK_RETURN_IF_ERROR(check_spec(s, what));
  if (!s.quantized()) return Status::ok();
  if (n_cols % s.group_size != 0)
    return Status::error(what + ": input dim " + std::to_string(n_cols) + " is not a multiple of group_size " +
                         std::to_string(s.group_size));
  if (s.method == Method::kTurbo) {
    const int b = s.rotation_block;
    if (b < kMinRotationBlock || (b & (b - 1)) != 0 || n_cols % b != 0)
      return Status::error(what + ": turbo rotation block " + std::to_string(b) + " must be a power of two >= " +
                           std::to_string(kMinRotationBlock) + " dividing the input dim " + std::to_string(n_cols) +
                           (default_rotation_block(n_cols) ? "" : " (this input dim has no such factor)"));
  }
  return Status::ok();
}

double spec_bpw(const QuantSpec& s) {
  if (!s.quantized()) return 16.0;
  const double meta = s.method == Method::kAffine ? 32.0 : 16.0;
  return (double)s.bits + meta / (double)s.group_size;
}

}  // namespace dspark::quant
