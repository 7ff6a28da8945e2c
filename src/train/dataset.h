// Regen shards as a training set: held-out split, draft vocabulary, anchor batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "dspark/dspark_config.h"
#include "train/draft_net.h"
#include "train/shard.h"

namespace dspark::train {

struct SeqRef {
  int32_t shard = 0;
  int32_t seq = 0;
};

// How a block's input ids are formed (the drafter's config): [x_a, MASK...], or with lookup input
// (max_ngram > 0) the lookup chain from the anchor over the sequence's earlier tokens, exactly as
// the serving drafter forms them (net::lookup_chain).
struct BlockInputs {
  int32_t mask_token_id = -1;   // < 0: leave TrainBlock::inputs empty ([x_a, MASK...] in DraftNet)
  int max_ngram = 0, min_ngram = 1;
  // Loss weight of a slot that prompt lookup already gets right (the latest earlier occurrence of the
  // last >= 2 true tokens is followed by the label: a copy head with a match of 2 or 3 drafts it).
  // 1 = every slot alike; < 1 spends the network's training on what lookup cannot draft.
  float copyable_weight = 1.0f;
};
BlockInputs block_inputs_of(const net::DSparkConfig& c);

struct TapColumnStats {
  std::vector<double> rms;      // [m * H]
  std::vector<float> abs_max;   // [m * H]
  int64_t rows = 0;
};

class Dataset {
 public:
  // Opens every shard-*.safetensors under each directory (checksums verified; a bad shard is an
  // error naming it). Sequences whose prompt_index % heldout_mod == 0 are held out (0 = none).
  static Result<Dataset> open(const std::vector<std::string>& dirs, int64_t n_vocab, int64_t heldout_mod);

  const ShardLayout& layout() const { return shards_[0].layout(); }
  const std::vector<SeqRef>& train() const { return train_; }
  const std::vector<SeqRef>& heldout() const { return heldout_; }
  const Shard& shard(int32_t i) const { return shards_[(size_t)i]; }
  int64_t train_response_tokens() const;

  // The v_d most frequent response tokens of the training split, ascending ids (the draft vocabulary,
  // d2t), and the share of training response tokens it covers.
  std::vector<int32_t> top_tokens(int64_t v_d, int64_t n_vocab, double* coverage) const;

  // Columns of the shard tap rows for the drafter's taps (each must be a recorded tap).
  Result<std::vector<int>> tap_columns(const std::vector<int>& taps) const;

  // Per-column RMS and largest |value| of the tap rows (the drafter's taps, concatenated: [m * H]) over
  // every position of up to n_seqs training sequences (all of them, in order, when n_seqs covers the
  // split; else drawn with `seed`).
  TapColumnStats tap_column_stats(const std::vector<int>& tap_cols, int64_t n_seqs, uint64_t seed) const;
  // Per-column inverse RMS of the tap rows (the drafter's taps, concatenated: [m * H]) over every
  // position of up to n_seqs training sequences drawn with `seed` (the tap normalisation).
  std::vector<float> tap_inv_rms(const std::vector<int>& tap_cols, int64_t n_seqs, uint64_t seed) const;

  // A batch: n_seqs training sequences drawn at random, up to n_anchors anchors each (positions a in
  // [prompt_len, len - 2], drawn without replacement), γ slots per block. `from` = the sequences to
  // draw from (default: the training split; e.g. &heldout() for calibration).
  void make_batch(Rng& rng, int64_t n_seqs, int64_t n_anchors, int64_t gamma, const std::vector<int>& tap_cols,
                  TrainBatch* out, const std::vector<SeqRef>* from = nullptr, const BlockInputs& inputs = {}) const;

 private:
  std::vector<Shard> shards_;
  std::vector<SeqRef> train_, heldout_;
};

// Multiplies every context row of the batch by scale [m * H] column-wise (no-op when empty).
void scale_taps(const std::vector<float>& scale, TrainBatch* b);

}  // namespace dspark::train
