// pack: the row-interleaved copy of a Q8_0 / Q4_1 / Q5_0 / Q4_K / Q6_K matrix, or of a Q4_0 one as
// Q8_0 records (layout: kernels/packed.h, cpu/cpu.h).
#include "kernels/packed.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "kernels/cpu/cpu.h"
#include "kernels/quant_blocks.h"

namespace dspark::kernels {

bool pack_supported(DType type, Isa isa) {
  // AVX-512 with AMX keeps its unpacked VNNI and AMX kernels (tuned on such a CPU); without AMX
  // (AMD Zen 4, Intel Ice Lake) the packed kernels were measured 1.8-2.9x faster than the unpacked ones.
  const bool isa_ok = isa == Isa::kAvx2 || (isa == Isa::kAvx512 && !cpu::amx_usable());
  return isa_ok && (type == DType::Q8_0 || type == DType::Q4_1 || type == DType::Q4_0 || type == DType::Q5_0 ||
                    type == DType::Q4_K || type == DType::Q6_K);
}

DType packed_record_type(DType type) { return type == DType::Q4_0 ? DType::Q8_0 : type; }

int packed_group_rows(DType type, Isa isa) {
  return isa == Isa::kAvx512 && pack_supported(type, isa) ? 16 : 8;
}

bool packed_usable(const QMatrix& w, Isa isa) {
  isa = std::min(isa, detect_isa());
  return w.packed != nullptr && pack_supported(w.type, isa) && w.packed_rows == packed_group_rows(w.type, isa);
}

size_t packed_record_bytes(DType type, int group_rows) {
  if (type == DType::Q4_K) return kPackedQ4KRecordBytes * (size_t)group_rows / 8;
  if (type == DType::Q6_K) return kPackedQ6KRecordBytes * (size_t)group_rows / 8;
  return (size_t)group_rows * dtype_info(packed_record_type(type)).block_bytes;
}

size_t fused_packed_bytes(std::span<const QMatrix* const> parts, int group_rows) {
  if (parts.empty() || group_rows <= 0) return 0;
  const QMatrix& first = *parts[0];
  size_t bytes = 0;
  for (const QMatrix* m : parts) {
    if (!m->data || m->packed || m->type != first.type || m->n_cols != first.n_cols || m->n_rows % group_rows != 0)
      return 0;
    bytes += packed_bytes(*m, group_rows);
  }
  return bytes;
}

QMatrix pack_fused(std::span<const QMatrix* const> parts, int group_rows, uint8_t* dst) {
  const QMatrix& first = *parts[0];
  int64_t rows = 0;
  const uint8_t* start = dst;
  for (const QMatrix* m : parts) {
    pack(*m, group_rows, dst);
    dst += packed_bytes(*m, group_rows);
    rows += m->n_rows;
  }
  QMatrix out{first.type, rows, first.n_cols, nullptr, first.row_stride};
  out.packed = start;
  out.packed_rows = group_rows;
  return out;
}

size_t packed_bytes(const QMatrix& w, int group_rows) {
  const auto& info = dtype_info(packed_record_type(w.type));
  return (size_t)((w.n_rows + group_rows - 1) / group_rows) * (size_t)(w.n_cols / info.block_elems) *
         packed_record_bytes(w.type, group_rows);
}

namespace {

// A Q4_0 block as the Q8_0 block with the same scale and the integer weights q - 8 (exact: the
// canonical step of both is fma(f32(isum), d_w * d_a, acc), cpu/cpu.h).
BlockQ8_0 widen_to_q8_0(const uint8_t* blk) {
  BlockQ8_0 o;
  BlockQ4_0 b;
  std::memcpy(&b, blk, sizeof b);
  o.d = b.d;
  for (int e = 0; e < 16; ++e) {
    o.qs[e] = (int8_t)((b.qs[e] & 0x0F) - 8);
    o.qs[e + 16] = (int8_t)((b.qs[e] >> 4) - 8);
  }
  return o;
}

// Row i (0..G-1) of a Q5_0 record of G = 8 or 16 rows (22 G bytes): d[G] f16; 4 x 4G bytes of
// nibble pairs as in a Q4_1 record (byte 4i + e of vector j: the low 4 bits of q of element 4j + e |
// those of element 16 + 4j + e << 4); 8 masks of G / 2 bytes, bit 4i + e of mask k = bit 4 of q of
// element 4k + e.
void pack_q5_0_row(const uint8_t* blk, int i, int G, uint8_t* out) {
  BlockQ5_0 b;
  std::memcpy(&b, blk, sizeof b);
  std::memcpy(out + 2 * i, &b.d, 2);
  for (int j = 0; j < 4; ++j)
    for (int e = 0; e < 4; ++e) out[2 * G + 4 * G * j + 4 * i + e] = b.qs[4 * j + e];  // qs[e]: element e | e + 16 << 4
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  uint8_t* masks = out + 18 * G;
  if (i == 0) std::memset(masks, 0, (size_t)4 * G);  // rows are packed in order 0..G-1
  for (int k = 0; k < 8; ++k)
    for (int e = 0; e < 4; ++e) {
      const int bit = 4 * i + e;
      masks[(G / 2) * k + bit / 8] |= (uint8_t)(((qh >> (4 * k + e)) & 1u) << (bit % 8));
    }
}

// Q4_K record of G = 8 or 16 rows' super-block b: d[G] f16, dmin[G] f16, sc[8 sub-blocks][G rows] u8,
// mp[4][G rows] i32 (m of sub-blocks 2k | 2k+1 << 16), then per sub-block j 4 x 4G bytes of nibble
// pairs as in a Q4_1 record (byte 4i + e of vector k: element 4k + e low, 16 + 4k + e high).
void pack_q4_k_record(const uint8_t* const* blk, int G, uint8_t* out) {
  for (int i = 0; i < G; ++i) {
    BlockQ4_K b;
    std::memcpy(&b, blk[i], sizeof b);
    std::memcpy(out + 2 * i, &b.d, 2);
    std::memcpy(out + 2 * G + 2 * i, &b.dmin, 2);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b.scales, &sc[j], &m[j]);
    for (int j = 0; j < 8; ++j) out[4 * G + G * j + i] = sc[j];
    for (int k = 0; k < 4; ++k) {
      const uint32_t mp = (uint32_t)m[2 * k] | ((uint32_t)m[2 * k + 1] << 16);
      std::memcpy(out + 12 * G + 4 * G * k + 4 * i, &mp, 4);
    }
    for (int j = 0; j < 8; ++j) {
      // element l of sub-block j: nibble (j & 1) of qs[32 * (j / 2) + l]
      auto q = [&](int l) { return (uint8_t)((b.qs[32 * (j / 2) + l] >> (4 * (j & 1))) & 0x0F); };
      for (int k = 0; k < 4; ++k)
        for (int e = 0; e < 4; ++e)
          out[28 * G + 16 * G * j + 4 * G * k + 4 * i + e] = (uint8_t)(q(4 * k + e) | (q(16 + 4 * k + e) << 4));
    }
  }
}
// Q6_K record of G = 8 or 16 rows' super-block b: d[G] f16, scp[8 pairs m][G rows][2] int8 (scales of
// sub-blocks 2m, 2m+1), then per sub-block k 4 x 4G bytes: byte 4i + e of vector g = the 6-bit q
// (0..63) of element 16k + 4g + e of row i (ggml's ql / qh split undone).
void pack_q6_k_record(const uint8_t* const* blk, int G, uint8_t* out) {
  for (int i = 0; i < G; ++i) {
    BlockQ6_K b;
    std::memcpy(&b, blk[i], sizeof b);
    std::memcpy(out + 2 * i, &b.d, 2);
    for (int m = 0; m < 8; ++m) {
      out[2 * G + 2 * G * m + 2 * i] = (uint8_t)b.scales[2 * m];
      out[2 * G + 2 * G * m + 2 * i + 1] = (uint8_t)b.scales[2 * m + 1];
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
      const uint8_t lb = b.ql[64 * h + 32 * (g % 2) + l];
      const int lo = g < 2 ? (lb & 0xF) : (lb >> 4);
      const int hi = (b.qh[32 * h + l] >> (2 * g)) & 3;
      const int k = e / 16, gg = (e % 16) / 4;
      out[18 * G + 16 * G * k + 4 * G * gg + 4 * i + e % 4] = (uint8_t)(lo | (hi << 4));
    }
  }
}
}  // namespace

void pack(const QMatrix& w, int group_rows, uint8_t* dst) {
  DSPARK_CHECK(pack_supported(w.type, Isa::kAvx2));
  DSPARK_CHECK(group_rows == 8 || group_rows == 16);
  if (w.type == DType::Q4_K || w.type == DType::Q6_K) {
    const auto* base = static_cast<const uint8_t*>(w.data);
    const bool k4 = w.type == DType::Q4_K;
    const size_t bb = k4 ? sizeof(BlockQ4_K) : sizeof(BlockQ6_K), rec = packed_record_bytes(w.type, group_rows);
    const int64_t G = group_rows, nb = w.n_cols / 256, n_groups = (w.n_rows + G - 1) / G;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk[16];
        for (int i = 0; i < G; ++i)
          blk[i] = base + (size_t)std::min<int64_t>(G * g + i, w.n_rows - 1) * w.row_stride + (size_t)b * bb;
        uint8_t* out = dst + (size_t)(g * nb + b) * rec;
        if (k4) pack_q4_k_record(blk, (int)G, out);
        else pack_q6_k_record(blk, (int)G, out);
      }
    return;
  }
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t G = group_rows, nb = w.n_cols / 32, n_groups = (w.n_rows + G - 1) / G;
  const DType rec_type = packed_record_type(w.type);
  const size_t bb = dtype_info(w.type).block_bytes, rec = packed_record_bytes(w.type, group_rows);
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = dst + (size_t)(g * nb + b) * rec;
      for (int i = 0; i < G; ++i) {
        const int64_t r = std::min<int64_t>(G * g + i, w.n_rows - 1);
        const uint8_t* blk = base + (size_t)r * w.row_stride + (size_t)b * bb;
        BlockQ8_0 wide;
        if (rec_type != w.type) {
          wide = widen_to_q8_0(blk);
          blk = reinterpret_cast<const uint8_t*>(&wide);
        }
        if (rec_type == DType::Q5_0) {
          pack_q5_0_row(blk, i, (int)G, out);
        } else if (rec_type == DType::Q8_0) {
          // d[G] f16, then for k = 0..7: 4G bytes, row i's elements 4k..4k+3 at bytes 4i..4i+3.
          std::memcpy(out + 2 * i, blk, 2);
          for (int k = 0; k < 8; ++k) std::memcpy(out + 2 * G + 4 * G * k + 4 * i, blk + 2 + 4 * k, 4);
        } else {
          // d[G] f16, m[G] f16, then for j = 0..3: 4G bytes, byte 4i + e = element 4j + e of row i
          // (low nibble) | element 16 + 4j + e (high nibble). Q4_1 stores element e (< 16) in the
          // low nibble of qs[e] and element e + 16 in its high nibble.
          std::memcpy(out + 2 * i, blk, 2);
          std::memcpy(out + 2 * G + 2 * i, blk + 2, 2);
          const uint8_t* qs = blk + 4;
          for (int j = 0; j < 4; ++j)
            for (int e = 0; e < 4; ++e) out[4 * G + 4 * G * j + 4 * i + e] = qs[4 * j + e];
        }
      }
    }
}

void attach_packed(QMatrix* w, Isa isa, uint8_t* dst) {
  const int rows = packed_group_rows(w->type, isa);
  pack(*w, rows, dst);
  w->packed = dst;
  w->packed_rows = rows;
}

}  // namespace dspark::kernels
