// A tiny random Gemma 3 model written as a GGUF (F32 weights) plus an independent, naive f32
// reference forward written from llama.cpp's src/models/gemma3.cpp (full recomputation, no KV cache), so the engine's
// batched forward, sliding-window ring and rollback can be checked without the real model.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_writer.h"

namespace dspark::testing {

struct TinyGemma3 {
  int n_layer = 6, n_embd = 32, n_head = 2, n_head_kv = 1, head_dim = 16, n_ff = 64, n_vocab = 96, window = 8;
  std::vector<float> embd;                      // [n_vocab, n_embd]
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, q_norm, k_norm, wo, post_attn_norm, ffn_norm, gate, up, down,
        post_ffw_norm;
  };
  std::vector<Layer> layers;
  std::vector<float> out_norm;

  explicit TinyGemma3(uint32_t seed, int vocab = 96) : n_vocab(vocab) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float s) { std::vector<float> v(n); for (auto& x : v) x = nd(rng) * s; return v; };
    auto norm = [&](size_t n) { std::vector<float> v(n); for (auto& x : v) x = 1.0f + 0.1f * nd(rng); return v; };
    embd = rnd((size_t)n_vocab * n_embd, 0.5f);
    const int qd = n_head * head_dim, kvd = n_head_kv * head_dim;
    for (int il = 0; il < n_layer; ++il) {
      Layer l;
      l.attn_norm = norm(n_embd); l.q_norm = norm(head_dim); l.k_norm = norm(head_dim);
      l.wq = rnd((size_t)qd * n_embd, 0.2f); l.wk = rnd((size_t)kvd * n_embd, 0.2f); l.wv = rnd((size_t)kvd * n_embd, 0.2f);
      l.wo = rnd((size_t)n_embd * qd, 0.2f); l.post_attn_norm = norm(n_embd); l.ffn_norm = norm(n_embd);
      l.gate = rnd((size_t)n_ff * n_embd, 0.2f); l.up = rnd((size_t)n_ff * n_embd, 0.2f);
      l.down = rnd((size_t)n_embd * n_ff, 0.2f); l.post_ffw_norm = norm(n_embd);
      layers.push_back(std::move(l));
    }
    out_norm = norm(n_embd);
  }

  Status write(const std::string& path, const std::string& arch = "gemma3") const {
    formats::GgufWriter w;
    w.add_string("general.architecture", arch);
    w.add_u32("gemma3.context_length", 1024);
    w.add_u32("gemma3.embedding_length", n_embd);
    w.add_u32("gemma3.block_count", n_layer);
    w.add_u32("gemma3.feed_forward_length", n_ff);
    w.add_u32("gemma3.attention.head_count", n_head);
    w.add_u32("gemma3.attention.head_count_kv", n_head_kv);
    w.add_u32("gemma3.attention.key_length", head_dim);
    w.add_u32("gemma3.attention.value_length", head_dim);
    w.add_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_f32("gemma3.rope.freq_base", 1e6f);
    w.add_u32("gemma3.attention.sliding_window", window);
    auto mat = [&](const std::string& name, const std::vector<float>& v, int64_t ne0, int64_t ne1) {
      const int64_t ne[2] = {ne0, ne1};
      return w.add_tensor(name, DType::F32, std::span<const int64_t>(ne, ne1 ? 2 : 1), v.data(), v.size() * 4);
    };
    DSPARK_RETURN_IF_ERROR(mat("token_embd.weight", embd, n_embd, n_vocab));
    DSPARK_RETURN_IF_ERROR(mat("output_norm.weight", out_norm, n_embd, 0));
    const int qd = n_head * head_dim, kvd = n_head_kv * head_dim;
    for (int il = 0; il < n_layer; ++il) {
      const Layer& l = layers[il];
      const std::string p = "blk." + std::to_string(il) + ".";
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_norm.weight", l.attn_norm, n_embd, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_q.weight", l.wq, n_embd, qd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_k.weight", l.wk, n_embd, kvd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_v.weight", l.wv, n_embd, kvd));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_q_norm.weight", l.q_norm, head_dim, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_k_norm.weight", l.k_norm, head_dim, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "attn_output.weight", l.wo, qd, n_embd));
      DSPARK_RETURN_IF_ERROR(mat(p + "post_attention_norm.weight", l.post_attn_norm, n_embd, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_norm.weight", l.ffn_norm, n_embd, 0));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_gate.weight", l.gate, n_embd, n_ff));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_up.weight", l.up, n_embd, n_ff));
      DSPARK_RETURN_IF_ERROR(mat(p + "ffn_down.weight", l.down, n_ff, n_embd));
      DSPARK_RETURN_IF_ERROR(mat(p + "post_ffw_norm.weight", l.post_ffw_norm, n_embd, 0));
    }
    return w.write_file(path);
  }

  // Naive reference: logits [n_tokens, n_vocab] and the residual after each layer
  // hidden[il] [n_tokens, n_embd]. Recomputes everything from scratch.
  void reference(const std::vector<int32_t>& toks, std::vector<float>* logits,
                 std::vector<std::vector<float>>* hidden) const {
    const int n = (int)toks.size(), qd = n_head * head_dim;
    auto rms = [&](const float* x, const float* w, float* y, int m) {
      double ss = 0;
      for (int i = 0; i < m; ++i) ss += (double)x[i] * x[i];
      const float s = 1.0f / std::sqrt((float)(ss / m) + 1e-6f);
      for (int i = 0; i < m; ++i) y[i] = x[i] * s * w[i];
    };
    auto mv = [](const std::vector<float>& W, const float* x, float* y, int rows, int cols) {
      for (int r = 0; r < rows; ++r) {
        double s = 0;
        for (int c = 0; c < cols; ++c) s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = (float)s;
      }
    };
    auto rope = [&](float* v, int pos, double base) {
      const int half = head_dim / 2;
      for (int i = 0; i < half; ++i) {
        const double th = pos * std::pow(base, -2.0 * i / head_dim);
        const double a = v[i], b = v[i + half];
        v[i] = (float)(a * std::cos(th) - b * std::sin(th));
        v[i + half] = (float)(b * std::cos(th) + a * std::sin(th));
      }
    };
    std::vector<float> x((size_t)n * n_embd);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < n_embd; ++i) x[(size_t)t * n_embd + i] = embd[(size_t)toks[t] * n_embd + i] * std::sqrt((float)n_embd);
    hidden->assign(n_layer, {});
    std::vector<float> xn(n_embd), q((size_t)n * qd), k((size_t)n * head_dim), v((size_t)n * head_dim), o(qd), y(n_embd),
        g(n_ff), u(n_ff);
    for (int il = 0; il < n_layer; ++il) {
      const Layer& L = layers[il];
      const bool sliding = il % 6 < 5;
      const double base = sliding ? 1e4 : 1e6;
      for (int t = 0; t < n; ++t) {
        rms(&x[(size_t)t * n_embd], L.attn_norm.data(), xn.data(), n_embd);
        mv(L.wq, xn.data(), &q[(size_t)t * qd], qd, n_embd);
        mv(L.wk, xn.data(), &k[(size_t)t * head_dim], head_dim, n_embd);
        mv(L.wv, xn.data(), &v[(size_t)t * head_dim], head_dim, n_embd);
        for (int h = 0; h < n_head; ++h) {
          float* qh = &q[(size_t)t * qd + h * head_dim];
          rms(qh, L.q_norm.data(), qh, head_dim);
          rope(qh, t, base);
        }
        rms(&k[(size_t)t * head_dim], L.k_norm.data(), &k[(size_t)t * head_dim], head_dim);
        rope(&k[(size_t)t * head_dim], t, base);
      }
      std::vector<float> xnew = x;
      for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_head; ++h) {
          std::vector<double> s;
          const int lo = sliding ? std::max(0, t - window + 1) : 0;
          double mx = -1e300;
          for (int j = lo; j <= t; ++j) {
            double d = 0;
            for (int i = 0; i < head_dim; ++i) d += (double)q[(size_t)t * qd + h * head_dim + i] * k[(size_t)j * head_dim + i];
            s.push_back(d / std::sqrt((double)head_dim));
            mx = std::max(mx, s.back());
          }
          double sum = 0;
          for (double& e : s) { e = std::exp(e - mx); sum += e; }
          for (int i = 0; i < head_dim; ++i) {
            double acc = 0;
            for (int j = lo; j <= t; ++j) acc += s[j - lo] / sum * v[(size_t)j * head_dim + i];
            o[h * head_dim + i] = (float)acc;
          }
        }
        mv(L.wo, o.data(), y.data(), n_embd, qd);
        rms(y.data(), L.post_attn_norm.data(), y.data(), n_embd);
        float* xt = &xnew[(size_t)t * n_embd];
        for (int i = 0; i < n_embd; ++i) xt[i] += y[i];
        rms(xt, L.ffn_norm.data(), xn.data(), n_embd);
        mv(L.gate, xn.data(), g.data(), n_ff, n_embd);
        mv(L.up, xn.data(), u.data(), n_ff, n_embd);
        for (int i = 0; i < n_ff; ++i) {
          const double a = g[i];
          g[i] = (float)(0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))) * u[i]);
        }
        mv(L.down, g.data(), y.data(), n_embd, n_ff);
        rms(y.data(), L.post_ffw_norm.data(), y.data(), n_embd);
        for (int i = 0; i < n_embd; ++i) xt[i] += y[i];
      }
      x = xnew;
      (*hidden)[il] = x;
    }
    logits->assign((size_t)n * n_vocab, 0);
    for (int t = 0; t < n; ++t) {
      rms(&x[(size_t)t * n_embd], out_norm.data(), xn.data(), n_embd);
      mv(embd, xn.data(), &(*logits)[(size_t)t * n_vocab], n_vocab, n_embd);
    }
  }
};

}  // namespace dspark::testing
