// DraftNet: the loss head (LM head, Markov bias, confidence, CE + L1 + BCE) and every backward pass.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "train/draft_net.h"
#include "train/draft_ops.h"
#include "train/gemm.h"

namespace dspark::train {

using namespace ops;

LossTerms DraftNet::loss_head(const TrainBatch& b, bool backward) {
  const net::DSparkConfig& c = p_.cfg;
  const int64_t H = c.hidden_size, g = c.block_size, r = c.markov_rank, vd = (int64_t)p_.d2t.size();
  const int64_t nb = (int64_t)b.blocks.size(), R = nb * g;
  logits_.resize((size_t)(R * vd));
  gemm(false, true, R, vd, H, 1.0f, hN_.data(), H, t_.lm_head.data(), H, 0.0f, logits_.data(), vd);
  e_.assign((size_t)(R * std::max<int64_t>(r, 1)), 0.0f);
  if (r > 0) {
    for (int64_t row = 0; row < R; ++row) {
      const int32_t prev = b.blocks[row / g].prev[row % g];
      std::memcpy(&e_[row * r], &p_.markov_w1.w[p_.w1_row(prev) * r], (size_t)r * 4);
    }
    gemm(false, true, R, vd, r, 1.0f, e_.data(), r, p_.markov_w2.w.data(), r, 1.0f, logits_.data(), vd);
  }
  z_.resize((size_t)R);
  cstar_.assign((size_t)R, 0.0f);
  for (int64_t row = 0; row < R; ++row) {
    double z = p_.conf_b.w[0];
    for (int64_t i = 0; i < H; ++i) z += (double)p_.conf_w.w[i] * hN_[row * H + i];
    for (int64_t i = 0; i < r; ++i) z += (double)p_.conf_w.w[H + i] * e_[row * r + i];
    z_[row] = (float)z;
  }

  LossTerms lt;
  lt.accept_sum.assign((size_t)g, 0.0);
  lt.top1_sum.assign((size_t)g, 0.0);
  lt.count.assign((size_t)g, 0);
  double wsum = 0, wce = 0;
  for (const TrainBlock& blk : b.blocks)
    for (int64_t k = 0; k < g; ++k)
      if (blk.label[k] >= 0) {
        const double w = std::exp(-(double)k / 4.0) * (blk.weight.empty() ? 1.0 : (double)blk.weight[k]);
        wsum += w;
        if (p_.t2d[(size_t)blk.label[k]] >= 0) wce += w;
      }
  if (wsum == 0) return lt;
  std::vector<float> ds((size_t)(backward ? R * vd : vd));
  std::vector<float> dz((size_t)R, 0.0f);
  for (int64_t row = 0; row < R; ++row) {
    const TrainBlock& blk = b.blocks[row / g];
    const int64_t k = row % g;
    float* p = &ds[backward ? row * vd : 0];
    if (blk.label[k] < 0) {
      if (backward) std::fill(p, p + vd, 0.0f);
      continue;
    }
    const float* s = &logits_[row * vd];
    const int64_t best = kernels::argmax(s, vd);
    const double z_sum = kernels::exp_shift_sum(s, vd, s[best], 1.0f, p);
    const float inv = (float)(1.0 / z_sum);
    for (int64_t v = 0; v < vd; ++v) p[v] *= inv;
    const double w = std::exp(-(double)k / 4.0) * (blk.weight.empty() ? 1.0 : (double)blk.weight[k]);
    const int32_t lbl = p_.t2d[(size_t)blk.label[k]];
    double ce = 0;
    // log-sum-exp form: exact where p[lbl] underflows (a clamp there would make the loss flat while
    // its gradient is not; sharp draft distributions reach that).
    if (lbl >= 0) ce = std::log(z_sum) - ((double)s[lbl] - (double)s[best]);
    // Target top-k inside the draft vocabulary.
    double sum_tp = 0, l1_t = 0, overlap = 0, sgn_p = 0;
    for (int32_t j = 0; j < b.top_k; ++j) {
      const int32_t d = p_.t2d[(size_t)blk.dist_ids[k][j]];
      const float t = blk.dist_probs[k][j];
      if (d < 0 || t <= 0) continue;
      sum_tp += p[d];
      l1_t += std::fabs(p[d] - t);
      overlap += std::min(p[d], t);
      sgn_p += (p[d] > t ? 1.0 : p[d] < t ? -1.0 : 0.0) * p[d];
    }
    const double l1 = (1.0 - sum_tp) + l1_t;
    const double S = (1.0 - sum_tp) + sgn_p;  // Σ_v sign(p_v - t_v) p_v
    const double cs = fixed_cstar_ ? (double)(*fixed_cstar_)[row] : std::clamp(overlap, 0.0, 1.0);
    cstar_[row] = (float)cs;
    const double zz = z_[row];
    const double bce = std::max(zz, 0.0) - zz * cs + std::log1p(std::exp(-std::fabs(zz)));
    lt.ce += lbl >= 0 ? w * ce / std::max(wce, 1e-30) : 0.0;
    lt.l1 += w * l1 / wsum;
    lt.bce += w * bce / wsum;
    lt.accept_sum[k] += cs;
    lt.top1_sum[k] += (lbl >= 0 && best == lbl) ? 1.0 : 0.0;
    lt.count[k] += 1;
    lt.slots += 1;
    if (!backward) continue;
    // d/ds_v: CE a_ce (p_v - [v = lbl]); L1 a_l1 p_v (sign_v - S), sign_v = +1 outside the target set.
    const float a_ce = lbl >= 0 && wce > 0 ? (float)(lw_.ce * w / wce) : 0.0f;
    const float a_l1 = (float)(lw_.l1 * w / wsum);
    const float base = a_l1 * (float)(1.0 - S) + a_ce;
    std::vector<float> pt;  // p at the target ids before overwrite
    for (int32_t j = 0; j < b.top_k; ++j) {
      const int32_t d = p_.t2d[(size_t)blk.dist_ids[k][j]];
      const float t = blk.dist_probs[k][j];
      if (d < 0 || t <= 0) continue;
      const float pd = p[d];
      const float sg = pd > t ? 1.0f : pd < t ? -1.0f : 0.0f;
      // p[d] is rewritten below; stash the correction as a delta relative to the generic formula.
      pt.push_back((float)d);
      pt.push_back(a_l1 * pd * (sg - 1.0f));
    }
    for (int64_t v = 0; v < vd; ++v) p[v] *= base;
    for (size_t q = 0; q < pt.size(); q += 2) p[(int64_t)pt[q]] += pt[q + 1];
    if (lbl >= 0) p[lbl] -= a_ce;
    dz[row] = (float)(lw_.bce * w / wsum * (1.0 / (1.0 + std::exp(-zz)) - cs));
  }
  lt.loss = lw_.ce * lt.ce + lw_.l1 * lt.l1 + lw_.bce * lt.bce;
  if (!backward) return lt;

  // Back through the LM head (frozen), the Markov bias and the confidence head.
  dhN_.assign((size_t)(R * H), 0.0f);
  gemm(false, false, R, H, vd, 1.0f, ds.data(), vd, t_.lm_head.data(), H, 0.0f, dhN_.data(), H);
  de_.assign((size_t)(R * std::max<int64_t>(r, 1)), 0.0f);
  if (r > 0) {
    gemm(true, false, vd, r, R, 1.0f, ds.data(), vd, e_.data(), r, 1.0f, p_.markov_w2.g.data(), r);
    gemm(false, false, R, r, vd, 1.0f, ds.data(), vd, p_.markov_w2.w.data(), r, 0.0f, de_.data(), r);
  }
  for (int64_t row = 0; row < R; ++row) {
    const float d = dz[row];
    if (d == 0) continue;
    for (int64_t i = 0; i < H; ++i) {
      p_.conf_w.g[i] += d * hN_[row * H + i];
      dhN_[row * H + i] += d * p_.conf_w.w[i];
    }
    for (int64_t i = 0; i < r; ++i) {
      p_.conf_w.g[H + i] += d * e_[row * r + i];
      de_[row * r + i] += d * p_.conf_w.w[H + i];
    }
    p_.conf_b.g[0] += d;
  }
  if (r > 0)
    for (int64_t row = 0; row < R; ++row) {
      float* gw = &p_.markov_w1.g[p_.w1_row(b.blocks[row / g].prev[row % g]) * r];
      for (int64_t i = 0; i < r; ++i) gw[i] += de_[row * r + i];
    }
  dh_.assign((size_t)(R * H), 0.0f);
  dnorm_eff_.assign((size_t)H, 0.0f);
  for (int64_t row = 0; row < R; ++row)
    rms_bwd(&hlast_[row * H], norm_eff_.data(), rs_n_[row], &dhN_[row * H], &dh_[row * H], dnorm_eff_.data(), H);
  // weight_eff = norm.w * exp(t): d norm.w = d w_eff * exp(t); d t = Σ d w_eff * w_eff.
  const float sc = p_.logit_scale();
  double dt = 0;
  for (int64_t e = 0; e < H; ++e) {
    p_.norm.g[(size_t)e] += dnorm_eff_[(size_t)e] * sc;
    dt += (double)dnorm_eff_[(size_t)e] * norm_eff_[(size_t)e];
  }
  if (!p_.log_logit_scale.g.empty()) p_.log_logit_scale.g[0] += (float)dt;
  return lt;
}

void DraftNet::backward_blocks(const TrainBatch& b) {
  const net::DSparkConfig& c = p_.cfg;
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.n_heads, g = c.block_size, I = c.intermediate_size;
  const int64_t nb = (int64_t)b.blocks.size(), R = nb * g, qd = nh * hd;
  for (CtxAct& cx : ctx_) {
    cx.dK.resize((size_t)c.n_layers);
    cx.dV.resize((size_t)c.n_layers);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      cx.dK[l].assign(cx.K[l].size(), 0.0f);
      cx.dV[l].assign(cx.V[l].size(), 0.0f);
    }
  }
  std::vector<float> dh2((size_t)(R * H)), dm((size_t)(R * H)), dact((size_t)(R * I)), dg((size_t)(R * I)),
      du((size_t)(R * I)), df((size_t)(R * H)), dh1((size_t)(R * H)), dor((size_t)(R * H)), datt((size_t)(R * qd)),
      dQ((size_t)(R * qd)), dKb((size_t)(R * hd)), dVb((size_t)(R * hd)), dq_raw((size_t)(R * qd)),
      dkb((size_t)(R * hd)), dx((size_t)(R * H)), dP;
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    DraftLayerParams& Lp = p_.layers[l];
    const LayerAct& A = layers_[l];
    const float ls = Lp.layer_scalar.w[0];
    // h_out = h2 * ls
    double dls = 0;
    for (int64_t i = 0; i < R * H; ++i) {
      dls += (double)dh_[i] * A.h2[i];
      dh2[i] = dh_[i] * ls;
    }
    Lp.layer_scalar.g[0] += (float)dls;
    // h2 = h1 + post_ffw_norm(m_raw)
    dh1 = dh2;
    std::fill(dm.begin(), dm.end(), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      rms_bwd(&A.m_raw[r * H], Lp.post_ffw_norm.w.data(), A.rs_m[r], &dh2[r * H], &dm[r * H], Lp.post_ffw_norm.g.data(), H);
    gemm(true, false, H, I, R, 1.0f, dm.data(), H, A.act.data(), I, 1.0f, Lp.w_down.g.data(), I);
    gemm(false, false, R, I, H, 1.0f, dm.data(), H, Lp.w_down.w.data(), I, 0.0f, dact.data(), I);
    for (int64_t i = 0; i < R * I; ++i) {
      dg[i] = dact[i] * A.u[i] * gelu_grad(A.g[i]);
      du[i] = dact[i] * gelu(A.g[i]);
    }
    gemm(true, false, I, H, R, 1.0f, dg.data(), I, A.f.data(), H, 1.0f, Lp.w_gate.g.data(), H);
    gemm(true, false, I, H, R, 1.0f, du.data(), I, A.f.data(), H, 1.0f, Lp.w_up.g.data(), H);
    gemm(false, false, R, H, I, 1.0f, dg.data(), I, Lp.w_gate.w.data(), H, 0.0f, df.data(), H);
    gemm(false, false, R, H, I, 1.0f, du.data(), I, Lp.w_up.w.data(), H, 1.0f, df.data(), H);
    for (int64_t r = 0; r < R; ++r)
      rms_bwd(&A.h1[r * H], Lp.pre_ffw_norm.w.data(), A.rs_f[r], &df[r * H], &dh1[r * H], Lp.pre_ffw_norm.g.data(), H);
    // h1 = h_in + post_attn_norm(o_raw)
    std::vector<float>& dh_in = dh_;
    dh_in = dh1;
    std::fill(dor.begin(), dor.end(), 0.0f);
    for (int64_t r = 0; r < R; ++r)
      rms_bwd(&A.o_raw[r * H], Lp.post_attn_norm.w.data(), A.rs_o[r], &dh1[r * H], &dor[r * H], Lp.post_attn_norm.g.data(), H);
    gemm(true, false, H, qd, R, 1.0f, dor.data(), H, A.att.data(), qd, 1.0f, Lp.wo.g.data(), qd);
    gemm(false, false, R, qd, H, 1.0f, dor.data(), H, Lp.wo.w.data(), qd, 0.0f, datt.data(), qd);
    // attention
    std::fill(dKb.begin(), dKb.end(), 0.0f);
    std::fill(dVb.begin(), dVb.end(), 0.0f);
    for (int64_t bi = 0; bi < nb; ++bi) {
      const TrainBlock& blk = b.blocks[bi];
      CtxAct& cx = ctx_[blk.seq];
      const int64_t a = blk.anchor, n = a + g, rows = g * nh;
      const std::vector<float>& P = A.P[bi];
      const float* Qb = &A.Q[bi * g * qd];
      const float* dO = &datt[bi * g * qd];
      dP.resize((size_t)(rows * n));
      gemm(false, true, rows, a, hd, 1.0f, dO, hd, cx.V[l].data(), hd, 0.0f, dP.data(), n);
      gemm(false, true, rows, g, hd, 1.0f, dO, hd, &A.Vb[bi * g * hd], hd, 0.0f, dP.data() + a, n);
      for (int64_t i = 0; i < rows; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < n; ++j) dot += (double)dP[i * n + j] * P[i * n + j];
        for (int64_t j = 0; j < n; ++j) dP[i * n + j] = P[i * n + j] * (dP[i * n + j] - (float)dot);
      }
      float* dQb = &dQ[bi * g * qd];
      gemm(false, false, rows, hd, a, 1.0f, dP.data(), n, cx.K[l].data(), hd, 0.0f, dQb, hd);
      gemm(false, false, rows, hd, g, 1.0f, dP.data() + a, n, &A.Kb[bi * g * hd], hd, 1.0f, dQb, hd);
      gemm(true, false, a, hd, rows, 1.0f, dP.data(), n, Qb, hd, 1.0f, cx.dK[l].data(), hd);
      gemm(true, false, g, hd, rows, 1.0f, dP.data() + a, n, Qb, hd, 1.0f, &dKb[bi * g * hd], hd);
      gemm(true, false, a, hd, rows, 1.0f, P.data(), n, dO, hd, 1.0f, cx.dV[l].data(), hd);
      gemm(true, false, g, hd, rows, 1.0f, P.data() + a, n, dO, hd, 1.0f, &dVb[bi * g * hd], hd);
    }
    // Q = rope(q_norm(q_raw)); Kb = rope(k_norm(kb)); Vb = norm(kb)
    std::fill(dq_raw.begin(), dq_raw.end(), 0.0f);
    std::fill(dkb.begin(), dkb.end(), 0.0f);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t pos = b.blocks[r / g].anchor + r % g;
      rope(&dQ[r * qd], nh, pos, true);
      rope(&dKb[r * hd], 1, pos, true);
      for (int64_t hh = 0; hh < nh; ++hh)
        rms_bwd(&A.q_raw[r * qd + hh * hd], Lp.q_norm.w.data(), A.rs_q[r * nh + hh], &dQ[r * qd + hh * hd],
                &dq_raw[r * qd + hh * hd], Lp.q_norm.g.data(), hd);
      rms_bwd(&A.kb[r * hd], Lp.k_norm.w.data(), A.rs_kb[r], &dKb[r * hd], &dkb[r * hd], Lp.k_norm.g.data(), hd);
      rms_bwd(&A.kb[r * hd], nullptr, A.rs_kb[r], &dVb[r * hd], &dkb[r * hd], nullptr, hd);
    }
    gemm(true, false, qd, H, R, 1.0f, dq_raw.data(), qd, A.x.data(), H, 1.0f, Lp.wq.g.data(), H);
    gemm(true, false, hd, H, R, 1.0f, dkb.data(), hd, A.x.data(), H, 1.0f, Lp.wk.g.data(), H);
    gemm(false, false, R, H, qd, 1.0f, dq_raw.data(), qd, Lp.wq.w.data(), H, 0.0f, dx.data(), H);
    gemm(false, false, R, H, hd, 1.0f, dkb.data(), hd, Lp.wk.w.data(), H, 1.0f, dx.data(), H);
    for (int64_t r = 0; r < R; ++r)
      rms_bwd(&A.h_in[r * H], Lp.in_norm.w.data(), A.rs_in[r], &dx[r * H], &dh_in[r * H], Lp.in_norm.g.data(), H);
  }
}

void DraftNet::backward_context(const TrainBatch& b) {
  const net::DSparkConfig& c = p_.cfg;
  const int64_t H = c.hidden_size, hd = c.head_dim, m = c.n_taps();
  std::vector<float> dkr, dpre;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    CtxAct& cx = ctx_[s];
    const int64_t C = b.seqs[s].n_ctx;
    cx.dctx.assign((size_t)(C * H), 0.0f);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      DraftLayerParams& Lp = p_.layers[l];
      dkr.assign((size_t)(C * hd), 0.0f);
      for (int64_t i = 0; i < C; ++i) {
        rope(&cx.dK[l][i * hd], 1, i, true);
        rms_bwd(&cx.kr[l][i * hd], Lp.k_norm.w.data(), cx.rs_k[l][i], &cx.dK[l][i * hd], &dkr[i * hd], Lp.k_norm.g.data(), hd);
        rms_bwd(&cx.kr[l][i * hd], nullptr, cx.rs_k[l][i], &cx.dV[l][i * hd], &dkr[i * hd], nullptr, hd);
      }
      gemm(true, false, hd, H, C, 1.0f, dkr.data(), hd, cx.ctx.data(), H, 1.0f, Lp.wk.g.data(), H);
      gemm(false, false, C, H, hd, 1.0f, dkr.data(), hd, Lp.wk.w.data(), H, 1.0f, cx.dctx.data(), H);
    }
    dpre.assign((size_t)(C * H), 0.0f);
    for (int64_t i = 0; i < C; ++i)
      rms_bwd(&cx.pre[i * H], p_.hidden_norm.w.data(), cx.rs[i], &cx.dctx[i * H], &dpre[i * H], p_.hidden_norm.g.data(), H);
    gemm(true, false, H, m * H, C, 1.0f, dpre.data(), H, b.seqs[s].taps.data(), m * H, 1.0f, p_.fc.g.data(), m * H);
  }
}

}  // namespace dspark::train
