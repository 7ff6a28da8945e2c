// Regen shards: what the target generated for a batch of training prompts, in the form drafter
// training reads it (issue #4). One shard = one safetensors file, written atomically:
//
//   tokens       I32  [n_tok]                      prompt + response of every sequence, concatenated
//   seq_start    I64  [n_seq + 1]                  sequence s = tokens[seq_start[s], seq_start[s+1])
//   prompt_len   I32  [n_seq]                      chat-templated prompt tokens (BOS included)
//   prompt_index I64  [n_seq]                      line index in the prompts file
//   temperature  F32  [n_seq]                      0 = greedy response, > 0 the sampling temperature,
//                                                  < 0 text run teacher-forced (`regen --prompt-text`), not
//                                                  the target's own generation
//   taps         BF16 [n_tok, n_taps * n_embd]     residual rows of the target at the tap layers, in
//                                                  tap order; the LAST row of each sequence is zero
//                                                  (its token was never run; no anchor needs it)
//   dist_ids     I32  [n_dist, top_k]              target next-token distribution (temperature 1),
//   dist_probs   F32  [n_dist, top_k]              top-k ids and probabilities, descending
//
// Distribution rows: sequence s has resp_len = len - prompt_len rows, for positions
// prompt_len - 1 .. len - 2 (row j predicts response token j); rows of all sequences are
// concatenated in sequence order.
// Metadata: format "dspark-regen-v1", tap_ids "1,4,7", top_k, n_embd, content_sha256 (hex SHA-256
// of the data region), so a truncated or altered shard is detected on resume.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/safetensors.h"

namespace dspark::train {

inline constexpr const char* kShardFormat = "dspark-regen-v1";

// One generated sequence, as the regenerator produces it.
struct RegenSeq {
  int64_t prompt_index = 0;
  int32_t prompt_len = 0;
  float temperature = 0;
  std::vector<int32_t> tokens;       // [len]
  std::vector<uint16_t> taps;        // [len, n_taps * n_embd] bf16 (last row zero)
  std::vector<int32_t> dist_ids;     // [len - prompt_len, top_k]
  std::vector<float> dist_probs;     // [len - prompt_len, top_k]
};

struct ShardLayout {
  std::vector<int> tap_ids;
  int32_t top_k = 0;
  int64_t n_embd = 0;
  int64_t row_width() const { return (int64_t)tap_ids.size() * n_embd; }
};

// Writes sequences as one shard at `path` (temporary file + rename: never a partial shard).
// Checks every sequence's array sizes against the layout.
Status write_shard(const std::string& path, const ShardLayout& layout, std::span<const RegenSeq> seqs);

// A shard opened for reading (memory-mapped; views stay valid while the object lives).
class Shard {
 public:
  // Opens and validates: format, layout fields, every tensor's dtype and shape, sequence
  // offsets monotone and consistent with prompt lengths, token ids < n_vocab (if > 0), and the
  // content checksum when verify_checksum (reads every byte). Errors name the file and field.
  static Result<Shard> open(const std::string& path, int64_t n_vocab, bool verify_checksum);

  const ShardLayout& layout() const { return layout_; }
  const std::string& path() const { return file_->path(); }
  int64_t n_seq() const { return (int64_t)seq_start_.size() - 1; }
  int64_t n_tokens() const { return seq_start_.back(); }
  int64_t n_dist() const { return dist_start_.back(); }
  int64_t seq_len(int64_t s) const { return seq_start_[s + 1] - seq_start_[s]; }
  int32_t prompt_len(int64_t s) const { return prompt_len_[s]; }
  int64_t prompt_index(int64_t s) const { return prompt_index_[s]; }
  float temperature(int64_t s) const { return temperature_[s]; }
  // Sequence s's tokens [seq_len]; taps [seq_len, row_width] bf16; dist rows [resp_len, top_k].
  const int32_t* tokens(int64_t s) const;
  const uint16_t* taps(int64_t s) const;
  const int32_t* dist_ids(int64_t s) const;
  const float* dist_probs(int64_t s) const;

 private:
  std::unique_ptr<formats::SafetensorsFile> file_;
  ShardLayout layout_;
  std::vector<int64_t> seq_start_, dist_start_, prompt_index_;
  std::vector<int32_t> prompt_len_;
  std::vector<float> temperature_;
  const uint8_t* tokens_ = nullptr;
  const uint8_t* taps_ = nullptr;
  const uint8_t* dist_ids_ = nullptr;
  const uint8_t* dist_probs_ = nullptr;
};

}  // namespace dspark::train
