// A tiny random Llama-family model written as a GGUF (F32 weights, tied or separate LM head) plus
// an independent naive f32/f64 reference forward written from the Llama definition (full
// recomputation, no KV cache): RMSNorm, RoPE over adjacent pairs, GQA, SwiGLU.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_writer.h"

namespace dspark::testing {

struct TinyLlama {
  int n_layer = 3, n_embd = 48, n_head = 6, n_head_kv = 2, head_dim = 8, n_ff = 96, n_vocab = 80;
  float rope_base = 1e4f, eps = 1e-5f;
  bool tied = true;
  std::vector<float> embd, output;  // [n_vocab, n_embd]; output used when !tied
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
  };
  std::vector<Layer> layers;
  std::vector<float> out_norm;

  // Another attention shape: heads query heads of hd dims (n_embd = heads * hd) over kv_heads K/V heads.
  TinyLlama(uint32_t seed, int heads, int kv_heads, int hd) : TinyLlama(seed, true, heads, kv_heads, hd) {}
  explicit TinyLlama(uint32_t seed, bool tied_head = true, int heads = 6, int kv_heads = 2, int hd = 8)
      : n_embd(heads * hd), n_head(heads), n_head_kv(kv_heads), head_dim(hd), tied(tied_head) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float s) { std::vector<float> v(n); for (auto& x : v) x = nd(rng) * s; return v; };
    auto norm = [&](size_t n) { std::vector<float> v(n); for (auto& x : v) x = 1.0f + 0.1f * nd(rng); return v; };
    embd = rnd((size_t)n_vocab * n_embd, 0.5f);
    const int qd = n_head * head_dim, kvd = n_head_kv * head_dim;
    for (int il = 0; il < n_layer; ++il) {
      Layer l;
      l.attn_norm = norm(n_embd);
      l.wq = rnd((size_t)qd * n_embd, 0.2f); l.wk = rnd((size_t)kvd * n_embd, 0.2f); l.wv = rnd((size_t)kvd * n_embd, 0.2f);
      l.wo = rnd((size_t)n_embd * qd, 0.2f); l.ffn_norm = norm(n_embd);
      l.gate = rnd((size_t)n_ff * n_embd, 0.2f); l.up = rnd((size_t)n_ff * n_embd, 0.2f);
      l.down = rnd((size_t)n_embd * n_ff, 0.2f);
      layers.push_back(std::move(l));
    }
    out_norm = norm(n_embd);
    output = rnd((size_t)n_vocab * n_embd, 0.5f);
  }

  Status write(const std::string& path) const {
    formats::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.context_length", 1024);
    w.add_u32("llama.embedding_length", n_embd);
    w.add_u32("llama.block_count", n_layer);
    w.add_u32("llama.feed_forward_length", n_ff);
    w.add_u32("llama.attention.head_count", n_head);
    w.add_u32("llama.attention.head_count_kv", n_head_kv);
    w.add_u32("llama.rope.dimension_count", head_dim);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", eps);
    w.add_f32("llama.rope.freq_base", rope_base);
    auto mat = [&](const std::string& name, const std::vector<float>& v, int64_t ne0, int64_t ne1) {
      const int64_t ne[2] = {ne0, ne1};
      return w.add_tensor(name, DType::F32, std::span<const int64_t>(ne, ne1 ? 2 : 1), v.data(), v.size() * 4);
    };
    DSPARK_RETURN_IF_ERROR(mat("token_embd.weight", embd, n_embd, n_vocab));
    if (!tied) DSPARK_RETURN_IF_ERROR(mat("output.weight", output, n_embd, n_vocab));
    DSPARK_RETURN_IF_ERROR(mat("output_norm.weight", out_norm, n_embd, 0));
    const int qd = n_head * head_dim, kvd = n_head_kv * head_dim;
    for (int il = 0; il < n_layer; ++il) {
      const Layer& l = layers[il];
      const std::string p = "blk." + std::to_string(il) + ".";
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_norm.weight", l.attn_norm, n_embd, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_q.weight", l.wq, n_embd, qd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_k.weight", l.wk, n_embd, kvd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_v.weight", l.wv, n_embd, kvd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_output.weight", l.wo, qd, n_embd));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_norm.weight", l.ffn_norm, n_embd, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_gate.weight", l.gate, n_embd, n_ff));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_up.weight", l.up, n_embd, n_ff));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_down.weight", l.down, n_ff, n_embd));
    }
    return w.write_file(path);
  }

  // Naive reference: logits [n_tokens, n_vocab] and the residual after each layer
  // hidden[il] [n_tokens, n_embd].
  void reference(const std::vector<int32_t>& toks, std::vector<float>* logits,
                 std::vector<std::vector<float>>* hidden) const {
    const int n = (int)toks.size(), qd = n_head * head_dim, kvd = n_head_kv * head_dim, group = n_head / n_head_kv;
    auto rms = [&](const float* x, const float* w, float* y, int m) {
      double ss = 0;
      for (int i = 0; i < m; ++i) ss += (double)x[i] * x[i];
      const double s = 1.0 / std::sqrt(ss / m + eps);
      for (int i = 0; i < m; ++i) y[i] = (float)(x[i] * s * w[i]);
    };
    auto mv = [](const std::vector<float>& W, const float* x, float* y, int rows, int cols) {
      for (int r = 0; r < rows; ++r) {
        double s = 0;
        for (int c = 0; c < cols; ++c) s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = (float)s;
      }
    };
    auto rope = [&](float* v, int pos) {  // adjacent pairs (2i, 2i + 1)
      for (int i = 0; i < head_dim / 2; ++i) {
        const double th = pos * std::pow((double)rope_base, -2.0 * i / head_dim);
        const double a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = (float)(a * std::cos(th) - b * std::sin(th));
        v[2 * i + 1] = (float)(b * std::cos(th) + a * std::sin(th));
      }
    };
    std::vector<float> x((size_t)n * n_embd);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < n_embd; ++i) x[(size_t)t * n_embd + i] = embd[(size_t)toks[t] * n_embd + i];
    hidden->assign(n_layer, {});
    std::vector<float> xn(n_embd), q((size_t)n * qd), k((size_t)n * kvd), v((size_t)n * kvd), o(qd), y(n_embd), g(n_ff),
        u(n_ff);
    for (int il = 0; il < n_layer; ++il) {
      const Layer& L = layers[il];
      for (int t = 0; t < n; ++t) {
        rms(&x[(size_t)t * n_embd], L.attn_norm.data(), xn.data(), n_embd);
        mv(L.wq, xn.data(), &q[(size_t)t * qd], qd, n_embd);
        mv(L.wk, xn.data(), &k[(size_t)t * kvd], kvd, n_embd);
        mv(L.wv, xn.data(), &v[(size_t)t * kvd], kvd, n_embd);
        for (int h = 0; h < n_head; ++h) rope(&q[(size_t)t * qd + h * head_dim], t);
        for (int h = 0; h < n_head_kv; ++h) rope(&k[(size_t)t * kvd + h * head_dim], t);
      }
      std::vector<float> xnew = x;
      for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_head; ++h) {
          const int kh = h / group;
          std::vector<double> s;
          double mx = -1e300;
          for (int j = 0; j <= t; ++j) {
            double d = 0;
            for (int i = 0; i < head_dim; ++i)
              d += (double)q[(size_t)t * qd + h * head_dim + i] * k[(size_t)j * kvd + kh * head_dim + i];
            s.push_back(d / std::sqrt((double)head_dim));
            mx = std::max(mx, s.back());
          }
          double sum = 0;
          for (double& e : s) { e = std::exp(e - mx); sum += e; }
          for (int i = 0; i < head_dim; ++i) {
            double acc = 0;
            for (int j = 0; j <= t; ++j) acc += s[j] / sum * v[(size_t)j * kvd + kh * head_dim + i];
            o[h * head_dim + i] = (float)acc;
          }
        }
        mv(L.wo, o.data(), y.data(), n_embd, qd);
        float* xt = &xnew[(size_t)t * n_embd];
        for (int i = 0; i < n_embd; ++i) xt[i] += y[i];
        rms(xt, L.ffn_norm.data(), xn.data(), n_embd);
        mv(L.gate, xn.data(), g.data(), n_ff, n_embd);
        mv(L.up, xn.data(), u.data(), n_ff, n_embd);
        for (int i = 0; i < n_ff; ++i) g[i] = (float)((double)g[i] / (1.0 + std::exp(-(double)g[i])) * u[i]);
        mv(L.down, g.data(), y.data(), n_embd, n_ff);
        for (int i = 0; i < n_embd; ++i) xt[i] += y[i];
      }
      x = xnew;
      (*hidden)[il] = x;
    }
    logits->assign((size_t)n * n_vocab, 0);
    for (int t = 0; t < n; ++t) {
      rms(&x[(size_t)t * n_embd], out_norm.data(), xn.data(), n_embd);
      mv(tied ? embd : output, xn.data(), &(*logits)[(size_t)t * n_vocab], n_vocab, n_embd);
    }
  }
};

}  // namespace dspark::testing
