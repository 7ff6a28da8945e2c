// Two-model drafter: a second, smaller GGUF model with an identical vocabulary drafts greedily
// (temperature 0) or by sampling its own distribution (temperature > 0, q reported). It keeps its
// own KV cache and re-syncs it to the committed history before each draft.
#pragma once

#include <memory>

#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/drafter.h"
#include "tokenizer/tokenizer.h"

namespace dspark::speculative {

class ModelDrafter : public Drafter {
 public:
  // The model must outlive the drafter. Each draft samples with the request's settings
  // (DraftRequest::sampler).
  ModelDrafter(const model::Model& model, const model::SessionOptions& opt, ThreadPool* pool);
  std::string kind() const override { return "draft-model"; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<ModelDrafter>(model_, session_opt_, pool_); }
  Status begin(std::span<const int32_t> prompt, const TapRows& taps) override;
  Status draft(const DraftRequest& req, DraftResult* out) override;
  Status commit(std::span<const int32_t> committed, int64_t pos, const TapRows& taps) override;

 private:
  Status sync();  // make the KV hold exactly history_
  const model::Model& model_;
  model::SessionOptions session_opt_;
  model::Session session_;
  ThreadPool* pool_;
  sample::RowDist row_;
  std::vector<sample::TokenProb> list_;  // scratch: the draft distribution as a list
  std::vector<int32_t> history_;  // committed tokens [0, P)
  int64_t kv_valid_ = 0;          // leading KV positions known to match history_
};

// Refuses drafters whose vocabulary differs from the target's (size or any token text).
Status check_same_vocab(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

}  // namespace dspark::speculative
