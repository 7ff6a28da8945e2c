#include "speculative/drafter_model.h"

#include <algorithm>

namespace dspark::speculative {

ModelDrafter::ModelDrafter(const model::Model& model, const model::SessionOptions& opt, ThreadPool* pool)
    : model_(model), session_opt_(opt), session_(model, opt, pool), pool_(pool) {}

Status ModelDrafter::begin(std::span<const int32_t> prompt, const TapRows&) {
  history_.assign(prompt.begin(), prompt.end());
  session_.kv().clear();
  kv_valid_ = 0;
  return sync();
}

Status ModelDrafter::sync() {
  auto& kv = session_.kv();
  const int64_t keep = std::min<int64_t>(kv_valid_, (int64_t)history_.size());
  kv.trim(kv.length() - keep);
  if (keep < (int64_t)history_.size())
    DSPARK_RETURN_IF_ERROR(model_.forward(
        session_, std::span<const int32_t>(history_.data() + keep, history_.size() - keep),
        {model::LogitsMode::kNone, {}}));
  kv_valid_ = (int64_t)history_.size();
  return Status::ok();
}

Status ModelDrafter::draft(const DraftRequest& req, DraftResult* out) {
  out->clear();
  if (req.max_n <= 0) return Status::ok();
  DSPARK_RETURN_IF_ERROR(sync());
  const int64_t n_vocab = model_.config().n_vocab;
  const int64_t room = session_.kv().n_ctx() - session_.kv().length();
  const int n = (int)std::min<int64_t>(req.max_n, room);
  int32_t tok = req.pending;
  for (int i = 0; i < n; ++i) {
    DSPARK_RETURN_IF_ERROR(model_.forward(session_, std::span<const int32_t>(&tok, 1), {model::LogitsMode::kLast, {}}));
    if (req.sampler.temperature > 0) {
      // q is a full list here (V entries at temperature only): a two-model drafter's cost.
      row_.build(req.sampler, session_.logits(), n_vocab, pool_);
      const sample::RowDist& row = row_;
      row.to_list(&list_);
      SparseDist q;
      q.reserve(list_.size());
      for (const auto& tp : list_) q.emplace_back(tp.id, tp.p);
      tok = row.draw(*req.rng);
      out->q.push_back(std::move(q));
    } else {
      tok = (int32_t)std::distance(session_.logits(),
                                   std::max_element(session_.logits(), session_.logits() + n_vocab));
    }
    out->tokens.push_back(tok);
  }
  // The KV now holds pending + drafts[0..n-1) after history_; they are valid only once committed.
  return Status::ok();
}

Status ModelDrafter::commit(std::span<const int32_t> committed, int64_t pos, const TapRows&) {
  if (pos != (int64_t)history_.size()) return Status::error("draft-model drafter: commit at an unexpected position");
  // KV rows beyond history_ hold pending and the drafts in order; the committed ones are valid.
  const int64_t cached_beyond = session_.kv().length() - (int64_t)history_.size();
  history_.insert(history_.end(), committed.begin(), committed.end());
  kv_valid_ = (int64_t)history_.size() - (int64_t)committed.size() +
              std::min<int64_t>(cached_beyond, (int64_t)committed.size());
  return Status::ok();
}

Status check_same_vocab(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab())
    return Status::error("draft model vocabulary has " + std::to_string(draft.n_vocab()) + " tokens, target has " +
                         std::to_string(target.n_vocab()));
  for (int32_t id = 0; id < target.n_vocab(); ++id)
    if (target.token_text(id) != draft.token_text(id))
      return Status::error("draft model vocabulary differs from the target's at token " + std::to_string(id) +
                           " ('" + draft.token_text(id) + "' vs '" + target.token_text(id) + "')");
  if (target.bos() != draft.bos() || target.eos() != draft.eos())
    return Status::error("draft model BOS/EOS ids differ from the target's");
  return Status::ok();
}

}  // namespace dspark::speculative
