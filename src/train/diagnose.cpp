#include "train/diagnose.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/f16.h"

namespace dspark::train {

const char* tap_ablation_name(TapAblation a) {
  switch (a) {
    case TapAblation::kNone: return "taps";
    case TapAblation::kZero: return "taps zeroed";
    case TapAblation::kShuffle: return "taps shuffled";
  }
  return "?";
}

SlotStats teacher_forced_stats(DraftNet& net, const DraftParams& p, TrainBatch batch, TapAblation ab) {
  if (ab == TapAblation::kZero) {
    for (TrainSeq& s : batch.seqs) std::fill(s.taps.begin(), s.taps.end(), 0.0f);
  } else if (ab == TapAblation::kShuffle && batch.seqs.size() > 1) {
    std::vector<std::vector<float>> orig;
    for (const TrainSeq& s : batch.seqs) orig.push_back(s.taps);
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      const std::vector<float>& src = orig[(i + 1) % orig.size()];
      std::vector<float>& dst = batch.seqs[i].taps;
      const size_t n = std::min(src.size(), dst.size());
      std::copy(src.begin(), src.begin() + (ptrdiff_t)n, dst.begin());
      std::fill(dst.begin() + (ptrdiff_t)n, dst.end(), 0.0f);
    }
  }
  const LossTerms lt = net.run(batch, false);
  const int64_t g = p.cfg.block_size, vd = (int64_t)p.d2t.size();
  SlotStats s;
  s.top1.assign((size_t)g, 0.0);
  s.cstar.assign((size_t)g, 0.0);
  s.draft_entropy.assign((size_t)g, 0.0);
  s.target_entropy.assign((size_t)g, 0.0);
  s.count.assign((size_t)g, 0);
  s.loss = lt.loss;
  const std::vector<float>& logits = net.logits();
  const bool lookup = p.cfg.lookup_max_ngram > 0;
  constexpr size_t kBins = std::size(kTargetConfidenceBins);
  s.slot1_bin_count.assign(kBins, 0);
  s.slot1_bin_top1.assign(kBins, 0.0);
  s.slot1_bin_in_vocab.assign(kBins, 0.0);
  if (lookup) {
    s.top1_guessed.assign((size_t)g, 0.0);
    s.top1_unguessed.assign((size_t)g, 0.0);
    s.count_guessed.assign((size_t)g, 0);
    s.count_unguessed.assign((size_t)g, 0);
  }
  for (size_t bi = 0; bi < batch.blocks.size(); ++bi) {
    const TrainBlock& blk = batch.blocks[bi];
    for (int64_t k = 0; k < g; ++k) {
      if (blk.label[(size_t)k] < 0) continue;
      const float* l = &logits[(bi * (size_t)g + (size_t)k) * (size_t)vd];
      const int64_t best = std::max_element(l, l + vd) - l;
      const float mx = l[best];
      if (k == 0 && batch.top_k > 0) {
        // The recorded top-k is sorted, so entry 0 is the target's argmax and its probability.
        const double p1 = blk.dist_probs[0][0];
        size_t bin = 0;
        while (bin + 1 < kBins && p1 >= kTargetConfidenceBins[bin]) ++bin;
        ++s.slot1_bin_count[bin];
        const int32_t top = blk.dist_ids[0][0];
        const int32_t top_d = top >= 0 && (size_t)top < p.t2d.size() ? p.t2d[(size_t)top] : -1;
        if (top_d >= 0) s.slot1_bin_in_vocab[bin] += 1.0;
        if (top_d == best) s.slot1_bin_top1[bin] += 1.0;
      }
      if (lookup) {
        const bool guessed = k + 1 < g && !blk.inputs.empty() && blk.inputs[(size_t)k + 1] != p.cfg.mask_token_id;
        const double hit = p.t2d[(size_t)blk.label[(size_t)k]] == best ? 1.0 : 0.0;
        (guessed ? s.top1_guessed : s.top1_unguessed)[(size_t)k] += hit;
        ++(guessed ? s.count_guessed : s.count_unguessed)[(size_t)k];
      }
      double z = 0, zl = 0;
      for (int64_t v = 0; v < vd; ++v) {
        const double e = std::exp((double)l[v] - mx);
        z += e;
        zl += e * ((double)l[v] - mx);
      }
      s.draft_entropy[(size_t)k] += std::log(z) - zl / z;
      double ht = 0;
      for (int32_t j = 0; j < batch.top_k; ++j) {
        const double t = blk.dist_probs[(size_t)k][j];
        if (t > 0) ht -= t * std::log(t);
      }
      s.target_entropy[(size_t)k] += ht;
      ++s.count[(size_t)k];
    }
  }
  for (size_t b = 0; b < kBins; ++b) {
    s.slot1_bin_top1[b] /= (double)std::max<int64_t>(1, s.slot1_bin_count[b]);
    s.slot1_bin_in_vocab[b] /= (double)std::max<int64_t>(1, s.slot1_bin_count[b]);
  }
  for (int64_t k = 0; k < g; ++k) {
    const double n = (double)std::max<int64_t>(1, s.count[(size_t)k]);
    s.top1[(size_t)k] = lt.count[(size_t)k] ? lt.top1_sum[(size_t)k] / (double)lt.count[(size_t)k] : 0.0;
    s.cstar[(size_t)k] = lt.count[(size_t)k] ? lt.accept_sum[(size_t)k] / (double)lt.count[(size_t)k] : 0.0;
    s.draft_entropy[(size_t)k] /= n;
    if (lookup) {
      s.top1_guessed[(size_t)k] /= (double)std::max<int64_t>(1, s.count_guessed[(size_t)k]);
      s.top1_unguessed[(size_t)k] /= (double)std::max<int64_t>(1, s.count_unguessed[(size_t)k]);
    }
    s.target_entropy[(size_t)k] /= n;
  }
  return s;
}

std::vector<TapRmsRow> tap_rms_table(const Dataset& ds, const std::vector<int>& taps, const std::vector<int>& cols,
                                     int64_t n_seqs) {
  const int64_t H = ds.layout().n_embd;
  const TapColumnStats st = ds.tap_column_stats(cols, n_seqs, /*seed=*/1);
  std::vector<TapRmsRow> out;
  for (size_t c = 0; c < cols.size(); ++c) {
    std::vector<double> d(st.rms.begin() + (ptrdiff_t)(c * H), st.rms.begin() + (ptrdiff_t)((c + 1) * H));
    TapRmsRow r;
    r.tap = taps[c];
    double tot = 0;
    for (double x : d) tot += x * x;
    r.rms = std::sqrt(tot / (double)H);
    r.abs_max = *std::max_element(st.abs_max.begin() + (ptrdiff_t)(c * H), st.abs_max.begin() + (ptrdiff_t)((c + 1) * H));
    std::sort(d.begin(), d.end());
    r.dim_rms_max = d.back();
    r.dim_rms_median = d[(size_t)H / 2];
    out.push_back(r);
  }
  return out;
}

}  // namespace dspark::train
