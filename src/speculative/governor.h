// The draft-length governor: before every round of a speculative generation it chooses how many
// tokens to draft, 0 meaning a plain decoding step, so that committed tokens per millisecond are
// as high as this machine, model, drafter and text allow. Every drafter kind goes through it (the
// stepper asks it once per round), so a drafter that does not pay here is switched off instead of
// slowing generation down.
//
// What it measures (per request, as rounds happen):
//   plain cost   c0     = ms of a round that verifies the pending token alone (verify + accept +
//                         commit; from plain rounds and from drafting rounds that proposed nothing,
//                         whose draft time is left out)
//   verify cost  V(n)   = ms of a target forward over n tokens (the window), by n
//   per slot i, from every drafting round whose gamma reached it:
//       a_i = P(slot i drafted and accepted | slots 1..i-1 were)
//       b_i = P(slot i drafted | slot i-1 was)          (the drafter may propose fewer than gamma)
//   (what a round cut to any gamma L would have given: exact for the accepted prefix at T 0); a slot
//   with few samples leans on the slot before it.
// A gamma L is then worth
//       E[tokens_L] = 1 + Σ_{i<=L} Π_{j<=i} a_j,   E[cost_L] = draft ms + E[V(1 + min(d, L))] + rest ms
// and the governor picks argmax over {1 / c0} ∪ {E[tokens_L] / E[cost_L]} (exponential moving
// averages, so a request whose text changes is followed), with hysteresis and a preference for the
// longest gamma nearly as good as the best.
// Exploration is cheap and bounded. While plain wins, a probe drafts after 1, 2, 4, .. max_backoff
// plain rounds (up to max_backoff_far while plain leads the full-length draft's rate by far_margin;
// after 1 again when a probe beat plain decoding), one token long at first and twice as long after
// each probe whose every token was accepted. While a short gamma wins, a full-length draft refreshes
// the longer gammas every refresh_rounds rounds. A plain round refreshes c0 when none was seen for
// plain_refresh_rounds rounds and drafting is not far ahead.
//
// Priors: a verify-cost table (measured at start-up or given) fills V(n) for window sizes not yet
// seen, scaled by how the measured windows compare with it. Sampled requests with a table decide
// from constants only (`deterministic`: V from the table, the drafter's cost a constant), so a
// seeded request drafts, and therefore samples, the same way every time.
//
// By class (GovernorConfig::by_class; a drafter with draft classes, Drafter::class_priors): the
// slot estimates above are one mixture of very different drafts. A prompt-lookup copy of a 10-token
// match is taken ~95 % of the time, a suffix-index guess whose context continues several ways ~15 %.
// Such a drafter drafts first, up to the room the budget allows, and names the draft's class c; the
// governor keeps per class and slot
//       a_c,i = (s + W p_c) / (n + W)     n, s: drafted and accepted counts (decayed, so the text
//                                         can move them), p_c: the drafter's prior, W = kClassPriorWeight
// and the round keeps the prefix L of the d tokens drafted (0 = a plain step) that maximises
//       (1 + Σ_{i<=L} Π_{j<=i} a_c,j) / (V(1 + L) + rest ms)   against 1 / c0
// (the draft's own cost is spent either way; deciding from constants, V is the table and the rest 0).
// Only the rate-based decisions (kDraft, kPlain) are re-decided this way; warm-up rounds and probes
// keep theirs, and their outcomes teach the classes too. A sampled request's draft is a function of
// its context, its cut one of the context and earlier rounds' outcomes, so neither looks at what the
// target samples in this round: the rejection-sampling acceptance stays exact.
//
// Batched verify (the server's forward_multi over several slots): the caller charges each slot
// its share of a draft-free forward plus what its draft rows add at the margin
// (serve/batch_cost.h, through SpecStepper::finish_round), so plain steps and drafts are weighed
// at the batch's prices.
// Thread safety: one governor per generation (it lives in the SpecStepper).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace dspark::speculative {

// Why a round drafted what it did.
enum class GovernorReason : uint8_t {
  kOff,         // the governor is off: the drafter's own gamma
  kLimit,       // no room to draft (token budget or context end)
  kWarmup,      // first drafting rounds, at full length
  kDraft,       // drafting at the best gamma
  kPlain,       // plain decoding is the best
  kProbeDraft,  // exploration: a full-length draft
  kProbePlain,  // exploration: a plain round to refresh its cost
  kBatchPlain,  // the server's batch gate held every slot of a batched round to a plain step
  kSure,        // a plain decision overridden by a draft the drafter is sure of (a long copy, Drafter::sure_drafts)
  kClassDraft,  // by class: the draft's class says this prefix of it pays best
  kClassPlain,  // by class: the draft's class says a plain step pays best (the draft is dropped)
  kCount
};
const char* governor_reason_name(GovernorReason r);

struct GovernorConfig {
  bool enabled = false;
  std::vector<double> verify_ms;  // [n] one target forward over n tokens, index 0 unused; may be empty
  double draft_ms = 0;            // the drafter's cost per drafting round when deciding from constants
  bool deterministic = false;     // decide from verify_ms + draft_ms and token counts only (needs verify_ms)
  int warmup_rounds = 2;          // drafting rounds at full length before the first comparison
  int max_backoff = 16;           // at most this many plain rounds between two draft probes, ...
  int max_backoff_far = 64;       // ... or this many while plain leads full-length drafting by far_margin
  double far_margin = 0.3;
  int refresh_rounds = 16;        // a full-length probe this often while a shorter gamma wins
  int plain_refresh_rounds = 32;  // a plain probe when c0 was last seen this many rounds ago ...
  double plain_refresh_band = 0.3;  // ... and the best draft rate is within this of the plain rate
  double alpha = 0.2;             // moving-average weight of a new cost (1/n while n < 1/alpha)
  double alpha_accept = 0.1;      // the same for the per-slot acceptance (noisier: one bit a round)
  double switch_margin = 0.05;    // drafting -> plain only when plain is estimated this much faster
  double enter_margin = 0.05;     // plain -> drafting only when drafting is estimated this much faster
  double gamma_margin = 0.03;     // the longest gamma within this of the best gamma's rate is taken
  // Rounds of a drafter with draft classes keep the prefix of their draft that pays best at
  // the class's own acceptance (above, "By class"); false: one estimate for every draft
  // (`draft-governor=pooled`, the ablation arm).
  bool by_class = true;
  // A plain decision (the governor's or the server's batch gate's) still takes a draft the drafter is
  // sure of (Drafter::sure_drafts, SpecStepper); false: `draft-sure=off`, the ablation arm.
  bool sure_drafts = true;
};

inline constexpr double kClassPriorWeight = 4;  // W: a class prior counts as this many drafted tokens
inline constexpr double kClassDecay = 1.0 - 1.0 / 64;  // per observation of a class slot: ~64 remembered

// One finished round, as the stepper saw it.
struct RoundObservation {
  int gamma = 0;       // the decision's draft length (0: plain)
  int drafted = 0;     // tokens proposed (<= gamma)
  int accepted = 0;    // of them accepted
  int window = 0;      // rows the verify forward held when more than drafted + 1 (a token tree), else 0
  double draft_ms = 0, verify_ms = 0, rest_ms = 0;  // drafter call; target forward (its share); accept + commit
  int cls = -1;        // the draft's class (DraftResult::draft_class) when the governor is by class, else -1
};

// Rounds by reason; plain + drafting = all rounds of the generation(s).
struct GovernorStats {
  std::array<int64_t, (size_t)GovernorReason::kCount> rounds{};
  int64_t plain_rounds = 0;     // rounds that drafted nothing by decision (gamma 0)
  int64_t drafting_rounds = 0;  // rounds with gamma > 0
  void merge(const GovernorStats& o) {
    for (size_t i = 0; i < rounds.size(); ++i) rounds[i] += o.rounds[i];
    plain_rounds += o.plain_rounds;
    drafting_rounds += o.drafting_rounds;
  }
  nlohmann::json to_json() const;
};

class Governor {
 public:
  struct Decision {
    int gamma = 0;  // draft at most this many tokens (0: plain step)
    GovernorReason reason = GovernorReason::kOff;
  };

  Governor() = default;
  Governor(const GovernorConfig& cfg, int gamma);

  // A new generation on a governor that served earlier ones (a server slot): what it learned of
  // this machine and drafter (costs, acceptance, exploration backoff) carries over, its counters
  // start at 0. A different config or gamma starts it afresh.
  void begin_request(const GovernorConfig& cfg, int gamma);

  // The next round's draft length (its gamma, 0: plain); `max_n` is what the budget allows (the
  // request's gamma is enforced here).
  Decision decide(int max_n);
  // A plain round imposed from outside (the server's batch gate): counted under `why`, and its
  // observation refreshes the plain cost like any plain round.
  Decision hold(GovernorReason why);
  // The round just decided (decide() or hold()) drafts `gamma` tokens the drafter is sure of instead, more
  // than it decided (plain, or a shorter gamma): recounted under kSure (a drafting round). Its outcome
  // is not observe()d, so such rounds do not colour the estimates of ordinary drafting. A gamma not
  // above the decided one changes nothing.
  Decision sure(const Decision& decided, int gamma);
  // By class: the drafter's priors (Drafter::class_priors; empty: no classes). The same priors on a
  // governor that served earlier requests keep what it learned of each class.
  void use_classes(const std::vector<double>& priors);
  bool by_class() const { return cfg_.enabled && cfg_.by_class && !priors_.empty(); }
  // The round decided last drafted `drafted` tokens of class `cls`, asked for up to the room rather
  // than its gamma because by_class(): the prefix of them that pays best (gamma 0: a plain step),
  // recounted under kClassDraft / kClassPlain. A decision other than kDraft / kPlain (warm-up, probes,
  // limits), or an unknown class, is returned as it was.
  Decision cut(const Decision& decided, int cls, int drafted);
  // The round decided last has finished.
  void observe(const RoundObservation& o);

  // Current estimates, tokens per ms (0: not known yet). L in 1..gamma.
  double plain_rate() const;
  double draft_rate(int L) const;
  // The gamma with the highest estimated rate among those known, among 0..max_n.
  int best(int max_n) const;
  // By class: tokens per ms of a class-`cls` draft cut to L tokens (its drafting cost left out).
  double class_rate(int cls, int L) const;
  const GovernorStats& stats() const { return stats_; }
  nlohmann::json estimates() const;  // c0, V(n), rates (tests and debugging)

 private:
  struct Ema {
    double v = 0;
    int64_t n = 0;
    void add(double x, double alpha);
  };
  double verify_cost(int n) const;  // V(n): measured, else prior x scale, else nearest measured
  double table_cost(int n) const;   // the prior table, extrapolated linearly past its end
  double plain_cost() const;        // c0 (0: unknown)
  Decision recount(const Decision& from, const Decision& to);  // the round counted under `to` instead

  GovernorConfig cfg_;
  int gamma_ = 0;
  GovernorStats stats_;
  Ema plain_, rest_, scale_;
  std::vector<Ema> v_;             // [gamma + 2] measured V(n)
  Ema draft_;                      // drafter ms per drafting round
  std::vector<Ema> acc_;           // [gamma + 1] slot i drafted and accepted | slots < i were (index 0 unused)
  std::vector<Ema> len_;           // [gamma + 1] slot i drafted | slot i - 1 was
  struct Counts {
    double n = 0, s = 0;  // decayed: drafted, and of them accepted
  };
  std::vector<double> priors_;               // [classes] p_c
  std::vector<std::vector<Counts>> cls_acc_;  // [classes][gamma + 1] slot i of a class-c draft, given slots < i accepted
  int64_t round_ = 0, drafting_obs_ = 0, last_plain_obs_ = 0;
  int plain_run_ = 0, backoff_ = 1, since_full_ = 0, probe_len_ = 1;
  bool probe_from_plain_ = false;  // it was a probe while plain decoding wins
  bool drafting_mode_ = true;      // the last choice (not a probe) was to draft
};

}  // namespace dspark::speculative
