// The result of a held-out acceptance evaluation of an exported checkpoint (eval/heldout_eval.h
// runs it with the serving drafter; the trainer receives it through TrainerOptions::heldout, so the
// training library does not depend on the speculative loop).
#pragma once

#include <cstdint>
#include <string>
#include <vector>


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

}  // namespace dspark::train
