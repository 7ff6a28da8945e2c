// Batched regeneration: the target answers training prompts with several sequences decoded in one
// forward (Model::forward_multi: weights read once per step), recording for every position
// the tapped residual rows and the target's temperature-1 next-token distribution (top-k).
// The taps come from the same forward the server runs, so training sees exactly serving's hiddens.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "train/shard.h"

namespace dspark::train {

struct RegenJob {
  int64_t prompt_index = 0;        // identifies the prompt (line index)
  std::vector<int32_t> prompt;     // chat-templated token ids, BOS first
  float temperature = 0;           // 0 = greedy
  uint64_t seed = 0;               // sampling seed (temperature > 0)
};

struct RegenConfig {
  std::vector<int> tap_ids;        // target layers to record (model::kTapEmbedding allowed)
  int32_t top_k = 32;              // distribution entries kept per position
  int32_t max_new = 256;           // response length limit (stop tokens end earlier)
  int32_t batch = 32;              // sequences decoded together
};

struct RegenCounters {
  int64_t sequences = 0;
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  double prefill_ms = 0;     // prompt forwards
  double step_ms = 0;        // batched decode forwards
  double post_ms = 0;        // top-k distributions, sampling, tap conversion
};

// Runs every job and hands each finished sequence to on_done (in completion order, which is not
// job order). on_done may return an error to stop the run. on_step is called after every decode
// step with the running counters (progress).
Status regenerate(const model::Model& model, const tokenizer::Tokenizer& tok, const RegenConfig& cfg,
                  std::span<const RegenJob> jobs, ThreadPool* pool,
                  const std::function<Status(RegenSeq&&)>& on_done,
                  const std::function<void(const RegenCounters&)>& on_step);

// Top-k of softmax(logits) [n_vocab] in descending probability (ties: lower id first); the
// normalizer covers the whole vocabulary. exps/cand are scratch.
void softmax_top_k(const float* logits, int64_t n_vocab, int32_t k, int32_t* ids, float* probs,
                   std::vector<float>& exps, std::vector<int32_t>& cand);

}  // namespace dspark::train
