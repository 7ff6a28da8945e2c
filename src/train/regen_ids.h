// Token-id files of a regen run (issue #11): the prompt + response ids of every sequence without the
// tap rows and distributions (~4 bytes per token instead of ~7.9 KB), small enough to commit
// compressed, and the replay that rebuilds full shards from them with teacher-forced target
// forwards (prefill speed instead of decode speed, so a new machine need not regenerate).
//
// File: safetensors, metadata format "dspark-regen-ids-v1", settings (the regen settings JSON the
// responses were generated with), content_sha256 (hex SHA-256 of the tensors' bytes in order):
//   seq_start    I64 [n_seq + 1]   sequence s = tokens[seq_start[s], seq_start[s+1])
//   prompt_index I64 [n_seq]       line index in the prompts file
//   prompt_len   I32 [n_seq]       chat-templated prompt tokens (BOS included)
//   temperature  F32 [n_seq]       0 = greedy response
//   tokens       I32 [n_tok]
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "train/regen.h"
#include "train/shard.h"

namespace dspark::train {

inline constexpr const char* kIdsFormat = "dspark-regen-ids-v1";

struct IdsSeq {
  int64_t prompt_index = 0;
  int32_t prompt_len = 0;
  float temperature = 0;
  std::vector<int32_t> tokens;  // prompt + response
};

struct IdsFile {
  std::string settings_json;
  std::vector<IdsSeq> seqs;
};

// Writes the ids of every sequence of `shards` (in the given order) with `settings_json`, through a
// temporary file and a rename.
Status write_ids_file(const std::string& path, const std::string& settings_json, std::span<const Shard* const> shards);

// Reads and validates an ids file: format, tensor dtypes and shapes, offsets, prompt lengths,
// token ids < n_vocab, the content checksum. Errors name the file and field.
Result<IdsFile> read_ids_file(const std::string& path, int64_t n_vocab);

// Rebuilds regen sequences from known tokens: per sequence one teacher-forced forward over
// tokens[0 .. len-2] records the tap rows of every position (the last row zero, as regen writes it)
// and the temperature-1 top-k distribution of positions prompt_len-1 .. len-2.
Status replay_sequences(const model::Model& model, const RegenConfig& cfg, std::span<const IdsSeq> seqs,
                        ThreadPool* pool, const std::function<Status(RegenSeq&&)>& on_done);

}  // namespace dspark::train
