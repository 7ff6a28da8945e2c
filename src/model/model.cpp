#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "model/archs.h"

namespace dspark::model {

namespace {

constexpr ArchEntry kArchitectures[] = {
    {"gemma3", &load_gemma3},
    {"llama", &load_llama},
};

}  // namespace

Result<std::unique_ptr<Model>> load_model(const std::string& path, const kernels::Backend* be) {
  const kernels::Backend& backend = be ? *be : kernels::default_backend();
  auto file = formats::GgufFile::open(path);
  if (!file) return file.status();
  auto arch = file->get_string("general.architecture");
  if (!arch) return Status::error(arch.message());
  std::string known;
  for (const ArchEntry& e : kArchitectures) {
    if (*arch == e.name) return e.load(std::move(file).value(), backend);
    known += std::string(known.empty() ? "" : ", ") + e.name;
  }
  return Status::error(path + ": general.architecture is '" + *arch + "', which dspark does not implement (supported: " +
                       known + ")");
}

ForwardScratch::ForwardScratch(const kernels::Backend& backend, const ModelConfig& c, int64_t rows, int64_t ctx,
                               ThreadPool* p)
    : be(&backend), max_rows(rows), max_ctx(ctx), mm(backend.matmul_context(p)), pool(p) {
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  for (Array* a : {&x, &xn, &q, &k, &v, &attn, &o, &gate, &up, &fused, &scores, &attn_split, &logits, &rope_cs})
    a->bind(&backend);
  x.resize(rows * c.n_embd);
  xn.resize(rows * c.n_embd);
  q.resize(rows * c.n_head * c.head_dim);
  k.resize(rows * kv_dim);
  v.resize(rows * kv_dim);
  attn.resize(rows * c.n_head * c.head_dim);
  o.resize(rows * c.n_embd);
  gate.resize(rows * c.n_ff);
  up.resize(rows * c.n_ff);
  scores.resize((size_t)(p ? p->size() : 1) * (c.n_head / c.n_head_kv) * ctx);
  row_session.resize(rows);
  row_pos.resize(rows);
  row_slot.resize(rows);
  row_n_anc.assign(rows, 0);
  row_out.resize(rows);
  attn_cost.resize(rows + 1);
  const int64_t threads = p ? p->size() : 1;
  attn_rows_first.resize((size_t)(rows * threads));
  attn_rows_keys.resize((size_t)(rows * threads));
  row_token.resize(rows);
  rope_cs.resize(rows * 2 * c.head_dim);
}

Session::Session(const Model& model, const SessionOptions& opt, ThreadPool* pool)
    : kv_(model.backend(), model.config(), opt.n_ctx, std::min(opt.max_batch, opt.n_ctx)),
      scratch_(model.backend(), model.config(), std::min(opt.max_batch, opt.n_ctx), opt.n_ctx, pool) {}

Status Model::prepare(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const {
  const ModelConfig& c = config_;
  const int64_t n = (int64_t)tokens.size();
  if (n == 0) return Status::error("forward: no tokens");
  if (s.n_past() + n > s.kv_.n_ctx())
    return Status::error("context overflow: " + std::to_string(s.n_past()) + " cached + " + std::to_string(n) +
                         " new tokens exceed the context size " + std::to_string(s.kv_.n_ctx()));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
      return Status::error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                           " is outside the vocabulary [0, " + std::to_string(c.n_vocab) + ")");
  for (int tap : opt.taps)
    if (tap != kTapEmbedding && tap != kTapFinalNorm && (tap < 0 || tap >= c.n_layer))
      return Status::error("tap point " + std::to_string(tap) + " is not a layer of this model");
  s.taps_.resize(opt.taps.size());
  for (auto& t : s.taps_) t.resize((size_t)(n * c.n_embd));
  s.n_logit_rows_ = opt.logits == LogitsMode::kAll ? n : (opt.logits == LogitsMode::kLast ? 1 : 0);
  s.logits_.resize((size_t)(s.n_logit_rows_ * c.n_vocab));
  return Status::ok();
}

namespace {

// ForwardOptions::tree_parent checked against n rows: -1 first, then parents before their children.
Status check_tree(std::span<const int32_t> parent, int64_t n, int64_t max_batch) {
  if ((int64_t)parent.size() != n)
    return Status::error("forward: a token tree needs one parent per token (" + std::to_string(parent.size()) + " for " +
                         std::to_string(n) + ")");
  if (n > max_batch) return Status::error("forward: a token tree must fit one chunk of " + std::to_string(max_batch));
  if (parent[0] != -1) return Status::error("forward: a token tree's first row must follow the committed tokens (parent -1)");
  for (int64_t i = 1; i < n; ++i)
    if (parent[(size_t)i] < 0 || parent[(size_t)i] >= i)
      return Status::error("forward: tree row " + std::to_string(i) + " has parent " + std::to_string(parent[(size_t)i]) +
                           " (must be an earlier row)");
  return Status::ok();
}

// Rows of a tree forward at committed length P: position P + depth, cache position P + i, and the
// cache positions of each row's ancestors (root first, the row last).
void plan_tree(ForwardScratch& w, std::span<const int32_t> parent, int64_t n, int64_t P) {
  w.row_anc.resize((size_t)(n * n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = parent[(size_t)i];
    const int64_t depth = p < 0 ? 0 : w.row_n_anc[(size_t)p];
    w.row_pos[(size_t)i] = P + depth;
    w.row_slot[(size_t)i] = P + i;
    if (p >= 0) std::copy_n(w.row_anc.begin() + p * n, depth, w.row_anc.begin() + i * n);
    w.row_anc[(size_t)(i * n + depth)] = P + i;
    w.row_n_anc[(size_t)i] = depth + 1;
  }
}

}  // namespace

Status Model::forward(Session& s, std::span<const int32_t> tokens, const ForwardOptions& opt) const {
  const bool tree = !opt.tree_parent.empty();
  if (tree) DSPARK_RETURN_IF_ERROR(check_tree(opt.tree_parent, (int64_t)tokens.size(), s.kv_.max_batch()));
  DSPARK_RETURN_IF_ERROR(prepare(s, tokens, opt));
  ForwardScratch& w = s.scratch_;
  const int64_t n = (int64_t)tokens.size(), chunk = s.kv_.max_batch();
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t m = std::min(chunk, n - i0), pos0 = s.kv_.length();
    for (int64_t r = 0; r < m; ++r) {
      w.row_session[r] = &s;
      w.row_pos[r] = w.row_slot[r] = pos0 + r;
      w.row_n_anc[r] = 0;
      w.row_out[r] = i0 + r;
      w.row_token[r] = tokens[i0 + r];
    }
    if (tree) plan_tree(w, opt.tree_parent, m, pos0);
    const int64_t last = m - 1;
    forward_rows(w, m, opt, i0 + m == n ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>());
  }
  return Status::ok();
}

Status Model::forward_multi(std::span<const SeqInput> seqs, const ForwardOptions& opt,
                                  ForwardScratch& w) const {
  int64_t total = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Session* s = seqs[i].session;
    if (s == nullptr) return Status::error("forward_multi: sequence " + std::to_string(i) + " has no session");
    for (size_t j = 0; j < i; ++j)
      if (seqs[j].session == s) return Status::error("forward_multi: a session appears twice");
    if ((int64_t)seqs[i].tokens.size() > s->kv_.max_batch())
      return Status::error("forward_multi: sequence " + std::to_string(i) + " has more tokens than its max_batch");
    if (s->kv_.n_ctx() > w.max_ctx) return Status::error("forward_multi: a session's context exceeds the scratch's");
    DSPARK_RETURN_IF_ERROR(prepare(*s, seqs[i].tokens, opt));
    total += (int64_t)seqs[i].tokens.size();
  }
  if (total > w.max_rows)
    return Status::error("forward_multi: " + std::to_string(total) + " rows exceed the scratch's " +
                         std::to_string(w.max_rows));
  std::vector<int64_t> last_rows;
  last_rows.reserve(seqs.size());
  int64_t r = 0;
  for (const SeqInput& q : seqs) {
    const int64_t pos0 = q.session->kv_.length();
    for (int64_t t = 0; t < (int64_t)q.tokens.size(); ++t, ++r) {
      w.row_session[r] = q.session;
      w.row_pos[r] = w.row_slot[r] = pos0 + t;
      w.row_n_anc[r] = 0;
      w.row_out[r] = t;
      w.row_token[r] = q.tokens[t];
    }
    last_rows.push_back(r - 1);
  }
  if (total > 0) forward_rows(w, total, opt, last_rows);
  return Status::ok();
}

void Model::embed(ForwardScratch& w, int64_t n) const {
  be_->embed_rows(weights_.token_embd, w.row_token.data(), n, config_.embd_scale, w.x.data());
}

void Model::rope_tables(ForwardScratch& w, int64_t n) const {
  const ModelConfig& c = config_;
  const bool local = c.sliding_window > 0;  // sliding layers (config.h, is_sliding): their base too
  row_ranges(w, n, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      float* cs = w.rope_cs.data() + t * 2 * c.head_dim;
      be_->rope_angles(c.head_dim, w.row_pos[t], c.rope_base_global, cs);
      if (local) be_->rope_angles(c.head_dim, w.row_pos[t], c.rope_base_local, cs + c.head_dim);
    }
  });
}

void Model::capture(ForwardScratch& w, int64_t n, const ForwardOptions& opt, int point, const float* src) const {
  const int64_t n_embd = config_.n_embd;
  for (size_t i = 0; i < opt.taps.size(); ++i)
    if (opt.taps[i] == point)
      for (int64_t r = 0; r < n; ++r)
        be_->to_host(w.row_session[r]->taps_[i].data() + w.row_out[r] * n_embd, src + r * n_embd,
                     sizeof(float) * n_embd);
}

void Model::store_kv_rows(ForwardScratch& w, int64_t il, int64_t r0, int64_t r1) const {
  const int64_t hd = config_.head_dim, kv_dim = config_.n_head_kv * hd;
  for (int64_t t0 = r0; t0 < r1;) {
    KvCache& kv = w.row_session[t0]->kv_;
    // A run: rows of one session whose cache rows follow each other (a ring layer's end splits it).
    int64_t t1 = t0 + 1;
    while (t1 < r1 && w.row_session[t1] == w.row_session[t0] &&
           kv.k_at(il, 0, w.row_slot[t1]) == kv.k_at(il, 0, w.row_slot[t1 - 1]) + hd)
      ++t1;
    for (int64_t h = 0; h < config_.n_head_kv; ++h) {  // k, v: [n, kv_dim]; the cache is head-major
      be_->f32_to_f16_rows(w.k.data() + t0 * kv_dim + h * hd, kv_dim, kv.k_at(il, h, w.row_slot[t0]), hd, t1 - t0, hd);
      be_->f32_to_f16_rows(w.v.data() + t0 * kv_dim + h * hd, kv_dim, kv.v_at(il, h, w.row_slot[t0]), hd, t1 - t0, hd);
    }
    t0 = t1;
  }
}

void Model::finish(ForwardScratch& w, int64_t n, const ForwardOptions& opt, std::span<const int64_t> last_rows) const {
  const ModelConfig& c = config_;
  const int64_t n_embd = c.n_embd;
  float* x = w.x.data();    // [n, n_embd]
  float* xn = w.xn.data();  // [n, n_embd]
  // Rows are grouped by session in position order: a session's run ends at its last position.
  for (int64_t r = 0; r < n; ++r)
    if (r + 1 == n || w.row_session[r + 1] != w.row_session[r]) {
      KvCache& kv = w.row_session[r]->kv_;
      kv.advance(w.row_slot[r] + 1 - kv.length());
    }

  // Output: final norm, then the LM head only on the rows that need logits.
  const bool need_all_norm =
      opt.logits == LogitsMode::kAll ||
      std::find(opt.taps.begin(), opt.taps.end(), kTapFinalNorm) != opt.taps.end();
  if (need_all_norm) {
    be_->rms_norm_rows(x, weights_.output_norm, xn, n, n_embd, c.rms_eps);
    capture(w, n, opt, kTapFinalNorm, xn);
  }
  // Logits reach the sessions' host arrays once: written there directly when the backend's memory
  // is the host's and the rows are one session's contiguous run, else staged and copied.
  const bool single = w.row_session[0] == w.row_session[n - 1];
  const size_t row_bytes = sizeof(float) * (size_t)c.n_vocab;
  if (opt.logits == LogitsMode::kAll) {
    if (single && be_->host_memory()) {
      Session& s = *w.row_session[0];
      head_matmul(w, opt, xn, n, s.logits_.data() + w.row_out[0] * c.n_vocab, c.n_vocab);
    } else {
      if (w.logits.size() < (size_t)(n * c.n_vocab)) w.logits.resize((size_t)(n * c.n_vocab));
      head_matmul(w, opt, xn, n, w.logits.data(), c.n_vocab);
      if (single)
        be_->to_host(w.row_session[0]->logits_.data() + w.row_out[0] * c.n_vocab, w.logits.data(), row_bytes * n);
      else
        for (int64_t r = 0; r < n; ++r)
          be_->to_host(w.row_session[r]->logits_.data() + w.row_out[r] * c.n_vocab, w.logits.data() + r * c.n_vocab,
                       row_bytes);
    }
  } else if (opt.logits == LogitsMode::kLast && !last_rows.empty()) {
    // The final-normed last rows, gathered into the first rows of xn.
    const int64_t m = (int64_t)last_rows.size();
    for (int64_t i = 0; i < m; ++i)
      be_->rms_norm_rows(x + last_rows[i] * n_embd, weights_.output_norm, xn + i * n_embd, 1, n_embd, c.rms_eps);
    if (m == 1 && be_->host_memory()) {
      head_matmul(w, opt, xn, 1, w.row_session[last_rows[0]]->logits_.data(), c.n_vocab);
    } else {
      if (w.logits.size() < (size_t)(m * c.n_vocab)) w.logits.resize((size_t)(m * c.n_vocab));
      head_matmul(w, opt, xn, m, w.logits.data(), c.n_vocab);
      for (int64_t i = 0; i < m; ++i)
        be_->to_host(w.row_session[last_rows[i]]->logits_.data(), w.logits.data() + i * c.n_vocab, row_bytes);
    }
  }
}

void Model::head_matmul(ForwardScratch& w, const ForwardOptions& opt, const float* xn, int64_t m, float* y,
                        int64_t ldy) const {
  if (opt.argmax_only && argmax_head_ && be_->host_memory())
    argmax_head_->run(w.mm, xn, m, y, ldy, w.argmax);
  else
    be_->matmul(w.mm, weights_.output, xn, m, y, ldy);
}

void Model::project_qkv(ForwardScratch& w, const LayerWeights& L, const float* xn, int64_t n) const {
  const ModelConfig& c = config_;
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  if (be_->prepared_runs(L.wqkv, n)) {
    const int64_t ld = q_dim + 2 * kv_dim;
    float* f = w.fused_rows((size_t)(n * ld));  // [n, q_dim | kv_dim | kv_dim]
    be_->matmul(w.mm, L.wqkv, xn, n, f, ld);
    for (int64_t t = 0; t < n; ++t) {
      be_->copy(w.q.data() + t * q_dim, f + t * ld, sizeof(float) * q_dim);
      be_->copy(w.k.data() + t * kv_dim, f + t * ld + q_dim, sizeof(float) * kv_dim);
      be_->copy(w.v.data() + t * kv_dim, f + t * ld + q_dim + kv_dim, sizeof(float) * kv_dim);
    }
  } else {
    be_->matmul(w.mm, L.wq, xn, n, w.q.data(), q_dim);   // [n, n_head * hd]
    be_->matmul(w.mm, L.wk, xn, n, w.k.data(), kv_dim);  // [n, kv_dim]
    be_->matmul(w.mm, L.wv, xn, n, w.v.data(), kv_dim);  // [n, kv_dim]
  }
}

// Decode (one row) on several threads. A call per K/V head leaves the threads unevenly loaded when the
// heads do not divide among them: SmolLM2's 3 on 2 threads left one streaming two heads' K/V rows while
// the other streamed one, and Gemma 3's single head had both threads read all of it (its query heads
// split). From kSplitMinKeys keys, each head's keys (scores) and output columns (values) are shared
// out instead, so every thread reads an equal share of every head once; three joins a layer
// (kernels/attention.h, AttnSplit; the same bits as a call per head). On an Intel Xeon (family 6 model
// 207) one thread reads memory at about half the rate of two (BM_ReadBandwidth: 11.1 against 21.3
// GB/s), so a thread streaming two heads set the attention's time.
namespace {
constexpr int64_t kSplitMinKeys = 768;  // measured faster from 768 keys; at 512 the runs disagreed
constexpr int64_t kSplitMaxKvHeads = 16;
}  // namespace

bool Model::attention_split(ForwardScratch& w, int64_t il, int64_t n) const {
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim, group = c.n_head / c.n_head_kv;
  const int nt = w.pool ? w.pool->size() : 1;
  if (n != 1 || nt < 2 || c.n_head_kv % nt == 0 || c.n_head_kv > kSplitMaxKvHeads || w.row_n_anc[0] != 0 ||
      !be_->attention_split_ok(hd))
    return false;
  const KvCache& kv = w.row_session[0]->kv_;
  const int64_t pos = w.row_pos[0], first = kv.first_visible(il, pos), n_keys = pos - first + 1;
  if (n_keys < kSplitMinKeys) return false;
  // Per K/V head: scores [group, ctx], chunk sums [group, ctx / 8 + 1], maxima [nt, group]; per thread:
  // probabilities [group, ctx]. Sized for the longest context once.
  const int64_t ctx = std::max(w.max_ctx, n_keys);
  const int64_t per_head = group * ctx + group * (ctx / 8 + 1) + nt * group;
  const size_t need = (size_t)(c.n_head_kv * per_head + nt * group * ctx);
  if (w.attn_split.size() < need) w.attn_split.resize(need);
  float* buf = w.attn_split.data();
  // The values' columns of all heads (n_head_kv * hd, in 16-column chunks) in one range per thread, so a
  // thread reads whole V rows of most heads: a 64-byte half of a 128-byte row can bring the other half
  // along (the L2's adjacent-line prefetch), so with every head's columns halved every thread could read
  // every head's V.
  w.attn_split_cols.resize((size_t)(c.n_head_kv * (nt + 1)));
  const int64_t chunks = c.n_head_kv * hd / 16;
  kernels::AttnSplit s[kSplitMaxKvHeads];
  for (int64_t g = 0; g < c.n_head_kv; ++g) {
    int64_t* cols = w.attn_split_cols.data() + g * (nt + 1);
    for (int p = 0; p <= nt; ++p) cols[p] = std::clamp<int64_t>(16 * (chunks * p / nt) - g * hd, 0, hd);
    float* b = buf + g * per_head;
    s[g] = {w.q.data() + g * group * hd, (int)group, hd, kv.view(il, g), first, n_keys, nt, b,
            b + group * ctx + group * (ctx / 8 + 1), b + group * ctx, w.attn.data() + g * group * hd, cols};
  }
  int phase = 0;
  const ThreadPool::Job job = [&](int ti, int) {
    float* p = buf + c.n_head_kv * per_head + ti * group * ctx;
    for (int64_t g = 0; g < c.n_head_kv; ++g) be_->attention_split(s[g], phase, ti, p);
  };
  for (phase = 0; phase < 3; ++phase) w.pool->run(job);
  return true;
}

// Scaled dot-product attention of the n planned rows against their sessions' caches (MQA/GQA);
// numerics in kernels/attention.h. One job per (row, K/V head): heads sharing a K/V row read it once.
// When there are fewer such jobs than threads (decode: one row, 1-3 K/V heads), each K/V head's query
// heads are split into `split` parts so every thread works; a head's result does not depend on the
// heads computed with it (tests/unit/kernels/test_attention.cpp), so the output is the same. A decode
// row over a long context goes to attention_split instead (above), where that applies.
void Model::attention(ForwardScratch& w, int64_t il, int64_t n) const {
  if (attention_split(w, il, n)) return;
  const ModelConfig& c = config_;
  const int64_t hd = c.head_dim, q_dim = c.n_head * hd, group = c.n_head / c.n_head_kv;
  // A device backend (memory not the host's) takes every job from this thread: its calls queue kernels,
  // so host threads would only contend, and a split of the query heads would only add launches.
  ThreadPool* pool = be_->host_memory() ? w.pool : nullptr;
  const int64_t n_threads = pool ? pool->size() : 1, jobs = n * c.n_head_kv;
  const int64_t split = std::min<int64_t>(group, std::max<int64_t>(1, (n_threads + jobs - 1) / jobs));
  // With one part per job (every window of 2+ rows), each thread takes a contiguous run of jobs in
  // K/V-head-major order, so the rows after a head's first one find its K/V in this core's L2; a
  // strided deal sent the next row of a head to the other core. SmolLM2 after 700 tokens, medians of 5
  // alternating runs: verify(2) 5.76 -> 5.22 ms, verify(4) 7.41 -> 6.86 ms, verify(1) unchanged.
  // The runs are cut at equal shares of the keys read, not of the jobs: in a causal prefill row t reads
  // t + 1 keys, so equal counts of jobs left one thread with the cheap early rows and idle for ~30 % of
  // the attention's time (SmolLM2, 512 rows, 3 K/V heads: 164k against 229k keys).
  const int64_t total = jobs * split;
  const bool runs = split == 1;
  int64_t* cost = w.attn_cost.data();  // cost[t]: keys of rows < t, plus kJobKeys a job
  constexpr int64_t kJobKeys = 16;     // a job's fixed cost, in keys (the query rounding, the calls)
  if (runs) {
    cost[0] = 0;
    for (int64_t t = 0; t < n; ++t) {
      const KvCache& kv = w.row_session[t]->kv_;
      const int64_t keys = w.row_n_anc[t] > 0 ? w.row_slot[0] - kv.first_visible(il, w.row_slot[0]) + w.row_n_anc[t]
                                              : w.row_pos[t] - kv.first_visible(il, w.row_pos[t]) + 1;
      cost[t + 1] = cost[t] + keys + kJobKeys;
    }
  }
  // The first job of thread ti's run: where the keys before it reach ti / nt of all (K/V-head-major:
  // job g * n + t costs what row t does).
  auto run_start = [&](int ti, int nt) -> int64_t {
    if (ti >= nt) return total;
    const int64_t all = cost[n] * c.n_head_kv, target = all * ti / nt;
    const int64_t g = target / cost[n], rem = target - g * cost[n];
    const int64_t t = std::upper_bound(cost, cost + n + 1, rem) - cost - 1;  // the row whose span holds rem
    return std::min(total, g * n + t);
  };
  // Rows of one session and K/V head that follow each other in a thread's run (a prefill chunk, a
  // verify window) go to attention_rows together, which converts their keys once (same bits as a call
  // per row, kernels/attention.h); tree rows, and runs of fewer than the backend's attention_rows_min
  // (the CPU's: kernels::kRowsMin), a call each.
  auto groupable = [&](int64_t t) { return w.row_n_anc[t] == 0; };
  const int64_t rows_min = be_->attention_rows_min();
  auto job = [&](int ti, int nt) {
    float* scores = w.scores.data() + (size_t)ti * group * w.max_ctx;  // [group, max_ctx]
    const int64_t first = runs ? run_start(ti, nt) : ti, last = runs ? run_start(ti + 1, nt) : total;
    int64_t* rows_first = w.attn_rows_first.data() + (size_t)ti * n;  // [n] per thread
    int64_t* rows_keys = w.attn_rows_keys.data() + (size_t)ti * n;
    int64_t single_until = first;  // jobs before it belong to a group found too short: a call each
    for (int64_t idx = first; idx < last; idx += runs ? 1 : nt) {
      if (runs && idx >= single_until && groupable(idx % n)) {
        const int64_t t0 = idx % n, g = idx / n;
        int64_t end = idx + 1;  // rows t0 .. t0 + (end - idx) - 1 of head g
        while (end < last && end / n == g && groupable(end % n) &&
               w.row_session[end % n] == w.row_session[t0])
          ++end;
        const int64_t nr = end - idx;
        if (nr >= rows_min) {
          const KvCache& kv = w.row_session[t0]->kv_;
          for (int64_t r = 0; r < nr; ++r) {
            const int64_t pos = w.row_pos[t0 + r];
            rows_first[r] = kv.first_visible(il, pos);
            rows_keys[r] = pos - rows_first[r] + 1;
          }
          const kernels::AttnRows rows{w.q.data() + t0 * q_dim + g * group * hd, q_dim,
                                       w.attn.data() + t0 * q_dim + g * group * hd, q_dim, rows_first, rows_keys,
                                       (int)nr};
          be_->attention_rows(rows, (int)group, hd, kv.view(il, g), scores);
          idx = end - 1;
          continue;
        }
        single_until = end;
      }
      const int64_t t = runs ? idx % n : idx / (c.n_head_kv * split);
      const int64_t g = runs ? idx / n : idx / split % c.n_head_kv, part = runs ? 0 : idx % split;
      const int64_t h0 = group * part / split, h1 = group * (part + 1) / split;  // query heads of this part
      const KvCache& kv = w.row_session[t]->kv_;
      const int64_t pos = w.row_pos[t], lo = kv.first_visible(il, pos);
      const int64_t q_off = t * q_dim + (g * group + h0) * hd;
      kernels::KvView view = kv.view(il, g);
      int64_t n_main = pos - lo + 1;
      if (const int64_t na = w.row_n_anc[t]; na > 0) {  // a tree row: the committed tokens, then its ancestors
        const int64_t committed = w.row_slot[0];  // one session; row 0 (the root) sits right after its tokens
        const int64_t skip = std::max<int64_t>(0, lo - committed);  // ancestors at positions out of the window
        n_main = std::max<int64_t>(0, committed - lo);
        view.extra = w.row_anc.data() + t * n + skip;
        view.n_extra = na - skip;
      }
      be_->attention(w.q.data() + q_off, (int)(h1 - h0), hd, view, lo, n_main, scores, w.attn.data() + q_off);
    }
  };
  if (pool) pool->run(job); else job(0, 1);
}

}  // namespace dspark::model
