// Per-request speculative decoding statistics (the governor's round counts: docs/SPECULATION.md,
// 'Telemetry'). Plain data; the loop fills it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "speculative/governor.h"

namespace dspark::speculative {

struct SpecStats {
  int64_t drafted = 0;          // sum of proposal lengths d
  int64_t accepted = 0;         // sum of accepted drafts
  int64_t rounds = 0;           // verify forwards after the prefill (empty proposals included)
  int64_t target_calls = 0;     // target forwards including the prefill
  int64_t generated = 0;        // tokens emitted
  std::vector<int64_t> drafted_by_pos;    // [gamma] rounds with d > i
  std::vector<int64_t> accepted_by_pos;   // [gamma] rounds with n_accept > i
  std::vector<int64_t> accept_hist;       // [gamma + 1] rounds with n_accept == k
  // Time attribution, milliseconds.
  double prefill_ms = 0, draft_ms = 0, verify_ms = 0, accept_ms = 0, commit_ms = 0;
  GovernorStats governor = {};  // rounds by the governor's reason (plain vs drafting)
  // Token trees (speculative/token_tree.h): rounds that verified one, the rows their branches added
  // beyond the chain, and rounds whose accepted path left the chain (what the branches bought).
  int64_t tree_rounds = 0, tree_rows = 0, tree_branch_taken = 0;

  int64_t rejected() const { return drafted - accepted; }
  double tau() const { return rounds ? (double)generated / rounds : 0; }  // generated tokens per round
  double acceptance_rate() const { return drafted ? (double)accepted / drafted : 0; }

  void resize(int gamma) {
    drafted_by_pos.assign(gamma, 0);
    accepted_by_pos.assign(gamma, 0);
    accept_hist.assign(gamma + 1, 0);
  }
  void add_round(int d, int n_accept) {
    if (d > (int)drafted_by_pos.size()) {  // a sure draft may run past gamma (Drafter::kMaxSureGamma)
      drafted_by_pos.resize((size_t)d, 0);
      accepted_by_pos.resize((size_t)d, 0);
      accept_hist.resize((size_t)d + 1, 0);
    }
    ++rounds;
    drafted += d;
    accepted += n_accept;
    for (int i = 0; i < d && i < (int)drafted_by_pos.size(); ++i) ++drafted_by_pos[i];
    for (int i = 0; i < n_accept && i < (int)accepted_by_pos.size(); ++i) ++accepted_by_pos[i];
    if (n_accept < (int)accept_hist.size()) ++accept_hist[n_accept];
  }
  void merge(const SpecStats& o) {
    drafted += o.drafted; accepted += o.accepted; rounds += o.rounds; target_calls += o.target_calls;
    generated += o.generated;
    if (drafted_by_pos.size() < o.drafted_by_pos.size()) {  // grow, keeping the counts so far
      drafted_by_pos.resize(o.drafted_by_pos.size(), 0);
      accepted_by_pos.resize(o.accepted_by_pos.size(), 0);
      accept_hist.resize(o.accept_hist.size(), 0);
    }
    for (size_t i = 0; i < o.drafted_by_pos.size(); ++i) drafted_by_pos[i] += o.drafted_by_pos[i];
    for (size_t i = 0; i < o.accepted_by_pos.size(); ++i) accepted_by_pos[i] += o.accepted_by_pos[i];
    for (size_t i = 0; i < o.accept_hist.size(); ++i) accept_hist[i] += o.accept_hist[i];
    prefill_ms += o.prefill_ms; draft_ms += o.draft_ms; verify_ms += o.verify_ms;
    accept_ms += o.accept_ms; commit_ms += o.commit_ms;
    tree_rounds += o.tree_rounds; tree_rows += o.tree_rows; tree_branch_taken += o.tree_branch_taken;
    governor.merge(o.governor);
  }

  nlohmann::json to_json() const {
    return {{"drafted", drafted}, {"accepted", accepted}, {"rejected", rejected()}, {"rounds", rounds},
            {"target_calls", target_calls}, {"generated", generated}, {"tau", tau()},
            {"acceptance_rate", acceptance_rate()}, {"drafted_by_pos", drafted_by_pos},
            {"accepted_by_pos", accepted_by_pos}, {"accept_length_hist", accept_hist},
            {"time_ms", {{"prefill", prefill_ms}, {"draft", draft_ms}, {"verify", verify_ms},
                         {"accept", accept_ms}, {"commit", commit_ms}}},
            {"governor", governor.to_json()},
            {"tree", {{"rounds", tree_rounds}, {"rows", tree_rows}, {"branch_taken", tree_branch_taken}}}};
  }
};

}  // namespace dspark::speculative
