// A tiny random dense DSpark drafter exported by the training code (train::export_checkpoint: bf16,
// d2t, no embed_tokens / lm_head = extensions E1 / E3, markov_w1 [V_d + 1, r] = E4), and the f32
// token table it borrows from its "target", for the quantization tests.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/kernels.h"
#include "dspark/dspark_model.h"
#include "train/draft_params.h"

namespace dspark::testing {

struct TinyDrafterShape {
  int64_t H = 128, n_heads = 2, head_dim = 64, I = 256, V = 300, n_target_layers = 4, rank = 64, block = 4;
  std::vector<int> taps = {0, 2};
  int64_t n_draft_vocab = 128;  // d2t = every other id from 1
};

// A small drafter shape paired with a tiny Gemma 3 target of width H, vocabulary V and n_layer layers.
inline TinyDrafterShape paired_tiny_shape(int64_t H, int64_t V, int64_t n_layer) {
  TinyDrafterShape s;
  s.H = H;
  s.n_heads = 2;
  s.head_dim = 16;
  s.I = 64;
  s.V = V;
  s.n_target_layers = n_layer;
  s.rank = 32;
  s.n_draft_vocab = 40;
  return s;
}

inline double tiny_normal(Rng& rng) {
  const double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Writes the drafter to `dir` (must not exist). Matrices ~ N(0, 0.3^2), norms 1 + N(0, 0.1^2).
inline Status write_tiny_drafter(const std::string& dir, const TinyDrafterShape& s, uint64_t seed) {
  std::vector<int32_t> d2t;
  for (int64_t i = 0; i < s.n_draft_vocab; ++i) d2t.push_back((int32_t)(1 + 2 * i));
  train::DraftArch arch{s.taps, 1, s.rank, s.block, s.I};
  auto p = train::init_draft_params(arch, s.n_target_layers, s.H, s.n_heads, s.head_dim, s.I, s.V, 4, d2t, seed);
  if (!p) return p.status();
  Rng rng(seed + 1);
  for (train::Param* q : p->all())
    for (float& x : q->w)
      x = q->shape.size() == 1 && q->name.find("bias") == std::string::npos ? 1.0f + 0.1f * (float)tiny_normal(rng)
                                                                               : 0.3f * (float)tiny_normal(rng);
  return train::export_checkpoint(p.value(), dir, "");
}

// The target token table [V, H] f32 (embedding and tied output matrix).
struct TinyTable {
  std::vector<float> data;
  kernels::QMatrix q;
  net::TargetTables tables;
  TinyTable(const TinyDrafterShape& s, uint64_t seed) : data((size_t)(s.V * s.H)) {
    Rng rng(seed);
    for (float& x : data) x = (float)tiny_normal(rng);
    q = kernels::QMatrix{DType::F32, s.V, s.H, data.data(), (size_t)s.H * 4};
    tables = net::TargetTables{q, q, s.V, s.H};
  }
};

inline net::TargetShape tiny_target(const TinyDrafterShape& s) { return {s.n_target_layers, s.H, s.V}; }

}  // namespace dspark::testing
