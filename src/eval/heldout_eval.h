// Held-out acceptance with the serving drafter (speculative::DSparkDrafter: the real draftBlock, loaded
// from an exported checkpoint): along each held-out greedy regen sequence, replay speculative
// decoding at temperature 0 — draft from the anchor, accept the prefix equal to the target's own
// next tokens, commit anchor + accepted rows with the recorded taps, continue from the target token.
// The target's greedy output is exactly the recorded sequence, so this is the acceptance a T = 0
// spec run would see (up to bf16 rounding of the recorded taps).
#pragma once

#include <cstdint>
#include <string>

#include "core/threadpool.h"
#include "model/model.h"
#include "train/dataset.h"
#include "train/heldout_result.h"

namespace dspark::eval {

// Runs up to max_seqs held-out greedy sequences (temperature 0 only). gamma 0 = block size.
// copy_bits 8 / 4: mount the drafter's matrices as the integer copies serving uses without AMX
// (speculative::DSparkOptions::copy_bits); 0 = the checkpoint as given.
Result<train::HeldoutResult> heldout_eval(const std::string& drafter_dir, const model::Model& target,
                                          const train::Dataset& ds, int64_t max_seqs, int gamma, float threshold,
                                          bool record_confidence, ThreadPool* pool, int copy_bits = 0);

}  // namespace dspark::eval
