// Building a suffix index (speculative/suffix_index.h) from regen token-id files: what
// `dspark suffix-index build` does, and what the first use of a shipped default builds into the
// cache (tools/spec_flags.h: a drafter folder's default_spec.json names the ids, not the index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/loaded_model.h"
#include "train/regen_ids.h"

namespace dspark::tools {

struct SuffixIndexBuild {
  uint64_t sequences = 0, tokens = 0, bytes = 0;
  std::string sha256;  // of the file written
};

// The answers (with_prompts: whole sequences) of the ids files (dspark-regen-ids-v1; .xz ones are
// decompressed with the xz tool), in order, indexed for lm's tokenizer and written to `out`. The same
// inputs give the same bytes. Shows a progress bar while sorting. *bad_input (if given): the error is
// an ids file's (missing, not an ids file, another vocabulary), not the writing's.
Result<SuffixIndexBuild> build_suffix_index(const std::vector<std::string>& ids_paths, const runtime::LoadedModel& lm,
                                            bool with_prompts, const std::string& out, bool* bad_input = nullptr);

// An ids file (dspark-regen-ids-v1), a .xz one decompressed with the xz tool first.
Result<train::IdsFile> read_ids_any(const std::string& path, int64_t n_vocab);

// SHA-256 of a file, hex ("" if it cannot be read).
std::string file_sha256(const std::string& path);

}  // namespace dspark::tools
