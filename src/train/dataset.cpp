#include "train/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/f16.h"
#include "dspark/copy_head.h"

namespace dspark::train {

Result<Dataset> Dataset::open(const std::vector<std::string>& dirs, int64_t n_vocab, int64_t heldout_mod) {
  namespace fs = std::filesystem;
  Dataset ds;
  for (const std::string& d : dirs) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("shard-", 0) == 0 && n.size() > 12 && n.substr(n.size() - 12) == ".safetensors") files.push_back(e.path().string());
    }
    if (ec) return Status::error(d + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      auto sh = Shard::open(f, n_vocab, true);
      if (!sh) return sh.status();
      if (!ds.shards_.empty() && (sh->layout().tap_ids != ds.shards_[0].layout().tap_ids ||
                                  sh->layout().top_k != ds.shards_[0].layout().top_k ||
                                  sh->layout().n_embd != ds.shards_[0].layout().n_embd))
        return Status::error(f + ": tap layers, top_k or width differ from " + ds.shards_[0].path() +
                             " (mixing regen runs of different settings)");
      ds.shards_.push_back(std::move(sh.value()));
    }
  }
  if (ds.shards_.empty()) return Status::error("no regen shards (shard-*.safetensors) found");
  for (int32_t s = 0; s < (int32_t)ds.shards_.size(); ++s)
    for (int32_t q = 0; q < (int32_t)ds.shards_[s].n_seq(); ++q) {
      const Shard& sh = ds.shards_[s];
      if (sh.seq_len(q) - sh.prompt_len(q) < 2) continue;  // no anchor with a label
      const bool held = heldout_mod > 0 && sh.prompt_index(q) % heldout_mod == 0;
      // Teacher-forced text (temperature < 0): a held-out prompt's text is not trained on, and it is
      // not a held-out sequence either (held-out evaluation replays the target's own responses).
      if (sh.temperature(q) < 0 && held) continue;
      (held ? ds.heldout_ : ds.train_).push_back({s, q});
    }
  if (ds.train_.empty()) return Status::error("the regen shards hold no training sequence");
  return ds;
}

int64_t Dataset::train_response_tokens() const {
  int64_t n = 0;
  for (const SeqRef& r : train_) n += shards_[r.shard].seq_len(r.seq) - shards_[r.shard].prompt_len(r.seq);
  return n;
}

std::vector<int32_t> Dataset::top_tokens(int64_t v_d, int64_t n_vocab, double* coverage) const {
  std::vector<int64_t> count((size_t)n_vocab, 0);
  int64_t total = 0;
  for (const SeqRef& r : train_) {
    const Shard& sh = shards_[r.shard];
    if (sh.temperature(r.seq) < 0) continue;  // the draft vocabulary is the target's own output
    const int32_t* t = sh.tokens(r.seq);
    for (int64_t i = sh.prompt_len(r.seq); i < sh.seq_len(r.seq); ++i) { ++count[(size_t)t[i]]; ++total; }
  }
  std::vector<int32_t> ids((size_t)n_vocab);
  for (int32_t i = 0; i < (int32_t)n_vocab; ++i) ids[(size_t)i] = i;
  const int64_t k = std::min(v_d, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return count[(size_t)a] > count[(size_t)b] || (count[(size_t)a] == count[(size_t)b] && a < b); });
  ids.resize((size_t)k);
  int64_t covered = 0;
  for (int32_t id : ids) covered += count[(size_t)id];
  if (coverage) *coverage = total ? (double)covered / (double)total : 0.0;
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::vector<int>> Dataset::tap_columns(const std::vector<int>& taps) const {
  const std::vector<int>& have = layout().tap_ids;
  std::vector<int> cols;
  for (int t : taps) {
    auto it = std::find(have.begin(), have.end(), t);
    if (it == have.end()) {
      std::string s;
      for (int h : have) {
        if (!s.empty()) s += ',';
        s += std::to_string(h);
      }
      return Status::error("tap layer " + std::to_string(t) + " was not recorded by regen (shards have " + s + ")");
    }
    cols.push_back((int)(it - have.begin()));
  }
  return cols;
}

TapColumnStats Dataset::tap_column_stats(const std::vector<int>& tap_cols, int64_t n_seqs, uint64_t seed) const {
  const int64_t H = layout().n_embd, w_in = layout().row_width(), m = (int64_t)tap_cols.size();
  std::vector<double> ss((size_t)(m * H), 0.0);
  TapColumnStats st;
  st.abs_max.assign((size_t)(m * H), 0.0f);
  Rng rng(seed ^ 0x7A95C0DEull);
  const int64_t n = std::min<int64_t>(n_seqs, (int64_t)train_.size());
  for (int64_t s = 0; s < n; ++s) {
    const SeqRef ref = n == (int64_t)train_.size() ? train_[(size_t)s] : train_[(size_t)(rng.next() % train_.size())];
    const Shard& sh = shards_[ref.shard];
    const uint16_t* taps = sh.taps(ref.seq);
    for (int64_t i = 0; i + 1 < sh.seq_len(ref.seq); ++i, ++st.rows)  // the last row is zero (never run)
      for (int64_t t = 0; t < m; ++t) {
        const uint16_t* src = taps + i * w_in + tap_cols[(size_t)t] * H;
        for (int64_t e = 0; e < H; ++e) {
          const double v = bf16_to_fp32(src[e]);
          ss[(size_t)(t * H + e)] += v * v;
          float& mx = st.abs_max[(size_t)(t * H + e)];
          mx = std::max(mx, (float)std::fabs(v));
        }
      }
  }
  st.rms.resize(ss.size());
  for (size_t j = 0; j < ss.size(); ++j) st.rms[j] = st.rows ? std::sqrt(ss[j] / (double)st.rows) : 0.0;
  return st;
}

std::vector<float> Dataset::tap_inv_rms(const std::vector<int>& tap_cols, int64_t n_seqs, uint64_t seed) const {
  const TapColumnStats st = tap_column_stats(tap_cols, n_seqs, seed);
  std::vector<float> inv(st.rms.size(), 1.0f);
  for (size_t j = 0; j < inv.size(); ++j)
    if (st.rms[j] > 1e-6) inv[j] = (float)(1.0 / st.rms[j]);
  return inv;
}

void scale_taps(const std::vector<float>& scale, TrainBatch* b) {
  if (scale.empty()) return;
  const size_t w = scale.size();
  for (TrainSeq& s : b->seqs)
    for (size_t i = 0; i < s.taps.size(); ++i) s.taps[i] *= scale[i % w];
}

BlockInputs block_inputs_of(const net::DSparkConfig& c) {
  BlockInputs b;
  if (c.lookup_max_ngram > 0) {
    b.mask_token_id = c.mask_token_id;
    b.max_ngram = c.lookup_max_ngram;
    b.min_ngram = c.lookup_min_ngram;
  }
  return b;
}

void Dataset::make_batch(Rng& rng, int64_t n_seqs, int64_t n_anchors, int64_t gamma, const std::vector<int>& tap_cols,
                         TrainBatch* out, const std::vector<SeqRef>* from, const BlockInputs& inputs) const {
  const std::vector<SeqRef>& pool = from ? *from : train_;
  out->seqs.clear();
  out->blocks.clear();
  out->top_k = layout().top_k;
  if (pool.empty()) return;
  const int64_t H = layout().n_embd, w_in = layout().row_width(), m = (int64_t)tap_cols.size();
  std::vector<int64_t> cand;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const SeqRef ref = pool[(size_t)(rng.next() % pool.size())];
    const Shard& sh = shards_[ref.shard];
    const int64_t P = sh.prompt_len(ref.seq), L = sh.seq_len(ref.seq);
    cand.clear();
    for (int64_t a = P; a <= L - 2; ++a) cand.push_back(a);
    const int64_t na = std::min<int64_t>(n_anchors, (int64_t)cand.size());
    for (int64_t i = 0; i < na; ++i) std::swap(cand[(size_t)i], cand[(size_t)(i + (int64_t)(rng.next() % (cand.size() - i)))]);
    cand.resize((size_t)na);
    const int64_t n_ctx = *std::max_element(cand.begin(), cand.end());
    TrainSeq ts;
    ts.n_ctx = n_ctx;
    ts.taps.resize((size_t)(n_ctx * m * H));
    const uint16_t* taps = sh.taps(ref.seq);
    for (int64_t i = 0; i < n_ctx; ++i)
      for (int64_t t = 0; t < m; ++t) {
        const uint16_t* src = taps + i * w_in + tap_cols[(size_t)t] * H;
        float* dst = &ts.taps[(size_t)((i * m + t) * H)];
        for (int64_t e = 0; e < H; ++e) dst[e] = bf16_to_fp32(src[e]);
      }
    const int32_t seq_index = (int32_t)out->seqs.size();
    out->seqs.push_back(std::move(ts));
    const int32_t* tok = sh.tokens(ref.seq);
    const bool text = sh.temperature(ref.seq) < 0;
    const int32_t* top = sh.dist_ids(ref.seq);  // row j: position P - 1 + j, top-1 first
    for (int64_t a : cand) {
      TrainBlock b;
      b.seq = seq_index;
      b.anchor = a;
      if (inputs.mask_token_id >= 0 && inputs.max_ngram > 0)
        net::lookup_chain(std::span<const int32_t>(tok, (size_t)a), tok[a], (int)gamma, inputs.max_ngram,
                           inputs.min_ngram, inputs.mask_token_id, &b.inputs);
      bool on_path = true;  // text: x_{a+1..a+k} are the target's own greedy tokens
      for (int64_t k = 0; k < gamma; ++k) {
        if (text && k > 0 && a + k <= L - 1) on_path = on_path && tok[a + k] == top[(a + k - 1 - P + 1) * out->top_k];
        const bool valid = a + k + 1 <= L - 1 && on_path;
        b.prev.push_back(a + k < L ? tok[a + k] : 0);
        b.label.push_back(valid ? tok[a + k + 1] : -1);
        const int64_t row = a + k - P + 1;  // dist row of position a + k (predicts x_{a+k+1})
        b.dist_ids.push_back(valid ? sh.dist_ids(ref.seq) + row * out->top_k : nullptr);
        b.dist_probs.push_back(valid ? sh.dist_probs(ref.seq) + row * out->top_k : nullptr);
        if (inputs.copyable_weight != 1.0f) {
          // The copy head's proposal over the true history x_0 .. x_{a+k} (teacher forcing: earlier
          // slots accepted), with matches of 2 tokens or more (its n = 1 copies are mostly wrong).
          const net::CopyProposal cp =
              valid ? net::lookup_next(std::span<const int32_t>(tok, (size_t)(a + k + 1)), 3, 2) : net::CopyProposal{};
          b.weight.push_back(cp.token >= 0 && cp.token == b.label.back() ? inputs.copyable_weight : 1.0f);
        }
      }
      out->blocks.push_back(std::move(b));
    }
  }
}

}  // namespace dspark::train
