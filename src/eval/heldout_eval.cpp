#include "eval/heldout_eval.h"

#include <chrono>

#include "core/f16.h"
#include "runtime/drafter_factory.h"

namespace dspark::eval {

using train::Dataset;
using train::HeldoutResult;
using train::SeqRef;
using train::Shard;

Result<HeldoutResult> heldout_eval(const std::string& drafter_dir, const model::Model& target, const Dataset& ds,
                                   int64_t max_seqs, int gamma, float threshold, bool record_confidence,
                                   ThreadPool* pool, int copy_bits) {
  auto d = runtime::open_dspark_probe(drafter_dir, target,
                                      runtime::DSparkProbe{.gamma = gamma, .threshold = threshold,
                                                           .report_confidence = record_confidence, .copy_bits = copy_bits},
                                      pool);
  if (!d) return d.status();
  speculative::DSparkDrafter& dr = *d.value();
  const int g = dr.gamma();
  auto cols = ds.tap_columns(dr.required_taps());
  if (!cols) return cols.status();
  const int64_t H = ds.layout().n_embd, w_in = ds.layout().row_width(), m = (int64_t)cols->size();
  HeldoutResult res;
  res.drafted_at.assign((size_t)g, 0);
  res.accepted_at.assign((size_t)g, 0);
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<float>> tap_buf((size_t)m);
  auto rows = [&](const Shard& sh, int32_t q, int64_t p0, int64_t n) {
    speculative::TapRows tr;
    tr.n_rows = n;
    tr.n_embd = H;
    const uint16_t* taps = sh.taps(q);
    for (int64_t t = 0; t < m; ++t) {
      tap_buf[(size_t)t].resize((size_t)(n * H));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < H; ++e)
          tap_buf[(size_t)t][(size_t)(i * H + e)] = bf16_to_fp32(taps[(p0 + i) * w_in + (*cols)[(size_t)t] * H + e]);
      tr.taps.push_back(tap_buf[(size_t)t].data());
    }
    return tr;
  };
  speculative::DraftResult out;
  for (const SeqRef& ref : ds.heldout()) {
    if (res.sequences >= max_seqs) break;
    const Shard& sh = ds.shard(ref.shard);
    if (sh.temperature(ref.seq) != 0.0f) continue;
    const int32_t* x = sh.tokens(ref.seq);
    const int64_t P = sh.prompt_len(ref.seq), L = sh.seq_len(ref.seq);
    ++res.sequences;
    auto t0 = Clock::now();
    DSPARK_RETURN_IF_ERROR(dr.begin(std::span<const int32_t>(x, (size_t)P), rows(sh, ref.seq, 0, P)));
    res.draft_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    int64_t pos = P;
    while (pos < L - 1) {
      const int max_n = (int)std::min<int64_t>(g, L - 1 - pos);
      t0 = Clock::now();
      DSPARK_RETURN_IF_ERROR(dr.draft({x[pos], pos, max_n, {}, nullptr}, &out));
      res.draft_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      int64_t k = 0;
      while (k < (int64_t)out.tokens.size() && out.tokens[(size_t)k] == x[pos + 1 + k]) ++k;
      for (size_t i = 0; i < out.tokens.size(); ++i) {
        ++res.drafted_at[i];
        if ((int64_t)i < k) ++res.accepted_at[i];
      }
      res.drafted += (int64_t)out.tokens.size();
      res.accepted += k;
      ++res.rounds;
      res.tokens += k + 1;
      if (record_confidence) {
        res.conf_logits.push_back(dr.last_conf_logits());
        res.accepted_len.push_back((int32_t)k);
      }
      if (pos + k + 1 >= L - 1) break;  // the next anchor would have no label
      t0 = Clock::now();
      DSPARK_RETURN_IF_ERROR(dr.commit(std::span<const int32_t>(x + pos, (size_t)(k + 1)), pos, rows(sh, ref.seq, pos, k + 1)));
      res.draft_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      pos += k + 1;
    }
  }
  if (res.sequences == 0) return Status::error("no held-out greedy sequence to evaluate on");
  return res;
}

}  // namespace dspark::eval
