// Drafter diagnostics (issue #11): is the context path alive, how sharp are the draft distributions
// next to the target's, does the drafter under- or over-fit. Teacher-forced, target out of the loop:
// the training forward (DraftNet) over regen sequences, as `dspark sensitivity` runs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/dataset.h"
#include "train/draft_net.h"

namespace dspark::train {

// How the context taps of a batch are altered before the forward.
enum class TapAblation { kNone, kZero, kShuffle };
const char* tap_ablation_name(TapAblation a);

// Teacher-forced statistics by slot (0-based: slot k predicts x_{a+k+1}).
struct SlotStats {
  std::vector<double> top1;            // [γ] argmax p_d == label
  std::vector<double> cstar;           // [γ] Σ min(p_d, p_t) over the target's top-k (T = 1 acceptance)
  std::vector<double> draft_entropy;   // [γ] nats, full draft distribution
  std::vector<double> target_entropy;  // [γ] nats, over the recorded top-k (a lower bound)
  std::vector<int64_t> count;          // [γ] valid slots
  // Lookup-input drafters: top-1 split by whether the lookup had a guess for the slot's label
  // (slot k + 1's input is not MASK); empty for drafters without lookup input.
  std::vector<double> top1_guessed, top1_unguessed;
  std::vector<int64_t> count_guessed, count_unguessed;
  // Slot 1 binned by the target's own top-1 probability (kTargetConfidenceBins): how many slots fall
  // in each bin and how often the draft's argmax is the target's argmax there. Where the misses sit
  // says whether a better drafter can still gain (misses where the target is sure) or the target's
  // own uncertainty bounds acceptance (misses where its top-1 is a coin flip).
  // slot1_bin_in_vocab: the share whose target argmax is in the draft vocabulary at all (d2t), the
  // ceiling of draft_top1 in that bin: a miss outside the vocabulary no drafter of this vocabulary fixes.
  std::vector<int64_t> slot1_bin_count;
  std::vector<double> slot1_bin_top1;
  std::vector<double> slot1_bin_in_vocab;
  double loss = 0;
};

// Upper edges of the target top-1 probability bins of SlotStats::slot1_bin_* (the last is 1).
inline constexpr double kTargetConfidenceBins[] = {0.2, 0.4, 0.6, 0.8, 0.95, 1.0};

// Runs the forward over `batch` (taps already in the drafter's input scale) with taps altered per
// `ab` (kShuffle: every sequence gets the context rows of the next sequence of the batch, cyclically,
// cut or zero-padded to its own length; seeds nothing, deterministic).
SlotStats teacher_forced_stats(DraftNet& net, const DraftParams& p, TrainBatch batch, TapAblation ab);

// Per-tap RMS table over the data (Dataset::tap_column_stats): per tap, the RMS over all dimensions,
// the largest and the median per-dimension RMS, and the largest |value| seen.
struct TapRmsRow {
  int tap = 0;
  double rms = 0, dim_rms_max = 0, dim_rms_median = 0, abs_max = 0;
};
std::vector<TapRmsRow> tap_rms_table(const Dataset& ds, const std::vector<int>& taps, const std::vector<int>& cols,
                                     int64_t n_seqs);

}  // namespace dspark::train
