#include "speculative/token_tree.h"

namespace dspark::speculative {

TreePrune prune_tree(DraftResult* d, std::span<const double> verify_ms, int max_tokens, double gain_scale) {
  TreePrune out;
  if (d->parent.empty()) return out;
  const int chain = std::min(d->chain, max_tokens);
  DraftResult kept;
  kept.chain = chain;
  double expected = 1.0;
  for (int i = 0; i < chain; ++i) {
    kept.tokens.push_back(d->tokens[(size_t)i]);
    kept.parent.push_back(i - 1);
    kept.confidence.push_back(d->confidence[(size_t)i]);
    expected += d->confidence[(size_t)i];
  }
  auto cost = [&](int tokens) { return tokens + 1 < (int)verify_ms.size() ? verify_ms[(size_t)tokens + 1] : -1.0; };
  const int n = (int)d->tokens.size();
  for (int b = chain; b < n;) {  // each branch: a root (parent -1) and its tokens up to the next root
    int e = b + 1;
    while (e < n && d->parent[(size_t)e] != -1) ++e;
    if (b < d->chain) {  // the chain's own tail past max_tokens
      b = e;
      continue;
    }
    const int len = e - b, rows = (int)kept.tokens.size();
    double gain = 0;
    for (int i = b; i < e; ++i) gain += d->confidence[(size_t)i];
    const double now = cost(rows), more = cost(rows + len);
    if (rows + len <= max_tokens && now > 0 && more > now && gain_scale * gain / (more - now) > expected / now) {
      for (int i = b; i < e; ++i) {
        kept.parent.push_back(i == b ? -1 : (int32_t)kept.tokens.size() - 1);
        kept.tokens.push_back(d->tokens[(size_t)i]);
        kept.confidence.push_back(d->confidence[(size_t)i]);
      }
      expected += gain_scale * gain;
      out.expected += gain;
      ++out.branches;
    }
    b = e;
  }
  if (out.branches == 0) {
    kept.parent.clear();
    kept.confidence.clear();
    kept.chain = 0;
  }
  kept.q = std::move(d->q);
  *d = std::move(kept);
  return out;
}

std::vector<int32_t> window_parents(const DraftResult& d) {
  std::vector<int32_t> p(d.tokens.size() + 1);
  p[0] = -1;
  for (size_t i = 0; i < d.tokens.size(); ++i) p[i + 1] = d.parent[i] + 1;
  return p;
}

TreePath accept_tree(std::span<const int32_t> argmax_rows, std::span<const int32_t> window,
                     std::span<const int32_t> parent) {
  TreePath out;
  int row = 0;
  for (;;) {
    const int32_t want = argmax_rows[(size_t)row];
    int next = -1;
    for (size_t c = (size_t)row + 1; c < window.size(); ++c)
      if (parent[c] == row && window[c] == want) {
        next = (int)c;
        break;
      }
    if (next < 0) {
      out.next = want;
      return out;
    }
    out.rows.push_back(next);
    row = next;
  }
}

}  // namespace dspark::speculative
