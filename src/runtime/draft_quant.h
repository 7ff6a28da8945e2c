// --draft-quant: which form of a mounted DSpark drafter is loaded (issue #5 item 7).
//
//   none  the checkpoint as given;
//   auto  an unquantized checkpoint is converted once to the recommended rung
//         (drafters/quant_auto.json: method / bits / group, or a recipe from drafters/recipes/,
//         chosen from the measured acceptance-per-byte curve, docs/results/2026-11-29.md), written through a
//         staging folder beside the source (DIR-auto-<rung>; if DIR's parent is not writable, under
//         <cache>/drafters/), reloaded and drafted once before it is renamed into place, and reused
//         on later runs. A quantized checkpoint, a drafter that does not load against the target,
//         one the rung does not fit (e.g. a dimension not a multiple of the group), or no
//         recommendation file: loads as given. When the recommendation names a `min_isa` this CPU
//         lacks (scalar < avx2 < avx512 < amx; the shipped one names amx: without AMX the integer
//         copies drafted fastest where measured, docs/QUANT-FORMAT.md), auto means int4 for a
//         checkpoint whose copied matrices are affine 4-bit throughout (exact copies), else int8;
//   int8  the checkpoint as given on disk; its matmul weights are held as 8-bit (Q8_0) copies in
//         memory for the integer kernels (net::DSparkLoadOptions::copy_bits);
//   int4  the same with 4-bit (Q4_1) copies: half the bytes per draft; for checkpoints already
//         quantized to 4 bits, whose weights they hold at the same precision.
// Says on stderr what it did.
#pragma once

#include <string>

#include "core/note.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "speculative/spec_config.h"

namespace dspark::runtime {

// What to load: the checkpoint directory and whether its matmul weights become integer copies.
struct DraftQuantChoice {
  std::string dir;
  int copy_bits = 0;  // 8 / 4: Q8_0 / Q4_1 copies (net::DSparkLoadOptions::copy_bits); 0: as given
  std::string note;  // a remark on the choice (int8 copies kept, or a slow checkpoint as given), for --verbose / ab
  // The SpecConfig::quant that loads `dir` so.
  speculative::DraftQuant mode() const {
    return copy_bits == 8 ? speculative::DraftQuant::kInt8 : copy_bits == 4 ? speculative::DraftQuant::kInt4 : speculative::DraftQuant::kNone;
  }
};

// The choice for `dir` under `mode`; `cache_dir` = the dspark cache. A conversion made or reused
// by auto is reported to `note` (one line each).
// Only DSpark checkpoint directories are touched (kind "dspark", or "auto" detecting one).
// `recommendation` = the quant_auto.json to use ("" = drafters/quant_auto.json of the install).
Result<DraftQuantChoice> resolve_draft_quant(const std::string& dir, speculative::DraftQuant mode,
                                             const model::Model& target, const std::string& cache_dir,
                                             ThreadPool* pool, const std::string& recommendation = "",
                                             const NoteFn& note = nullptr);
// The same for a drafter flag pair (--draft-kind, --draft-model): other kinds pass through as given.
// With mode "none", a quantized DSpark checkpoint on a CPU without AMX gets a note saying it drafts
// slower than the int8 copies the other modes load.
Result<DraftQuantChoice> resolve_draft_quant_for(const std::string& kind, const std::string& path,
                                                 speculative::DraftQuant mode, const model::Model& target,
                                                 const std::string& cache_dir, ThreadPool* pool,
                                                 const NoteFn& note = nullptr);

}  // namespace dspark::runtime
