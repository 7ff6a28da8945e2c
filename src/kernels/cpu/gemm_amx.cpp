// AMX-INT8 matmul for many tokens (prefill, speculative verify): Q8_0 / Q4_0 / Q5_0 / Q4_K / Q5_K / Q6_K.
//
// Per thread, weight rows are taken 32 at a time ("panel"): each row is decoded once to signed
// int8 and stored in the tile-B ("VNNI") layout [k/4][16 rows][4 bytes], per-row block scales as
// f32 vectors. Tokens go 32 at a time: the activation rows (signed int8 Q8_0 / Q8_K qs, see
// amx_prepare_act) are loaded directly as tile A (16 tokens x kc bytes). For every quantization
// chunk of kc elements (32; 16 for Q6_K's sub-blocks) four TDPBSSD give the exact int32 chunk sums
// of 32 tokens x 32 rows (C[token][row]); they are stored and turned into f32 with the per-chunk
// scales by AVX-512 (lanes = 16 weight rows), in groups of 8 chunks:
//   legacy: acc = fma(f32(C), d_w * d_a, acc)                                     per 32-block
//   K-quants: I = sum_c sc_c * C_c (int32); acc = fma(f32(I), d * d_a, acc);
//             Q4_K/Q5_K: acc = fnma(f32(sum_j m_j * bsum_j), dmin * d_a, acc)      per super-block
// which is the canonical per-(row, token) accumulation of cpu.h: bitwise equal to the VNNI paths.
//
// Compiled with AMX + AVX-512 flags (*_amx.cpp); called only after amx_usable() said yes.
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#define DSPARK_ISA_NS amx

namespace dspark::kernels::cpu::amx {

// Only the weight decoders of gemm_impl.h are used here; these satisfy its includer contract.
constexpr bool kBiasedAct = true;
struct Prep {
  __m256i w;
};
inline Prep prep(__m256i w) { return {w}; }
inline __m256i dot(const Prep& p, __m256i a) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, p.w); }

}  // namespace dspark::kernels::cpu::amx

#include "kernels/cpu/gemm_impl.h"

namespace dspark::kernels::cpu {

namespace {

using namespace amx;

constexpr int kPanelRows = 32;  // weight rows per panel (two B tiles)
constexpr int kTokTile = 32;    // tokens per step (two A tiles)
constexpr int kGroup = 8;       // chunks whose C tiles are stored before the f32 pass

enum class Kind { kLegacy, kK4, kK6 };

template <class D>
struct Traits;
template <>
struct Traits<DecQ8_0> { static constexpr Kind kKind = Kind::kLegacy; static constexpr int kKc = 32; };
template <>
struct Traits<DecQ4_0> { static constexpr Kind kKind = Kind::kLegacy; static constexpr int kKc = 32; };
template <>
struct Traits<DecQ5_0> { static constexpr Kind kKind = Kind::kLegacy; static constexpr int kKc = 32; };
template <>
struct Traits<DecQ4_K> { static constexpr Kind kKind = Kind::kK4; static constexpr int kKc = 32; };
template <>
struct Traits<DecQ5_K> { static constexpr Kind kKind = Kind::kK4; static constexpr int kKc = 32; };
template <>
struct Traits<DecQ6_K> { static constexpr Kind kKind = Kind::kK6; static constexpr int kKc = 16; };

struct alignas(64) TileCfg {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: 0, 1 = A (tokens 0..15, 16..31), 2, 3 = B (rows 0..15, 16..31), 4 + 2 g + h = C[g][h].
void configure_tiles(int kc) {
  TileCfg cfg;
  for (int i = 0; i < 2; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = (uint16_t)kc;
    cfg.rows[2 + i] = (uint8_t)(kc / 4);
    cfg.colsb[2 + i] = 64;
  }
  for (int i = 4; i < 8; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

inline float f16_at(const uint8_t* p) { return h2f(p); }

// Thread-local scratch: the decoded panel, its scales, C tiles and f32 accumulators.
struct Scratch {
  std::vector<uint8_t> buf;
  uint8_t* get(size_t bytes) {
    if (buf.size() < bytes + 64) buf.resize(bytes + 64);
    auto p = reinterpret_cast<uintptr_t>(buf.data());
    return reinterpret_cast<uint8_t*>((p + 63) & ~(uintptr_t)63);
  }
};

template <class D>
struct Panel {
  static constexpr Kind kKind = Traits<D>::kKind;
  static constexpr int kKc = Traits<D>::kKc;
  int64_t n_cols = 0, nb = 0, nq = 0, nsb = 0;
  uint8_t* q = nullptr;    // [nq][2 halves][kc/4][16][4] int8
  float* s = nullptr;      // legacy: [nq][32] d_w; K: [nsb][32] super-block d
  int32_t* isc = nullptr;  // K: [nq][32] integer chunk (sub-block) scales
  int32_t* ibuf = nullptr; // K6: [32 tokens][32 rows] integer sums carried between the two groups of a super-block
  float* dmin = nullptr;   // K4: [nsb][32]
  int32_t* mp = nullptr;   // K4: [nsb][4][32] (m_2i | m_2i+1 << 16)
  int32_t* cbuf = nullptr; // [kGroup][4][16][16]
  float* acc = nullptr;    // [32 tokens][32 rows]
  int8_t* tmp = nullptr;   // [32 rows][32]

  void init(Scratch& sc, int64_t cols) {
    n_cols = cols;
    nb = cols / D::kElems;
    nq = cols / kKc;
    nsb = cols / 256;
    const size_t q_bytes = align64((size_t)cols * kPanelRows);
    const size_t s_bytes = (size_t)(kKind == Kind::kLegacy ? nq : nsb) * kPanelRows * 4;
    const size_t isc_bytes = kKind == Kind::kLegacy ? 0 : (size_t)nq * kPanelRows * 4;
    const size_t ibuf_bytes = (size_t)kTokTile * kPanelRows * 4;
    const size_t dmin_bytes = kKind == Kind::kK4 ? (size_t)nsb * kPanelRows * 4 : 0;
    const size_t mp_bytes = kKind == Kind::kK4 ? (size_t)nsb * 4 * kPanelRows * 4 : 0;
    const size_t c_bytes = (size_t)kGroup * 4 * 256 * 4;
    const size_t acc_bytes = (size_t)kTokTile * kPanelRows * 4;
    const size_t tmp_bytes = (size_t)kPanelRows * 32;
    uint8_t* p = sc.get(q_bytes + align64(s_bytes) + align64(isc_bytes) + ibuf_bytes + align64(dmin_bytes) +
                        align64(mp_bytes) + c_bytes + acc_bytes + tmp_bytes);
    q = p;
    p += q_bytes;
    s = reinterpret_cast<float*>(p);
    p += align64(s_bytes);
    isc = reinterpret_cast<int32_t*>(p);
    p += align64(isc_bytes);
    ibuf = reinterpret_cast<int32_t*>(p);
    p += ibuf_bytes;
    dmin = reinterpret_cast<float*>(p);
    p += align64(dmin_bytes);
    mp = reinterpret_cast<int32_t*>(p);
    p += align64(mp_bytes);
    cbuf = reinterpret_cast<int32_t*>(p);
    p += c_bytes;
    acc = reinterpret_cast<float*>(p);
    p += acc_bytes;
    tmp = reinterpret_cast<int8_t*>(p);
  }

  // Decodes rows [0, nr) starting at w0 (row stride `stride`); rows nr..31 become zero.
  void decode(const uint8_t* w0, size_t stride, int nr) {
    const __m512i ridx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(32));
    if (nr < kPanelRows) std::memset(tmp, 0, (size_t)kPanelRows * 32);
    for (int64_t b = 0; b < nb; ++b) {
      typename D::St st[kPanelRows];
      for (int i = 0; i < nr; ++i) {
        const uint8_t* blk = w0 + (size_t)i * stride + (size_t)b * D::kBytes;
        D::begin(blk, st[i]);
        scales(blk, b, i);
      }
      for (int i = nr; i < kPanelRows; ++i) zero_scales(b, i);
      for (int c = 0; c < D::kChunks; ++c) {
        for (int i = 0; i < nr; ++i) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(tmp + 32 * i), D::chunk(st[i], c));
        }
        // tmp [32 rows][32 elements] -> B layout.
        const int64_t kbase = b * D::kElems + 32 * c;
        for (int h = 0; h < 2; ++h)
          for (int i = 0; i < 8; ++i) {
            const int64_t k = kbase + 4 * i;
            const int64_t qi = k / kKc, ii = (k % kKc) / 4;
            const __m512i v = _mm512_i32gather_epi32(ridx, tmp + 16 * 32 * h + 4 * i, 1);
            _mm512_store_si512(q + ((qi * 2 + h) * (kKc / 4) + ii) * 64, v);
          }
      }
    }
  }

  void scales(const uint8_t* blk, int64_t b, int i) {
    if constexpr (kKind == Kind::kLegacy) {
      s[b * kPanelRows + i] = f16_at(blk);
    } else if constexpr (kKind == Kind::kK4) {
      s[b * kPanelRows + i] = f16_at(blk);
      dmin[b * kPanelRows + i] = f16_at(blk + 2);
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) get_scale_min_k4(j, blk + 4, &sc[j], &m[j]);
      for (int j = 0; j < 8; ++j) isc[(b * 8 + j) * kPanelRows + i] = sc[j];
      for (int j = 0; j < 4; ++j)
        mp[(b * 4 + j) * kPanelRows + i] = (int32_t)((uint32_t)m[2 * j] | ((uint32_t)m[2 * j + 1] << 16));
    } else {
      s[b * kPanelRows + i] = f16_at(blk + 208);
      const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
      for (int j = 0; j < 16; ++j) isc[(b * 16 + j) * kPanelRows + i] = sc[j];
    }
  }
  void zero_scales(int64_t b, int i) {
    if constexpr (kKind == Kind::kLegacy) {
      s[b * kPanelRows + i] = 0.f;
    } else if constexpr (kKind == Kind::kK4) {
      s[b * kPanelRows + i] = 0.f;
      dmin[b * kPanelRows + i] = 0.f;
      for (int j = 0; j < 8; ++j) isc[(b * 8 + j) * kPanelRows + i] = 0;
      for (int j = 0; j < 4; ++j) mp[(b * 4 + j) * kPanelRows + i] = 0;
    } else {
      s[b * kPanelRows + i] = 0.f;
      for (int j = 0; j < 16; ++j) isc[(b * 16 + j) * kPanelRows + i] = 0;
    }
  }
};

template <class D>
void gemm_amx_t(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
                float* y, int64_t ldy) {
  using P = Panel<D>;
  constexpr int kKc = P::kKc;
  constexpr Kind kKind = P::kKind;
  thread_local Scratch scratch;
  P p;
  p.init(scratch, wm.n_cols);
  configure_tiles(kKc);
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const size_t S = L.stride;

  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const int nr = (int)std::min<int64_t>(kPanelRows, r1 - r);
    p.decode(base + (size_t)r * wm.row_stride, wm.row_stride, nr);
    const __mmask16 rmask[2] = {(__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1),
                                (__mmask16)(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1)};
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokTile) {
      const int nt = (int)std::min<int64_t>(kTokTile, n_tok - t0);
      const uint8_t* a0 = act + (size_t)t0 * S;
      std::memset(p.acc, 0, sizeof(float) * kTokTile * kPanelRows);
      for (int64_t q0 = 0; q0 < p.nq; q0 += kGroup) {
        const int n = (int)std::min<int64_t>(kGroup, p.nq - q0);
        for (int ci = 0; ci < n; ++ci) {
          const int64_t qi = q0 + ci;
          _tile_loadd(0, a0 + qi * kKc, (long)S);
          _tile_loadd(1, a0 + 16 * S + qi * kKc, (long)S);
          _tile_loadd(2, p.q + (qi * 2 + 0) * (kKc / 4) * 64, 64);
          _tile_loadd(3, p.q + (qi * 2 + 1) * (kKc / 4) * 64, 64);
          _tile_zero(4);
          _tile_zero(5);
          _tile_zero(6);
          _tile_zero(7);
          _tile_dpbssd(4, 0, 2);
          _tile_dpbssd(5, 0, 3);
          _tile_dpbssd(6, 1, 2);
          _tile_dpbssd(7, 1, 3);
          int32_t* cb = p.cbuf + ci * 4 * 256;
          _tile_stored(4, cb + 0 * 256, 64);
          _tile_stored(5, cb + 1 * 256, 64);
          _tile_stored(6, cb + 2 * 256, 64);
          _tile_stored(7, cb + 3 * 256, 64);
        }
        // f32 pass over the group.
        for (int h = 0; h < 2; ++h) {
          if (!rmask[h]) continue;
          if constexpr (kKind == Kind::kLegacy) {
            __m512 dw[kGroup];
            for (int ci = 0; ci < n; ++ci) dw[ci] = _mm512_load_ps(p.s + (q0 + ci) * kPanelRows + 16 * h);
            for (int t = 0; t < nt; ++t) {
              const int g = t >> 4, tt = t & 15;
              const float* da = reinterpret_cast<const float*>(a0 + (size_t)t * S + L.off_d) + q0;
              float* accp = p.acc + t * kPanelRows + 16 * h;
              __m512 acc = _mm512_load_ps(accp);
              const int32_t* cb = p.cbuf + (2 * g + h) * 256 + tt * 16;
              for (int ci = 0; ci < n; ++ci) {
                const __m512 c = _mm512_cvtepi32_ps(_mm512_load_si512(cb + ci * 4 * 256));
                acc = _mm512_fmadd_ps(c, _mm512_mul_ps(dw[ci], _mm512_set1_ps(da[ci])), acc);
              }
              _mm512_store_ps(accp, acc);
            }
          } else {
            __m512i iscv[kGroup];
            for (int ci = 0; ci < n; ++ci) iscv[ci] = _mm512_load_si512(p.isc + (q0 + ci) * kPanelRows + 16 * h);
            const int64_t sb = q0 * kKc / 256;
            const bool sb_start = (q0 * kKc) % 256 == 0, sb_end = ((q0 + n) * kKc) % 256 == 0;
            const __m512 dv = _mm512_load_ps(p.s + sb * kPanelRows + 16 * h);
            __m512 dminv = _mm512_setzero_ps();
            __m512i mpv[4];
            if constexpr (kKind == Kind::kK4) {
              dminv = _mm512_load_ps(p.dmin + sb * kPanelRows + 16 * h);
              for (int j = 0; j < 4; ++j) mpv[j] = _mm512_load_si512(p.mp + (sb * 4 + j) * kPanelRows + 16 * h);
            }
            for (int t = 0; t < nt; ++t) {
              const int g = t >> 4, tt = t & 15;
              const uint8_t* arow = a0 + (size_t)t * S;
              const int32_t* cb = p.cbuf + (2 * g + h) * 256 + tt * 16;
              int32_t* ib = p.ibuf + t * kPanelRows + 16 * h;
              __m512i is = sb_start ? _mm512_setzero_si512() : _mm512_load_si512(ib);
              for (int ci = 0; ci < n; ++ci)
                is = _mm512_add_epi32(is, _mm512_mullo_epi32(_mm512_load_si512(cb + ci * 4 * 256), iscv[ci]));
              if (!sb_end) {
                _mm512_store_si512(ib, is);
                continue;
              }
              const __m512 da = _mm512_set1_ps(reinterpret_cast<const float*>(arow + L.off_d)[sb]);
              float* accp = p.acc + t * kPanelRows + 16 * h;
              __m512 acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dv, da), _mm512_load_ps(accp));
              if constexpr (kKind == Kind::kK4) {
                const auto* bsp = reinterpret_cast<const int32_t*>(arow + L.off_bs) + sb * 4;
                __m512i m = _mm512_setzero_si512();
                for (int j = 0; j < 4; ++j) m = _mm512_dpwssd_epi32(m, mpv[j], _mm512_set1_epi32(bsp[j]));
                acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dminv, da), acc);
              }
              _mm512_store_ps(accp, acc);
            }
          }
        }
      }
      for (int t = 0; t < nt; ++t)
        for (int h = 0; h < 2; ++h)
          if (rmask[h])
            _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r + 16 * h, rmask[h], _mm512_load_ps(p.acc + t * kPanelRows + 16 * h));
    }
  }
  _tile_release();
}

// Q8_0 with few tokens (speculative verify on the lm_head: weights read once, compute must keep
// up with memory): the raw weight rows are tile A directly (16 rows x 32 bytes at stride
// row_stride, no decoding); the <= 32 tokens are tile B in VNNI layout, built once per call.
// C[row][token]; per row acc = fma(f32(C), d_a[tokens] * d_w[row], acc) (d_w gathered per 16 rows and block).
constexpr int64_t kDirectMaxTokens = 32;

struct DirectScratch {
  alignas(64) int8_t bt[2][256][8][64];  // [token group][block][k/4][16 tokens x 4]
  alignas(64) float da[2][256][16];      // [token group][block][token]
  alignas(64) float dw[kGroup][kPanelRows];
  alignas(64) int32_t cbuf[kGroup][4][256];
  alignas(64) float acc[kPanelRows][kDirectMaxTokens];
  alignas(64) uint8_t tail[kPanelRows * 256 * 34];  // zero-padded copy of a partial panel
};

template <int kGroups>
void gemm_q8_0_direct_t(const QMatrix& wm, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L,
                        int64_t n_tok, float* y, int64_t ldy) {
  thread_local std::unique_ptr<DirectScratch> ds_owner;  // heap: too big for static TLS
  if (!ds_owner) ds_owner = std::make_unique<DirectScratch>();
  DirectScratch& ds = *ds_owner;
  const int64_t nb = wm.n_cols / 32;
  const size_t S = L.stride;
  for (int g = 0; g < kGroups; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      for (int t = 0; t < 16; ++t) {
        const uint8_t* arow = act + (size_t)(16 * g + t) * S;  // rows past n_tok are zero (padding)
        ds.da[g][b][t] = reinterpret_cast<const float*>(arow + L.off_d)[b];
        for (int i = 0; i < 8; ++i) std::memcpy(&ds.bt[g][b][i][4 * t], arow + 32 * b + 4 * i, 4);
      }
    }
  TileCfg cfg;
  for (int i = 0; i < 2; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 32;
    cfg.rows[2 + i] = 8;
    cfg.colsb[2 + i] = 64;
  }
  for (int i = 4; i < 8; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
  const auto* base = static_cast<const uint8_t*>(wm.data);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i aidx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(kDirectMaxTokens));

  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const int nr = (int)std::min<int64_t>(kPanelRows, r1 - r);
    const uint8_t* w = base + (size_t)r * wm.row_stride;
    size_t stride = wm.row_stride;
    if (nr < kPanelRows) {  // never read past the matrix: copy the rows, zero the rest
      stride = (size_t)nb * 34;
      std::memset(ds.tail, 0, stride * kPanelRows);
      for (int i = 0; i < nr; ++i) std::memcpy(ds.tail + i * stride, w + i * wm.row_stride, stride);
      w = ds.tail;
    } else if (r + 2 * kPanelRows <= r1) {
      const uint8_t* pf = w + 2 * kPanelRows * wm.row_stride;
      for (size_t l = 0; l < (kPanelRows * wm.row_stride + 63) / 64; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    }
    const __m512i widx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)stride));
    std::memset(ds.acc, 0, sizeof(ds.acc));
    for (int64_t b0 = 0; b0 < nb; b0 += kGroup) {
      const int n = (int)std::min<int64_t>(kGroup, nb - b0);
      for (int ci = 0; ci < n; ++ci) {
        const int64_t b = b0 + ci;
        const uint8_t* wb = w + 34 * b;
        _tile_loadd(0, wb + 2, (long)stride);
        _tile_loadd(1, wb + 16 * stride + 2, (long)stride);
        _tile_loadd(2, ds.bt[0][b], 64);
        _tile_zero(4);
        _tile_zero(5);
        _tile_dpbssd(4, 0, 2);
        _tile_dpbssd(5, 1, 2);
        _tile_stored(4, ds.cbuf[ci][0], 64);
        _tile_stored(5, ds.cbuf[ci][1], 64);
        if constexpr (kGroups == 2) {
          _tile_loadd(3, ds.bt[1][b], 64);
          _tile_zero(6);
          _tile_zero(7);
          _tile_dpbssd(6, 0, 3);
          _tile_dpbssd(7, 1, 3);
          _tile_stored(6, ds.cbuf[ci][2], 64);
          _tile_stored(7, ds.cbuf[ci][3], 64);
        }
        for (int h = 0; h < 2; ++h) {
          const __m512i g = _mm512_i32gather_epi32(widx, wb + 16 * h * stride, 1);
          _mm512_store_ps(ds.dw[ci] + 16 * h, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
        }
      }
      for (int g = 0; g < kGroups; ++g) {
        __m512 da[kGroup];
        for (int ci = 0; ci < n; ++ci) da[ci] = _mm512_load_ps(ds.da[g][b0 + ci]);
        for (int i = 0; i < kPanelRows; ++i) {
          float* accp = ds.acc[i] + 16 * g;
          __m512 acc = _mm512_load_ps(accp);
          const int h = i >> 4, ii = i & 15;
          for (int ci = 0; ci < n; ++ci) {
            const __m512 c = _mm512_cvtepi32_ps(_mm512_load_si512(ds.cbuf[ci][2 * g + h] + 16 * ii));
            acc = _mm512_fmadd_ps(c, _mm512_mul_ps(da[ci], _mm512_set1_ps(ds.dw[ci][i])), acc);
          }
          _mm512_store_ps(accp, acc);
        }
      }
    }
    // acc [rows][tokens] -> y rows: gather each token's column from L1, store contiguously.
    const __mmask16 rmask0 = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    const __mmask16 rmask1 = (__mmask16)(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
    for (int64_t t = 0; t < n_tok; ++t) {
      float* yt = y + t * ldy + r;
      _mm512_mask_storeu_ps(yt, rmask0, _mm512_i32gather_ps(aidx, &ds.acc[0][t], 4));
      if (rmask1) _mm512_mask_storeu_ps(yt + 16, rmask1, _mm512_i32gather_ps(aidx, &ds.acc[16][t], 4));
    }
  }
  _tile_release();
}

}  // namespace

bool amx_supports(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

void amx_prepare_act(uint8_t* row, const ActLayout& L) {
  // qs: q + 128 -> q (int8).
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  int64_t k = 0;
  for (; k + 64 <= L.n_cols; k += 64) {
    auto* p = reinterpret_cast<__m512i*>(row + k);
    _mm512_storeu_si512(p, _mm512_xor_si512(_mm512_loadu_si512(p), flip));
  }
  for (; k < L.n_cols; ++k) row[k] ^= 0x80;
  if (L.kind == ActKind::kQ8_K) {
    // bsums[16] (16-element sums) -> 4 x (s32_2i | s32_2i+1 << 16) per super-block, in place.
    auto* bs = reinterpret_cast<int16_t*>(row + L.off_bs);
    for (int64_t sb = 0; sb < L.n_cols / 256; ++sb) {
      int16_t s32[8];
      for (int j = 0; j < 8; ++j) s32[j] = (int16_t)(bs[16 * sb + 2 * j] + bs[16 * sb + 2 * j + 1]);
      int16_t* out = bs + 8 * sb;
      for (int j = 0; j < 8; ++j) out[j] = s32[j];
    }
  }
}

void gemm_amx(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* act, const ActLayout& L, int64_t n_tok,
              float* y, int64_t ldy) {
  if (w.type == DType::Q8_0 && n_tok <= kDirectMaxTokens && w.n_cols <= 256 * 32 &&
      (int64_t)w.row_stride * 16 < ((int64_t)1 << 31) / 16) {
    if (n_tok <= 16) gemm_q8_0_direct_t<1>(w, r0, r1, act, L, n_tok, y, ldy);
    else gemm_q8_0_direct_t<2>(w, r0, r1, act, L, n_tok, y, ldy);
    return;
  }
  switch (w.type) {
    case DType::Q8_0: gemm_amx_t<DecQ8_0>(w, r0, r1, act, L, n_tok, y, ldy); break;
    case DType::Q4_0: gemm_amx_t<DecQ4_0>(w, r0, r1, act, L, n_tok, y, ldy); break;
    case DType::Q5_0: gemm_amx_t<DecQ5_0>(w, r0, r1, act, L, n_tok, y, ldy); break;
    case DType::Q4_K: gemm_amx_t<DecQ4_K>(w, r0, r1, act, L, n_tok, y, ldy); break;
    case DType::Q5_K: gemm_amx_t<DecQ5_K>(w, r0, r1, act, L, n_tok, y, ldy); break;
    case DType::Q6_K: gemm_amx_t<DecQ6_K>(w, r0, r1, act, L, n_tok, y, ldy); break;
    default: break;
  }
}

}  // namespace dspark::kernels::cpu
