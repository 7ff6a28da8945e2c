// Held-out acceptance with the serving drafter (spec::DSparkDrafter: the real draftBlock, loaded
// from an exported checkpoint): along each held-out greedy regen sequence, replay speculative
// decoding at temperature 0 — draft from the anchor, accept the prefix equal to the target's own
// next tokens, commit anchor + accepted rows with the recorded taps, continue from the target token.
// The target's greedy output is exactly the recorded sequence, so this is the acceptance a T = 0
// spec run would see (up to bf16 rounding of the recorded taps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "model/gemma3.h"
#include "train/dataset.h"

namespace dspark::train {

struct HeldoutResult {
  int64_t sequences = 0, rounds = 0, drafted = 0, accepted = 0, tokens = 0;
  std::vector<int64_t> drafted_at, accepted_at;  // [γ] per draft position
  double draft_ms = 0;                           // drafter time (draft + commit) in total
  double tau() const { return rounds ? (double)tokens / (double)rounds : 0.0; }
  double acceptance() const { return drafted ? (double)accepted / (double)drafted : 0.0; }
  double ms_per_round() const { return rounds ? draft_ms / (double)rounds : 0.0; }
  // Also the calibration data for STS: per round, raw confidence logits and accepted length.
  std::vector<std::vector<float>> conf_logits;   // [rounds][γ]
  std::vector<int32_t> accepted_len;             // [rounds]
};

// Runs up to max_seqs held-out greedy sequences (temperature 0 only). gamma 0 = block size.
Result<HeldoutResult> heldout_eval(const std::string& drafter_dir, const model::Gemma3Model& target, const Dataset& ds,
                                   int64_t max_seqs, int gamma, float threshold, bool record_confidence,
                                   ThreadPool* pool);

}  // namespace dspark::train
