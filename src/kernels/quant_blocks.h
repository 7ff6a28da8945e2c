// Packed ggml block layouts (ggml src/ggml-common.h). Little-endian, no padding.
// f16 fields are raw IEEE binary16 bits (uint16_t); convert with core/f16.h.
#pragma once

#include <cstdint>

namespace dspark::kernels {

inline constexpr int kQK = 32;    // elements per legacy block
inline constexpr int kQKK = 256;  // elements per K-quant super-block

#pragma pack(push, 1)
struct BlockQ4_0 {  // 32 elements: y = (nibble - 8) * d
  uint16_t d;
  uint8_t qs[16];   // e < 16: low nibble of qs[e]; e >= 16: high nibble of qs[e - 16]
};
struct BlockQ4_1 {  // y = nibble * d + m
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {  // y = (nibble + 16 * bit_e(qh) - 16) * d
  uint16_t d;
  uint8_t qh[4];    // little-endian u32, bit e = fifth bit of element e
  uint8_t qs[16];
};
struct BlockQ5_1 {  // y = (nibble + 16 * bit_e(qh)) * d + m
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {  // y = qs[e] * d
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {  // activations only: s = d * sum(qs)
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
struct BlockQ4_K {  // 256 elements, 8 sub-blocks of 32: y = d*sc_j*q - dmin*m_j
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // 6-bit sc_j / m_j packed (§5.2)
  uint8_t qs[128];     // sub-block j: qs[32*(j/2) + l], low nibble if j even
};
struct BlockQ5_K {  // as Q4_K plus bit j of qh[l] adds 16
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {  // 16 sub-blocks of 16: y = d * scales[e/16] * (q - 32)
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // last field
};
struct BlockQ8_K {  // activations only
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // bsums[k] = sum qs[16k .. 16k+15]
};
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Q4_K / Q5_K 6-bit scale and min of sub-block j (0..7).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace dspark::kernels
