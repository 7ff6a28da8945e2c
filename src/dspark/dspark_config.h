// config.json of a DeepSpec `Gemma4DSparkModel` drafter (docs/DSPARK-CHECKPOINT.md §2).
//
// The drafter config is a deep copy of the target's text_config with DSpark overrides, so it also
// carries inherited sliding-window fields (head_dim, num_key_value_heads, sliding_window, ...):
// those are ignored. Attention dims come from global_head_dim / num_global_key_value_heads.
// Every error names the file and the field:
//   "drafter/config.json: field 'markov_head_type' = 'lstm' is not supported".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::net {

enum class MarkovHeadType { kVanilla, kGated, kRnn };
const char* markov_head_type_name(MarkovHeadType t);

struct DSparkConfig {
  int64_t hidden_size = 0;        // H
  int64_t n_heads = 0;            // nH (num_attention_heads)
  int64_t head_dim = 0;           // hd (global_head_dim)
  int64_t n_kv_heads = 0;         // nKV (num_global_key_value_heads)
  int64_t intermediate_size = 0;  // I
  int64_t vocab_size = 0;         // V (always the target vocabulary)
  int64_t n_layers = 0;           // drafter layers (num_hidden_layers)
  int64_t n_target_layers = 0;    // target decoder layers (pairing check)
  float rms_eps = 1e-6f;
  float softcap = 0.0f;           // final_logit_softcapping; 0 = none (null, absent or 0)
  int64_t block_size = 0;         // γ: block inputs [x0, MASK x (γ-1)] -> γ logits
  int32_t mask_token_id = 0;
  std::vector<int> target_layer_ids;  // strictly increasing, in {-1} U [0, n_target_layers - 2]
  int64_t markov_rank = 0;            // r; 0 = no Markov head
  MarkovHeadType markov_type = MarkovHeadType::kVanilla;
  bool confidence = false;             // enable_confidence_head
  bool confidence_with_markov = false; // input [h ; W1[prev]] (forced false when r = 0)
  double rope_theta = 1e6;
  double partial_rotary_factor = 1.0;
  int64_t n_rot = 0;                   // live RoPE pairs: int(factor * hd // 2)
  int64_t draft_vocab_size = 0;        // V_d: draft_vocab_size if given, else V (checked against d2t at load)
  bool has_draft_vocab_size = false;
  std::vector<float> sts_temperatures;  // dspark_sts_temperatures [<= γ]; empty = uncalibrated (T = 1)
  // dspark_copy_head {"max_ngram", "min_ngram"}: the drafter is meant to run with its copy head
  // (dspark/copy_head.h); absent = off.
  bool copy_head = false;
  int copy_max_ngram = 3, copy_min_ngram = 1;
  std::vector<double> copy_prior_acceptance;  // [max_ngram + 1] (n = 0: the drafter's slots); empty = none
  std::vector<double> copy_prior_acceptance_sampled;  // the same for temperature > 0; empty = copy_prior_acceptance
  double copy_prior_weight = 20.0;
  // dspark_lookup_input {"max_ngram", "min_ngram"} (extension E6): the block's MASK inputs are
  // replaced by prompt-lookup guesses. Slot k >= 1 gets the token that lookup chains from the anchor
  // for position a + k (dspark/copy_head.h lookup_chain), MASK from the first slot without a match.
  // The network sees what prompt lookup knows and learns when it is right. 0 = off.
  int lookup_max_ngram = 0, lookup_min_ngram = 1;

  int64_t n_taps() const { return (int64_t)target_layer_ids.size(); }
};

// Parses config.json text; `file` names the source in errors ("drafter/config.json").
Result<DSparkConfig> parse_dspark_config(const std::string& text, const std::string& file);
// Reads and parses a config.json file (errors: "<path>: cannot open").
Result<DSparkConfig> read_dspark_config(const std::string& path);

}  // namespace dspark::net
