// DSpark drafter vs the synthetic goldens (tests/goldens/dspark_synth, scripts/dspark_ref.py,
// float64). Every variant is replayed step by step (prefill / draft / commit) with the Markov fast
// path off and on: draft tokens exactly, logits / confidences / K-V within the tolerances below
// (the goldens README: an f32 implementation lands within ~1e-5; every wrong convention moves
// logits by >= 0.01). Loosen only with cause.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "speculative/drafter_dspark.h"

namespace dspark::speculative {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kLogitTol = 1e-3f;   // base and Markov-corrected logits
constexpr float kConfTol = 1e-4f;    // confidences (and their logits)
constexpr float kHiddenTol = 1e-4f;  // post-final-norm rows
constexpr float kKvTol = 1e-4f;      // layer-0 context K / V

const fs::path kSynthDir = fs::path(DSPARK_SOURCE_DIR) / "tests/goldens/dspark_synth";

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct Golden {
  fs::path dir;
  json j;
  std::vector<uint8_t> bin;
  std::vector<float> target_embed;  // [V, H] for e/f

  template <class T>
  std::vector<T> arr(const json& d) const {
    int64_t n = 1;
    for (auto s : d["shape"]) n *= s.get<int64_t>();
    std::vector<T> out((size_t)n);
    std::memcpy(out.data(), bin.data() + d["offset"].get<size_t>(), (size_t)n * sizeof(T));
    return out;
  }
};

Golden load_golden(const fs::path& dir) {
  Golden g;
  g.dir = dir;
  std::ifstream in(dir / "golden.json");
  g.j = json::parse(in);
  g.bin = read_file(dir / g.j["bin"].get<std::string>());
  if (g.j.contains("target_embed")) {
    std::ifstream tin(dir / g.j["target_embed"].get<std::string>());
    const json t = json::parse(tin);
    const auto raw = read_file(dir / t["file"].get<std::string>());
    g.target_embed.resize(raw.size() / 4);
    std::memcpy(g.target_embed.data(), raw.data(), raw.size());
  }
  return g;
}

std::vector<fs::path> variants() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kSynthDir))
    if (e.is_directory() && fs::exists(e.path() / "golden.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Target stand-in: shape from the golden dims, tables from target_embed.bin as F32 QMatrix.
struct FakeTarget {
  TargetShape shape;
  TargetTables tables;
  bool has_tables = false;
};

FakeTarget fake_target(const Golden& g) {
  const json& d = g.j["dims"];
  FakeTarget t;
  std::ifstream cin(g.dir / "config.json");
  const json cfg = json::parse(cin);
  t.shape = {cfg["num_target_layers"].get<int64_t>(), d["H"].get<int64_t>(), d["V"].get<int64_t>()};
  if (!g.target_embed.empty()) {
    const int64_t V = d["V"], H = d["H"];
    const kernels::QMatrix q{DType::F32, V, H, g.target_embed.data(), (size_t)H * 4};
    t.tables = {q, q, V, H};
    t.has_tables = true;
  }
  return t;
}

// The golden's taps [n, m*H] split into TapRows (one [n, H] array per tap point).
struct Taps {
  std::vector<std::vector<float>> cols;
  TapRows rows;
};
Taps split_taps(const std::vector<float>& flat, int64_t n, int64_t m, int64_t H) {
  Taps t;
  t.cols.assign((size_t)m, std::vector<float>((size_t)(n * H)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < m; ++k)
      std::memcpy(&t.cols[(size_t)k][(size_t)(i * H)], &flat[(size_t)((i * m + k) * H)], (size_t)H * 4);
  for (auto& c : t.cols) t.rows.taps.push_back(c.data());
  t.rows.n_rows = n;
  t.rows.n_embd = H;
  return t;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::unique_ptr<DSparkDrafter> make_drafter(const Golden& g, const DSparkOptions& opt, ThreadPool* pool = nullptr,
                                            std::optional<kernels::Isa> isa = {}) {
  const FakeTarget t = fake_target(g);
  auto d = DSparkDrafter::load(g.dir.string(), t.shape, t.has_tables ? &t.tables : nullptr, opt, pool, isa);
  EXPECT_TRUE(d.is_ok()) << d.message();
  return d.is_ok() ? std::move(d.value()) : nullptr;
}

// Replays every case; *stats receives the fast-path counters.
void replay(const Golden& g, bool fast, MarkovFastPathStats* stats, ThreadPool* pool = nullptr,
            std::optional<kernels::Isa> isa = {}) {
  const json& d = g.j["dims"];
  const int64_t H = d["H"], m = d["m"], vd = d["V_draft"], gamma = d["gamma"], hd = d["hd"], nkv = d["nKV"];
  DSparkOptions opt;
  opt.markov_fast_path = fast;
  opt.report_confidence = true;
  opt.fast_path_top_k = 8;  // V_d is 96..192 here; a real vocabulary would use 64
  auto dr = make_drafter(g, opt, pool, isa);
  ASSERT_TRUE(dr);
  if (isa) {
    EXPECT_EQ(dr->model().isa(), std::min(*isa, kernels::detect_isa()));
  }
  const std::string variant = g.j["variant"];
  for (const json& c : g.j["cases"]) {
    const std::string where = variant + "/" + c["name"].get<std::string>() + (fast ? " (fast)" : " (full)");
    for (const json& st : c["steps"]) {
      const std::string op = st["op"];
      if (op == "prefill" || op == "commit") {
        const int64_t n = st["n_rows"];
        Taps t = split_taps(g.arr<float>(st["taps"]), n, m, H);
        std::vector<int32_t> toks((size_t)n, 0);
        if (op == "commit") toks = st["committed"].get<std::vector<int32_t>>();
        const Status s = op == "prefill" ? dr->begin(toks, t.rows) : dr->commit(toks, st["pos"].get<int64_t>(), t.rows);
        ASSERT_TRUE(s.is_ok()) << where << ": " << s.message();
        continue;
      }
      DraftRequest req;
      req.pending = st["anchor"];
      req.pos = st["pos"];
      req.max_n = (int)gamma;
      DraftResult out;
      const Status s = dr->draft(req, &out);
      ASSERT_TRUE(s.is_ok()) << where << ": " << s.message();
      const json& a = st["arrays"];
      EXPECT_EQ(out.tokens, st["tokens"].get<std::vector<int32_t>>()) << where;
      const auto base = g.arr<float>(a["base_logits"]);
      const auto logits = g.arr<float>(a["logits"]);
      const auto hidden = g.arr<float>(a["hidden"]);
      EXPECT_LT(max_abs_diff(dr->last_hidden(), hidden.data(), hidden.size()), kHiddenTol) << where;
      EXPECT_LT(max_abs_diff(dr->last_base_logits(), base.data(), base.size()), kLogitTol) << where;
      for (int k = 0; k < (int)gamma; ++k) {
        const float* row = dr->last_logits(k);
        if (!fast) {
          ASSERT_NE(row, nullptr) << where << " slot " << k;
        }
        if (row) {
          EXPECT_LT(max_abs_diff(row, &logits[(size_t)(k * vd)], (size_t)vd), kLogitTol) << where << " slot " << k;
        }
      }
      if (a.contains("confidence")) {
        const auto conf = g.arr<float>(a["confidence"]);
        const auto zl = g.arr<float>(a["conf_logits"]);
        ASSERT_EQ(out.confidence.size(), conf.size()) << where;
        EXPECT_LT(max_abs_diff(out.confidence.data(), conf.data(), conf.size()), kConfTol) << where;
        EXPECT_LT(max_abs_diff(dr->last_conf_logits().data(), zl.data(), zl.size()), kConfTol) << where;
      } else {
        EXPECT_TRUE(out.confidence.empty()) << where;
      }
      if (a.contains("layer0_ctx_k")) {
        const auto gk = g.arr<float>(a["layer0_ctx_k"]), gv = g.arr<float>(a["layer0_ctx_v"]);
        const int64_t len = dr->context_len();
        ASSERT_EQ((int64_t)gk.size(), nkv * len * hd) << where;
        const auto& k = dr->context_k(0);
        const auto& v = dr->context_v(0);
        float dk = 0, dv = 0;
        for (int64_t h = 0; h < nkv; ++h)
          for (int64_t p = 0; p < len; ++p)
            for (int64_t e = 0; e < hd; ++e) {
              const size_t ours = (size_t)((p * nkv + h) * hd + e), ref = (size_t)((h * len + p) * hd + e);
              dk = std::max(dk, std::fabs(k[ours] - gk[ref]));
              dv = std::max(dv, std::fabs(v[ours] - gv[ref]));
            }
        EXPECT_LT(dk, kKvTol) << where;
        EXPECT_LT(dv, kKvTol) << where;
      }
    }
  }
  *stats = dr->fast_path_stats();
}

TEST(DSparkGolden, AllVariantsFound) {
  const auto v = variants();
  EXPECT_GE(v.size(), 6u);
}

TEST(DSparkGolden, ReplayFullProduct) {
  for (const auto& dir : variants()) {
    SCOPED_TRACE(dir.filename().string());
    MarkovFastPathStats st;
    replay(load_golden(dir), false, &st);
    EXPECT_EQ(st.hits, 0u);
  }
}

// The backend's instruction set reaches the drafter (`--backend cpu-scalar` / `cpu-avx2`), and every
// set gives the goldens.
TEST(DSparkGolden, ReplayOnEveryIsa) {
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2}) {
    if (isa > kernels::detect_isa()) continue;
    for (const auto& dir : variants()) {
      SCOPED_TRACE(dir.filename().string() + (isa == kernels::Isa::kScalar ? " scalar" : " avx2"));
      MarkovFastPathStats st;
      replay(load_golden(dir), false, &st, nullptr, isa);
    }
  }
}

TEST(DSparkGolden, ReplayFastPath) {
  uint64_t slots = 0, hits = 0, saved = 0, full = 0;
  for (const auto& dir : variants()) {
    SCOPED_TRACE(dir.filename().string());
    MarkovFastPathStats st;
    replay(load_golden(dir), true, &st);
    EXPECT_EQ(st.hits + st.fallbacks, st.slots);
    slots += st.slots;
    hits += st.hits;
    saved += st.macs_saved();
    full += st.macs_full;
    std::printf("[fast path] %-24s slots %3llu hits %3llu (%.0f %%) macs saved %llu of %llu\n",
                dir.filename().string().c_str(), (unsigned long long)st.slots, (unsigned long long)st.hits,
                100.0 * st.hit_rate(), (unsigned long long)st.macs_saved(), (unsigned long long)st.macs_full);
  }
  std::printf("[fast path] total slots %llu hits %llu, macs saved %llu of %llu\n", (unsigned long long)slots,
              (unsigned long long)hits, (unsigned long long)saved, (unsigned long long)full);
  EXPECT_GT(slots, 0u);
}

TEST(DSparkGolden, ReplayThreaded) {
  ThreadPool pool(2);
  for (const char* v : {"a_vanilla_conf_bf16", "c_rnn_noconf_f16"}) {
    const fs::path dir = kSynthDir / v;
    SCOPED_TRACE(v);
    MarkovFastPathStats st;
    replay(load_golden(dir), true, &st, &pool);
  }
}

// Runs the first case (prefill + first draft) of a variant with the given options.
DraftResult first_draft(const Golden& g, const DSparkOptions& opt, int max_n, float temperature = 0, Rng* rng = nullptr,
                        DSparkDrafter** keep = nullptr, std::unique_ptr<DSparkDrafter>* holder = nullptr) {
  const json& d = g.j["dims"];
  std::unique_ptr<DSparkDrafter> dr = make_drafter(g, opt);
  DraftResult out;
  if (!dr) return out;
  const json& c = g.j["cases"][0];
  const json& pre = c["steps"][0];
  const json& dra = c["steps"][1];
  const int64_t n = pre["n_rows"];
  Taps t = split_taps(g.arr<float>(pre["taps"]), n, d["m"], d["H"]);
  std::vector<int32_t> toks((size_t)n, 0);
  EXPECT_TRUE(dr->begin(toks, t.rows).is_ok());
  DraftRequest req{dra["anchor"].get<int32_t>(), dra["pos"].get<int64_t>(), max_n, {.temperature = temperature}, rng};
  const Status s = dr->draft(req, &out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (keep && holder) {
    *keep = dr.get();
    *holder = std::move(dr);
  }
  return out;
}

TEST(DSparkDraft, ThresholdTruncates) {
  const Golden g = load_golden(kSynthDir / "a_vanilla_conf_bf16");
  const auto golden_conf = g.j["cases"][0]["steps"][1]["confidence"].get<std::vector<float>>();
  const auto golden_tok = g.j["cases"][0]["steps"][1]["tokens"].get<std::vector<int32_t>>();
  const int gamma = (int)golden_tok.size();
  DSparkOptions opt;
  opt.threshold = 0.0f;
  EXPECT_EQ(first_draft(g, opt, gamma).tokens.size(), (size_t)gamma);  // 0: full block, no confidence
  EXPECT_TRUE(first_draft(g, opt, gamma).confidence.empty());
  opt.threshold = 1.0f;  // every c_k < 1: empty draft
  DraftResult r = first_draft(g, opt, gamma);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.confidence.size(), 1u);
  for (float thr : {0.1f, 0.4f, 0.5f, 0.6f, 0.65f, 0.9f}) {
    int want = 0;
    while (want < gamma && golden_conf[(size_t)want] >= thr) ++want;
    opt.threshold = thr;
    r = first_draft(g, opt, gamma);
    EXPECT_EQ(r.tokens.size(), (size_t)want) << "threshold " << thr;
    EXPECT_EQ(r.tokens, std::vector<int32_t>(golden_tok.begin(), golden_tok.begin() + want)) << "threshold " << thr;
  }
}

TEST(DSparkDraft, GammaAndMaxN) {
  const Golden g = load_golden(kSynthDir / "b_gated_conf_f32");
  const auto golden_tok = g.j["cases"][0]["steps"][1]["tokens"].get<std::vector<int32_t>>();
  DSparkOptions opt;
  opt.gamma = 2;
  EXPECT_EQ(first_draft(g, opt, 7).tokens, std::vector<int32_t>(golden_tok.begin(), golden_tok.begin() + 2));
  opt.gamma = 0;
  EXPECT_EQ(first_draft(g, opt, 3).tokens, std::vector<int32_t>(golden_tok.begin(), golden_tok.begin() + 3));
  EXPECT_TRUE(first_draft(g, opt, 0).tokens.empty());
}

// At T > 0, q_k is the Markov-corrected softmax(s_k / T) over the draft vocabulary mapped to target
// ids; slot 0's s_0 does not depend on earlier samples, so it must match the golden logits.
TEST(DSparkDraft, SampledDraftReportsCorrectedQ) {
  for (const char* v : {"a_vanilla_conf_bf16", "c_rnn_noconf_f16", "f_d2t_bf16"}) {
    SCOPED_TRACE(v);
    const Golden g = load_golden(kSynthDir / v);
    const json& d = g.j["dims"];
    const int64_t vd = d["V_draft"];
    const float T = 0.7f;
    Rng rng(123);
    DSparkOptions opt;
    const DraftResult r = first_draft(g, opt, (int)d["gamma"], T, &rng);
    ASSERT_EQ(r.tokens.size(), (size_t)d["gamma"].get<int>());
    ASSERT_EQ(r.q.size(), r.tokens.size());
    for (size_t k = 0; k < r.q.size(); ++k) {
      double sum = 0, p_tok = 0;
      for (const auto& [id, p] : r.q[k]) {
        sum += p;
        if (id == r.tokens[k]) p_tok = p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-4);
      EXPECT_GT(p_tok, 0.0);
    }
    // slot 0 vs softmax(golden logits / T)
    const auto logits = g.arr<float>(g.j["cases"][0]["steps"][1]["arrays"]["logits"]);
    double mx = -1e30, z = 0;
    for (int64_t j = 0; j < vd; ++j) mx = std::max(mx, (double)logits[(size_t)j]);
    for (int64_t j = 0; j < vd; ++j) z += std::exp((logits[(size_t)j] - mx) / T);
    std::vector<int32_t> d2t;
    for (int64_t j = 0; j < vd; ++j) d2t.push_back((int32_t)j);
    if (v == std::string("f_d2t_bf16")) {
      // q ids must all be d2t entries: collect them from the q list itself (ascending in j).
      ASSERT_EQ(r.q[0].size(), (size_t)vd);
      for (int64_t j = 0; j < vd; ++j) d2t[(size_t)j] = r.q[0][(size_t)j].first;
      std::set<int32_t> uniq(d2t.begin(), d2t.end());
      EXPECT_EQ(uniq.size(), (size_t)vd);
    }
    ASSERT_EQ(r.q[0].size(), (size_t)vd);
    for (int64_t j = 0; j < vd; ++j) {
      EXPECT_EQ(r.q[0][(size_t)j].first, d2t[(size_t)j]);
      EXPECT_NEAR(r.q[0][(size_t)j].second, std::exp((logits[(size_t)j] - mx) / T) / z, 1e-5) << j;
    }
  }
}

// With the fast path, a greedy run over many anchors must give the same tokens as the full product.
TEST(DSparkDraft, FastPathMatchesFullProduct) {
  for (const char* v : {"a_vanilla_conf_bf16", "b_gated_conf_f32", "c_rnn_noconf_f16", "f_d2t_bf16"}) {
    SCOPED_TRACE(v);
    const Golden g = load_golden(kSynthDir / v);
    const json& d = g.j["dims"];
    DSparkOptions full, fast;
    full.markov_fast_path = false;
    fast.fast_path_top_k = 4;
    std::unique_ptr<DSparkDrafter> hf, hs;
    DSparkDrafter *df = nullptr, *ds = nullptr;
    first_draft(g, full, 1, 0, nullptr, &df, &hf);
    first_draft(g, fast, 1, 0, nullptr, &ds, &hs);
    ASSERT_TRUE(df && ds);
    const int64_t pos = df->context_len();
    for (int32_t anchor = 0; anchor < (int32_t)d["V"].get<int64_t>(); anchor += 3) {
      DraftResult a, b;
      const DraftRequest req{anchor, pos, (int)d["gamma"], {}, nullptr};
      ASSERT_TRUE(df->draft(req, &a).is_ok());
      ASSERT_TRUE(ds->draft(req, &b).is_ok());
      EXPECT_EQ(a.tokens, b.tokens) << "anchor " << anchor;
    }
    const auto& st = ds->fast_path_stats();
    std::printf("[fast path K=4] %s: %llu/%llu hits\n", v, (unsigned long long)st.hits, (unsigned long long)st.slots);
  }
}

}  // namespace
}  // namespace dspark::speculative

namespace dspark::speculative {
namespace {

// Committed rows wait until a draft needs them and are then projected together: the context is
// bitwise the one built row by row (projections are batch-invariant), and so is the next draft.
TEST(DSparkDraft, DeferredContextEqualsRowByRow) {
  const Golden g = load_golden(variants().front());
  const json& d = g.j["dims"];
  const json* prep = nullptr;  // the longest prefill of the golden's cases
  for (const json& c : g.j["cases"])
    for (const json& st : c["steps"])
      if (st["op"] == "prefill" && (!prep || st["n_rows"] > (*prep)["n_rows"])) prep = &st;
  ASSERT_TRUE(prep);
  const json& pre = *prep;
  const int64_t n = pre["n_rows"], m = d["m"], H = d["H"];
  ASSERT_GE(n, 4);
  const std::vector<float> flat = g.arr<float>(pre["taps"]);
  auto rows = [&](int64_t r0, int64_t k) {
    return split_taps(std::vector<float>(flat.begin() + r0 * m * H, flat.begin() + (r0 + k) * m * H), k, m, H);
  };
  DSparkOptions opt;
  auto whole = make_drafter(g, opt), stepped = make_drafter(g, opt), flushed = make_drafter(g, opt);
  ASSERT_TRUE(whole && stepped && flushed);
  Taps all = rows(0, n), head = rows(0, n - 3);
  ASSERT_TRUE(whole->begin(std::vector<int32_t>((size_t)n, 0), all.rows).is_ok());
  ASSERT_TRUE(stepped->begin(std::vector<int32_t>((size_t)(n - 3), 0), head.rows).is_ok());
  ASSERT_TRUE(flushed->begin(std::vector<int32_t>((size_t)(n - 3), 0), head.rows).is_ok());
  for (int64_t i = n - 3; i < n; ++i) {
    Taps one = rows(i, 1);
    ASSERT_TRUE(stepped->commit(std::vector<int32_t>{0}, i, one.rows).is_ok());
    ASSERT_TRUE(flushed->commit(std::vector<int32_t>{0}, i, one.rows).is_ok());
    EXPECT_EQ(stepped->context_len(), i + 1);
    (void)flushed->context_k(0);  // projects now: one row at a time
  }
  for (int64_t l = 0; l < (int64_t)d["n_layers"]; ++l) {
    EXPECT_EQ(stepped->context_k(l), whole->context_k(l)) << "layer " << l;
    EXPECT_EQ(stepped->context_v(l), whole->context_v(l)) << "layer " << l;
    EXPECT_EQ(flushed->context_k(l), whole->context_k(l)) << "layer " << l;
  }
  const DraftRequest req{3, n, (int)d["gamma"], {}, nullptr};
  DraftResult a, b;
  ASSERT_TRUE(whole->draft(req, &a).is_ok());
  ASSERT_TRUE(stepped->draft(req, &b).is_ok());
  EXPECT_EQ(a.tokens, b.tokens);
}

}  // namespace
}  // namespace dspark::speculative
