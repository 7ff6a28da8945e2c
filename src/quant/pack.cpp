#include "quant/pack.h"

#include <cstring>

namespace dspark::quant {

void pack_codes(const uint8_t* codes, int64_t n, int bits, uint8_t* packed) {
  std::memset(packed, 0, (size_t)(n * bits / 8));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t bit = k * bits;
    const uint32_t v = (uint32_t)codes[k] << (bit & 7);  // at most 15 bits wide
    packed[bit >> 3] |= (uint8_t)v;
    if ((bit & 7) + bits > 8) packed[(bit >> 3) + 1] |= (uint8_t)(v >> 8);
  }
}

void unpack_codes(const uint8_t* packed, int64_t n, int bits, uint8_t* codes) {
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t bit = k * bits;
    uint32_t v = packed[bit >> 3];
    if ((bit & 7) + bits > 8) v |= (uint32_t)packed[(bit >> 3) + 1] << 8;
    codes[k] = (uint8_t)((v >> (bit & 7)) & mask);
  }
}

}  // namespace dspark::quant
