// --draft-quant: which form of a mounted DSpark drafter is loaded (issue #5 item 7).
//
//   none  the checkpoint as given;
//   auto  an unquantized checkpoint is converted once to the recommended rung
//         (drafters/quant_auto.json: method / bits / group, or a recipe from drafters/recipes/,
//         chosen from the measured acceptance-per-byte curve, docs/RESULTS.md), written through a
//         staging folder beside the source (DIR-auto-<rung>; if DIR's parent is not writable, under
//         <cache>/drafters/), reloaded and drafted once before it is renamed into place, and reused
//         on later runs. A quantized checkpoint, a drafter that does not load against the target,
//         one the rung does not fit (e.g. a dimension not a multiple of the group), or no
//         recommendation file: loads as given.
// Says on stderr what it did.
#pragma once

#include <string>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"

namespace dspark::runtime {

// The directory to load for `dir` under `mode` ("auto" | "none"); `cache_dir` = the dspark cache.
// Only DSpark checkpoint directories are touched (kind "dspark", or "auto" detecting one).
// `recommendation` = the quant_auto.json to use ("" = drafters/quant_auto.json of the install).
Result<std::string> resolve_draft_quant(const std::string& dir, const std::string& mode, const model::Model& target,
                                        const std::string& cache_dir, ThreadPool* pool,
                                        const std::string& recommendation = "");
// The same for a drafter flag pair (--draft-kind, --draft-model): other kinds pass through.
Result<std::string> resolve_draft_quant_for(const std::string& kind, const std::string& path, const std::string& mode,
                                            const model::Model& target, const std::string& cache_dir,
                                            ThreadPool* pool);

}  // namespace dspark::runtime
