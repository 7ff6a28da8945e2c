#include "quant/turbo.h"

#include <algorithm>
#include <cmath>

#include "core/f16.h"
#include "quant/pack.h"

namespace dspark::quant {

int nearest_level(const std::vector<float>& levels, float v) {
  // Boundaries are midpoints; the first level whose upper boundary is >= v.
  int i = 0;
  while (i + 1 < (int)levels.size() && v > 0.5f * (levels[(size_t)i] + levels[(size_t)i + 1])) ++i;
  return i;
}

namespace {

constexpr int kScaleRefits = 2;

void group_codes(const float* w, int g, double s, const std::vector<float>& levels, uint8_t* codes) {
  for (int j = 0; j < g; ++j) codes[j] = (uint8_t)nearest_level(levels, s != 0 ? (float)(w[j] / s) : 0.0f);
}

}  // namespace

void turbo_quantize_row(const float* w, const Rotation& rot, const std::vector<float>& levels, int bits, int g,
                        uint8_t* packed, uint16_t* scales) {
  const int64_t n = rot.n_cols;
  std::vector<float> wr(w, w + n);
  rotate_ref(rot, wr.data());
  std::vector<uint8_t> codes((size_t)n);
  for (int64_t gi = 0; gi < n / g; ++gi) {
    const float* wg = wr.data() + gi * g;
    uint8_t* cg = codes.data() + gi * g;
    double ss = 0;
    for (int j = 0; j < g; ++j) ss += (double)wg[j] * wg[j];
    double s = std::sqrt(ss / g);
    for (int it = 0; it < kScaleRefits && s > 0; ++it) {
      group_codes(wg, g, s, levels, cg);
      double wc = 0, cc = 0;
      for (int j = 0; j < g; ++j) {
        const double c = levels[cg[j]];
        wc += (double)wg[j] * c;
        cc += c * c;
      }
      if (cc > 0 && wc > 0) s = wc / cc;
    }
    const uint16_t sb = fp32_to_bf16((float)s);
    group_codes(wg, g, bf16_to_fp32(sb), levels, cg);
    scales[gi] = sb;
  }
  pack_codes(codes.data(), n, bits, packed);
}

}  // namespace dspark::quant
