// Row-interleaved ("x8") copies of quantized weight matrices, made once at load for the AVX2 and
// AVX-512 VNNI (without AMX) matmul (decode, verify windows and prefill).
//
// Why: the canonical kernel (cpu/gemm_impl.h) reads 8 rows as 8 separate streams and, per 32-element
// block, transposes 8 vectors of partial sums into the 8 exact block sums. In the packed layout the
// 8 rows' block b is one contiguous record whose 4-byte groups are interleaved by row, so one
// multiply-add against a broadcast group of 4 activations yields the partial sums of all 8 rows in
// their own lanes: no transpose, one sequential stream per thread. The exact int32 block sums and
// the f32 steps after them are the canonical ones (cpu/cpu.h), so results are bitwise those of every
// other path (tests/unit/kernels/test_packed.cpp).
//
// Layout (the per-type records are described in cpu/cpu.h, packed_impl.h and packed16_avx512.cpp):
// rows in groups of G, the last group repeating its last row; record (g, b) of group g and block b
// at offset (g * n_blocks + b) * packed_record_bytes(type, G). G = 8 for AVX2; under AVX-512 VNNI
// every type is grouped by 16 rows ("x16", cpu/packed16_avx512.cpp): one 512-bit multiply-add per
// 4-byte group and token covers a group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace dspark::kernels {

// True when matmul has a packed kernel for `type` on `isa`: AVX2, or AVX-512 VNNI on a CPU without
// AMX (with AMX the unpacked VNNI and AMX kernels are used as they are); Q8_0, Q4_1, Q5_0, Q4_K and
// Q6_K, and Q4_0 packed as Q8_0 records.
bool pack_supported(DType type, Isa isa);

// The record type of a packed `type`: Q4_0 is widened to Q8_0 (int8 weights q - 8, the same scale:
// exactly the canonical dot products, cpu/cpu.h), at 34 instead of 18 bytes per block, because the
// 4-bit unpacking cost more than the bytes on AVX2. Q5_0 keeps its 22 bytes per block in its own
// record (nibbles as Q4_1's, the fifth bits as one 32-bit mask per 4-element step, packed.cpp):
// widened to Q8_0 it made Gemma 3's Q5_0 layers 67 MB to read per token instead of 44.
DType packed_record_type(DType type);

// Q4_K is packed in its own record (kernels/packed.cpp, cpu/packed_avx2.cpp): 8 rows' d, dmin, unpacked 6-bit scales and mins, and
// the nibbles in Q4_1's interleave per 32-element sub-block: 1,248 bytes per 8 x 256 elements.
inline constexpr size_t kPackedQ4KRecordBytes = 32 + 64 + 128 + 1024;

// Q6_K is packed in its own record (kernels/packed.cpp, cpu/packed_impl.h): 8 rows' d, their int8
// scales in pairs of sub-blocks, and the 6-bit weights widened to bytes (0..63) in 4-byte groups
// interleaved by row: 2,192 bytes per 8 x 256 elements (8 x 210 canonical), because the bit
// unpacking cost more time than the 30 % more bytes.
inline constexpr size_t kPackedQ6KRecordBytes = 16 + 128 + 2048;

// Q8_0 record of the x16 layout: d[16] f16, then for k = 0..7, 64 bytes: row i's int8 elements
// 4k..4k+3 at bytes 4i..4i+3.
inline constexpr size_t kPackedQ8_0x16RecordBytes = 32 + 512;
// Q5_0 record of the x16 layout: d[16] f16, 4 x 64 bytes of nibble pairs, 8 x u64 fifth-bit masks
// (cpu/packed16_avx512.cpp).
inline constexpr size_t kPackedQ5_0x16RecordBytes = 32 + 256 + 64;

// Rows per record group of the packed copy that matmul runs on `isa`: 16 under AVX-512 VNNI, else 8. QMatrix::packed_rows records which one a
// copy has; matmul uses a copy only where the two agree.
int packed_group_rows(DType type, Isa isa);

// Bytes of one packed record (group_rows rows x one block of the record type).
size_t packed_record_bytes(DType type, int group_rows = 8);

// True when matmul runs `w` from its packed copy under ctx's ISA (capped at the CPU's). A matrix
// that exists only packed (data == nullptr: model/weights.h's fused matrices) is usable only then.
bool packed_usable(const QMatrix& w, Isa isa);

// Bytes of the packed copy: ceil(n_rows / group_rows) * (n_cols / block_elems) * packed_record_bytes.
size_t packed_bytes(const QMatrix& w, int group_rows = 8);

// Writes the packed copy of w (pack_supported type) with group_rows (8, or 16 for Q8_0 records) rows
// per group to dst[packed_bytes(w, group_rows)]. Portable code.
void pack(const QMatrix& w, int group_rows, uint8_t* dst);

// Several matrices of one type and width packed one after another into one packed-only matrix
// (data == nullptr) of group_rows-row records; row groups never straddle two parts.
// fused_packed_bytes: the bytes it takes, 0 when the parts cannot be fused (none given, a part
// already packed or without data, another type or width, rows not a multiple of group_rows).
size_t fused_packed_bytes(std::span<const QMatrix* const> parts, int group_rows);
// Writes the fused copy to dst[fused_packed_bytes(parts, group_rows)] and returns the matrix over it.
QMatrix pack_fused(std::span<const QMatrix* const> parts, int group_rows, uint8_t* dst);

// The packed copy matmul runs on `isa` (pack_supported(w->type, isa)): writes it to
// dst[packed_bytes(*w, packed_group_rows(w->type, isa))] and points w->packed / w->packed_rows at it.
void attach_packed(QMatrix* w, Isa isa, uint8_t* dst);

}  // namespace dspark::kernels
