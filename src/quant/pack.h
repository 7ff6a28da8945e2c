// Code packing shared by both methods (docs/QUANT-FORMAT.md §1): codes form one little-endian bit stream per
// row, code k at bit k * bits, least significant bit first. For bits 2 / 4 / 8 this is MLX's
// `32 / bits` codes per uint32 word; for 3 / 5 / 6 it is MLX's 8 codes in 3 bytes, 8 in 5 bytes
// and 4 in 3 bytes. The byte stream is stored as the uint32 tensor [n_rows, n_cols * bits / 32].
#pragma once

#include <cstdint>

namespace dspark::quant {

// codes [n] (each < 2^bits) -> packed [n * bits / 8] bytes. n * bits must be a multiple of 8.
void pack_codes(const uint8_t* codes, int64_t n, int bits, uint8_t* packed);
// packed [n * bits / 8] bytes -> codes [n].
void unpack_codes(const uint8_t* packed, int64_t n, int bits, uint8_t* codes);

}  // namespace dspark::quant
