// A deliberately bad drafter for tests: proposes uniformly random ids in [first, first + count);
// at temperature > 0 it reports that uniform q.
#pragma once

#include "speculative/drafter.h"

namespace dspark::testing {

class RandomDrafter : public speculative::Drafter {
 public:
  RandomDrafter(int32_t first, int32_t count, uint64_t seed) : first_(first), count_(count), rng_(seed) {}
  std::string kind() const override { return "random"; }
  std::unique_ptr<speculative::Drafter> fork() const override {
    return std::make_unique<RandomDrafter>(first_, count_, rng_.next());
  }
  Status begin(std::span<const int32_t>, const speculative::TapRows&) override { return Status::ok(); }
  Status draft(const speculative::DraftRequest& req, speculative::DraftResult* out) override {
    out->clear();
    for (int i = 0; i < req.max_n; ++i) {
      out->tokens.push_back(first_ + (int32_t)(rng_.next() % (uint64_t)count_));
      if (req.sampler.temperature > 0) {
        speculative::SparseDist q;
        for (int32_t t = 0; t < count_; ++t) q.emplace_back(first_ + t, 1.0f / count_);
        out->q.push_back(std::move(q));
      }
    }
    return Status::ok();
  }
  Status commit(std::span<const int32_t>, int64_t, const speculative::TapRows&) override { return Status::ok(); }

 private:
  int32_t first_, count_;
  mutable Rng rng_;  // fork() seeds the new state from it
};

}  // namespace dspark::testing
