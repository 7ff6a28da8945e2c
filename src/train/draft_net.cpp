#include "train/draft_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "train/draft_ops.h"
#include "train/gemm.h"

namespace dspark::train {

using namespace ops;


DraftNet::~DraftNet() = default;

void DraftNet::rope(float* x, int64_t n_heads, int64_t pos, bool inverse) const {
  const int64_t hd = p_.cfg.head_dim, half = hd / 2;
  for (int64_t j = 0; j < p_.cfg.n_rot; ++j) {
    const double phi = (double)pos * inv_freq_[(size_t)j];
    const double c = std::cos(phi), s = inverse ? -std::sin(phi) : std::sin(phi);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * hd;
      const double a = v[j], b = v[j + half];
      v[j] = (float)(a * c - b * s);
      v[j + half] = (float)(b * c + a * s);
    }
  }
}

void DraftNet::forward_context(const TrainBatch& b) {
  const net::DSparkConfig& c = p_.cfg;
  const int64_t H = c.hidden_size, hd = c.head_dim, m = c.n_taps(), L = c.n_layers;
  ctx_.resize(b.seqs.size());
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const TrainSeq& in = b.seqs[s];
    CtxAct& a = ctx_[s];
    const int64_t C = in.n_ctx;
    a.pre.resize((size_t)(C * H));
    a.ctx.resize((size_t)(C * H));
    a.rs.resize((size_t)C);
    gemm(false, true, C, H, m * H, 1.0f, in.taps.data(), m * H, p_.fc.w.data(), m * H, 0.0f, a.pre.data(), H);
    for (int64_t i = 0; i < C; ++i)
      a.rs[i] = rms_fwd(&a.pre[i * H], p_.hidden_norm.w.data(), &a.ctx[i * H], H, c.rms_eps);
    a.kr.resize(L); a.K.resize(L); a.V.resize(L); a.rs_k.resize(L);
    for (int64_t l = 0; l < L; ++l) {
      const DraftLayerParams& Lp = p_.layers[l];
      a.kr[l].resize((size_t)(C * hd));
      a.K[l].resize((size_t)(C * hd));
      a.V[l].resize((size_t)(C * hd));
      a.rs_k[l].resize((size_t)C);
      gemm(false, true, C, hd, H, 1.0f, a.ctx.data(), H, Lp.wk.w.data(), H, 0.0f, a.kr[l].data(), hd);
      for (int64_t i = 0; i < C; ++i) {
        a.rs_k[l][i] = rms_fwd(&a.kr[l][i * hd], nullptr, &a.V[l][i * hd], hd, c.rms_eps);
        rms_fwd(&a.kr[l][i * hd], Lp.k_norm.w.data(), &a.K[l][i * hd], hd, c.rms_eps);
        rope(&a.K[l][i * hd], 1, i, false);
      }
    }
  }
}

void DraftNet::forward_blocks(const TrainBatch& b) {
  const net::DSparkConfig& c = p_.cfg;
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.n_heads, g = c.block_size, I = c.intermediate_size;
  const int64_t nb = (int64_t)b.blocks.size(), R = nb * g, qd = nh * hd;
  h0_.resize((size_t)(R * H));
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t i = 0; i < g; ++i) {
      const std::vector<int32_t>& in = b.blocks[bi].inputs;
      const int32_t id = !in.empty() ? in[(size_t)i] : i == 0 ? b.blocks[bi].prev[0] : c.mask_token_id;
      t_.embed_row(id, &h0_[(bi * g + i) * H]);
    }
  layers_.resize((size_t)c.n_layers);
  std::vector<float> h = h0_;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const DraftLayerParams& Lp = p_.layers[l];
    LayerAct& A = layers_[l];
    A.h_in = h;
    auto sz = [&](std::vector<float>& v, int64_t n) { v.resize((size_t)n); };
    sz(A.rs_in, R); sz(A.x, R * H); sz(A.q_raw, R * qd); sz(A.rs_q, R * nh); sz(A.Q, R * qd); sz(A.kb, R * hd);
    sz(A.rs_kb, R); sz(A.Kb, R * hd); sz(A.Vb, R * hd); sz(A.att, R * qd); sz(A.o_raw, R * H); sz(A.rs_o, R);
    sz(A.h1, R * H); sz(A.f, R * H); sz(A.rs_f, R); sz(A.g, R * I); sz(A.u, R * I); sz(A.act, R * I);
    sz(A.m_raw, R * H); sz(A.rs_m, R); sz(A.h2, R * H);
    for (int64_t r = 0; r < R; ++r) A.rs_in[r] = rms_fwd(&h[r * H], Lp.in_norm.w.data(), &A.x[r * H], H, c.rms_eps);
    gemm(false, true, R, qd, H, 1.0f, A.x.data(), H, Lp.wq.w.data(), H, 0.0f, A.q_raw.data(), qd);
    gemm(false, true, R, hd, H, 1.0f, A.x.data(), H, Lp.wk.w.data(), H, 0.0f, A.kb.data(), hd);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t pos = b.blocks[r / g].anchor + r % g;
      for (int64_t hh = 0; hh < nh; ++hh)
        A.rs_q[r * nh + hh] = rms_fwd(&A.q_raw[r * qd + hh * hd], Lp.q_norm.w.data(), &A.Q[r * qd + hh * hd], hd, c.rms_eps);
      rope(&A.Q[r * qd], nh, pos, false);
      A.rs_kb[r] = rms_fwd(&A.kb[r * hd], nullptr, &A.Vb[r * hd], hd, c.rms_eps);
      rms_fwd(&A.kb[r * hd], Lp.k_norm.w.data(), &A.Kb[r * hd], hd, c.rms_eps);
      rope(&A.Kb[r * hd], 1, pos, false);
    }
    // attention per block: queries [γ nH, hd] against [context rows < a ; block rows]
    A.P.resize((size_t)nb);
    for (int64_t bi = 0; bi < nb; ++bi) {
      const TrainBlock& blk = b.blocks[bi];
      const CtxAct& cx = ctx_[blk.seq];
      const int64_t a = blk.anchor, n = a + g, rows = g * nh;
      std::vector<float>& P = A.P[bi];
      P.resize((size_t)(rows * n));
      const float* Qb = &A.Q[bi * g * qd];
      gemm(false, true, rows, a, hd, 1.0f, Qb, hd, cx.K[l].data(), hd, 0.0f, P.data(), n);
      gemm(false, true, rows, g, hd, 1.0f, Qb, hd, &A.Kb[bi * g * hd], hd, 0.0f, P.data() + a, n);
      for (int64_t i = 0; i < rows; ++i) {
        float* row = &P[i * n];
        const float mx = *std::max_element(row, row + n);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) { row[j] = std::exp(row[j] - mx); sum += row[j]; }
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; ++j) row[j] *= inv;
      }
      float* Ob = &A.att[bi * g * qd];
      gemm(false, false, rows, hd, a, 1.0f, P.data(), n, cx.V[l].data(), hd, 0.0f, Ob, hd);
      gemm(false, false, rows, hd, g, 1.0f, P.data() + a, n, &A.Vb[bi * g * hd], hd, 1.0f, Ob, hd);
    }
    gemm(false, true, R, H, qd, 1.0f, A.att.data(), qd, Lp.wo.w.data(), qd, 0.0f, A.o_raw.data(), H);
    std::vector<float> tmp((size_t)H);
    for (int64_t r = 0; r < R; ++r) {
      A.rs_o[r] = rms_fwd(&A.o_raw[r * H], Lp.post_attn_norm.w.data(), tmp.data(), H, c.rms_eps);
      for (int64_t e = 0; e < H; ++e) A.h1[r * H + e] = h[r * H + e] + tmp[e];
      A.rs_f[r] = rms_fwd(&A.h1[r * H], Lp.pre_ffw_norm.w.data(), &A.f[r * H], H, c.rms_eps);
    }
    gemm(false, true, R, I, H, 1.0f, A.f.data(), H, Lp.w_gate.w.data(), H, 0.0f, A.g.data(), I);
    gemm(false, true, R, I, H, 1.0f, A.f.data(), H, Lp.w_up.w.data(), H, 0.0f, A.u.data(), I);
    for (int64_t i = 0; i < R * I; ++i) A.act[i] = gelu(A.g[i]) * A.u[i];
    gemm(false, true, R, H, I, 1.0f, A.act.data(), I, Lp.w_down.w.data(), I, 0.0f, A.m_raw.data(), H);
    const float ls = Lp.layer_scalar.w[0];
    for (int64_t r = 0; r < R; ++r) {
      A.rs_m[r] = rms_fwd(&A.m_raw[r * H], Lp.post_ffw_norm.w.data(), tmp.data(), H, c.rms_eps);
      for (int64_t e = 0; e < H; ++e) {
        A.h2[r * H + e] = A.h1[r * H + e] + tmp[e];
        h[r * H + e] = A.h2[r * H + e] * ls;
      }
    }
  }
  hlast_ = h;
  hN_.resize((size_t)(R * H));
  rs_n_.resize((size_t)R);
  // Final norm with the (training-only) logit scale folded in: weight = norm.weight * exp(t).
  const float sc = p_.logit_scale();
  norm_eff_.resize((size_t)H);
  for (int64_t e = 0; e < H; ++e) norm_eff_[(size_t)e] = p_.norm.w[(size_t)e] * sc;
  for (int64_t r = 0; r < R; ++r) rs_n_[r] = rms_fwd(&hlast_[r * H], norm_eff_.data(), &hN_[r * H], H, c.rms_eps);
}

LossTerms DraftNet::run(const TrainBatch& b, bool backward) {
  const net::DSparkConfig& c = p_.cfg;
  if (inv_freq_.empty()) {
    inv_freq_.assign((size_t)(c.head_dim / 2), 0.0);
    for (int64_t i = 0; i < c.n_rot; ++i)
      inv_freq_[(size_t)i] = std::pow(c.rope_theta, -2.0 * (double)i / (double)c.head_dim);
  }
  forward_context(b);
  forward_blocks(b);
  LossTerms lt = loss_head(b, backward);
  if (backward) {
    backward_blocks(b);
    backward_context(b);
  }
  return lt;
}

}  // namespace dspark::train
