#include "train/sensitivity.h"

#include <algorithm>
#include <cmath>

namespace dspark::train {

namespace {

// Row-wise log-softmax of logits [R, V] into out (same shape), in double accumulation.
void log_softmax_rows(const std::vector<float>& logits, int64_t V, std::vector<float>& out) {
  out.resize(logits.size());
  const int64_t R = (int64_t)logits.size() / V;
  for (int64_t r = 0; r < R; ++r) {
    const float* x = logits.data() + r * V;
    const float mx = *std::max_element(x, x + V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp((double)(x[v] - mx));
    const float lse = mx + (float)std::log(s);
    for (int64_t v = 0; v < V; ++v) out[(size_t)(r * V + v)] = x[v] - lse;
  }
}

}  // namespace

std::vector<SensitivityUnit> sensitivity_units(DraftParams& p, FrozenTables& frozen) {
  std::vector<SensitivityUnit> u;
  auto add = [&](Param& q) {
    if (q.shape.size() == 2) u.push_back({q.name, q.shape[0], q.shape[1], &q.w});
  };
  for (DraftLayerParams& L : p.layers)
    for (Param* q : {&L.wq, &L.wk, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) add(*q);
  add(p.fc);
  if (p.cfg.markov_rank > 0) {
    add(p.markov_w1);
    add(p.markov_w2);
  }
  const int64_t H = p.cfg.hidden_size;
  u.push_back({"lm_head.weight", (int64_t)frozen.lm_head.size() / H, H, &frozen.lm_head});
  return u;
}

Result<SensitivityResult> measure_sensitivity(DraftParams& p, FrozenTables& frozen, const TrainBatch& batch,
                                              const std::vector<quant::Candidate>& candidates, const FakeQuantFn& fq,
                                              const std::function<void(int64_t, int64_t)>& progress) {
  if (batch.blocks.empty()) return Status::error("sensitivity: the calibration batch has no blocks");
  const int64_t g = p.cfg.block_size, vd = (int64_t)p.d2t.size();
  DraftNet net(p, frozen);
  net.run(batch, false);
  std::vector<float> ref_lp, cur_lp;
  log_softmax_rows(net.logits(), vd, ref_lp);
  const int64_t R = (int64_t)batch.blocks.size() * g;
  // Valid slots and their weights; slot-0 reference argmax.
  std::vector<double> wt((size_t)R, 0.0);
  double wsum = 0;
  SensitivityResult res;
  res.blocks = (int64_t)batch.blocks.size();
  for (size_t bi = 0; bi < batch.blocks.size(); ++bi)
    for (int64_t k = 0; k < g; ++k)
      if (batch.blocks[bi].label[(size_t)k] >= 0) {
        wt[bi * (size_t)g + (size_t)k] = std::exp(-(double)k / 4.0);
        wsum += wt[bi * (size_t)g + (size_t)k];
        ++res.slots;
      }
  if (wsum <= 0) return Status::error("sensitivity: the calibration batch has no valid slots");
  auto argmax_row = [&](const std::vector<float>& lp, int64_t r) {
    const float* x = lp.data() + r * vd;
    return (int64_t)(std::max_element(x, x + vd) - x);
  };
  std::vector<int64_t> ref_top((size_t)res.blocks);
  for (int64_t b = 0; b < res.blocks; ++b) ref_top[(size_t)b] = argmax_row(ref_lp, b * g);

  std::vector<SensitivityUnit> units = sensitivity_units(p, frozen);
  const int64_t total = (int64_t)(units.size() * candidates.size());
  int64_t done = 0;
  std::vector<float> saved;
  for (const SensitivityUnit& u : units) {
    quant::TensorSensitivity ts{u.name, u.rows * u.cols, {}};
    std::vector<double> agree;
    ts.candidates.push_back({"none", 16, 0, 16.0, 0.0});
    agree.push_back(1.0);
    for (const quant::Candidate& c0 : candidates) {
      quant::Candidate c = c0;
      saved = *u.w;
      if (Status st = fq(u.name, c, u.w->data(), u.rows, u.cols); !st) {
        *u.w = saved;
        return Status::error("sensitivity: " + u.name + ": " + st.message());
      }
      net.run(batch, false);
      log_softmax_rows(net.logits(), vd, cur_lp);
      double kl = 0;
      for (int64_t r = 0; r < R; ++r) {
        if (wt[(size_t)r] == 0) continue;
        const float* a = ref_lp.data() + r * vd;
        const float* q = cur_lp.data() + r * vd;
        double s = 0;
        for (int64_t v = 0; v < vd; ++v) s += std::exp((double)a[v]) * ((double)a[v] - (double)q[v]);
        kl += wt[(size_t)r] * s;
      }
      c.kl = std::isfinite(kl) ? std::max(kl / wsum, 0.0) : std::nan("");
      int64_t same = 0;
      for (int64_t b = 0; b < res.blocks; ++b) same += argmax_row(cur_lp, b * g) == ref_top[(size_t)b];
      agree.push_back((double)same / (double)res.blocks);
      ts.candidates.push_back(c);
      *u.w = saved;
      if (progress) progress(++done, total);
    }
    res.table.push_back(std::move(ts));
    res.top1_agree.push_back(std::move(agree));
  }
  return res;
}

}  // namespace dspark::train
