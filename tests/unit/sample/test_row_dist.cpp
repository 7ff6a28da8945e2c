// RowDist, the O(V) sampling path, against its oracles: distribution_reference (the same
// distribution as a list, same canonical order) and accept_rejection_ref (the acceptance rule over
// explicit lists). Plus chi-square tests of draws under top-k, top-p and min-p.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "sample/sampler.h"
#include "speculative/verify.h"

namespace dspark::sample {
namespace {

// Probabilities: libmvec exp (a few ulp) and f32 chunk sums vs std::exp and a double sum.
constexpr double kTolProbRel = 1e-5;
constexpr double kTolProbAbs = 1e-12;
// Seeded draws: over kDraws, at most this many land on a list neighbour of the reference's pick
// (the two CDFs differ by ~1e-6 after thousands of near-equal terms on flat rows).
constexpr int kDraws = 200;
constexpr int kMaxBoundaryDraws = 2;

// Chi-square critical value at p = 0.001 (Wilson-Hilferty approximation).
double chi2_critical(int dof) {
  const double z = 3.09, a = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// kNatural is flat for a 262k vocabulary (its nucleus holds most tokens); kLm has the few strong
// candidates of a language model's row.
enum class Shape { kNatural, kFlat, kPeaky, kWide, kLm };

std::vector<float> make_logits(Shape shape, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const float sigma = shape == Shape::kFlat ? 0.5f : shape == Shape::kWide ? 10.0f : 2.0f;
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x((size_t)n);
  for (auto& v : x) v = nd(rng);
  if (shape == Shape::kNatural) {  // a few strong candidates, like a language model's row
    x[(size_t)(rng() % n)] += 9.0f;
    x[(size_t)(rng() % n)] += 7.0f;
    x[(size_t)(rng() % n)] += 6.5f;
  }
  if (shape == Shape::kPeaky) x[(size_t)(rng() % n)] += 30.0f;
  if (shape == Shape::kLm)
    for (float bump : {20.0f, 18.5f, 17.0f, 16.0f}) x[(size_t)(rng() % n)] += bump;
  return x;
}

std::vector<SamplerConfig> config_grid() {
  std::vector<SamplerConfig> out;
  for (float t : {0.6f, 1.0f, 1.7f})
    for (int k : {0, 1, 40, 3000})
      for (float p : {1.0f, 0.95f, 0.5f})
        for (float mp : {0.0f, 0.05f}) out.push_back({.temperature = t, .top_k = k, .top_p = p, .min_p = mp});
  out.push_back({.temperature = 0.0f});
  return out;
}

std::string describe(const SamplerConfig& c) {
  return "T " + std::to_string(c.temperature) + " top_k " + std::to_string(c.top_k) + " top_p " +
         std::to_string(c.top_p) + " min_p " + std::to_string(c.min_p);
}

void expect_same_list(const std::vector<TokenProb>& got, const std::vector<TokenProb>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].id, want[i].id) << what << " at " << i;
    ASSERT_NEAR(got[i].p, want[i].p, kTolProbRel * want[i].p + kTolProbAbs) << what << " at " << i;
  }
}

TEST(RowDist, MatchesReferenceOverConfigsAndShapes) {
  const int64_t n = 20000;
  RowDist row;
  std::vector<TokenProb> list;
  int dense = 0, sparse = 0;
  for (Shape shape : {Shape::kNatural, Shape::kFlat, Shape::kPeaky, Shape::kWide}) {
    const std::vector<float> x = make_logits(shape, n, 10 + (uint32_t)shape);
    for (const SamplerConfig& cfg : config_grid()) {
      const std::string what = describe(cfg) + " shape " + std::to_string((int)shape);
      row.build(cfg, x.data(), n);
      (row.dense() ? dense : sparse)++;
      row.to_list(&list);
      const std::vector<TokenProb> want = distribution_reference(cfg, x.data(), n);
      expect_same_list(list, want, what);
      for (const TokenProb& tp : want)
        ASSERT_NEAR(row.prob(tp.id), tp.p, kTolProbRel * tp.p + kTolProbAbs) << what;
      // Seeded draws pick what the reference's inverse CDF picks for the same uniforms, except
      // where u falls within the rounding of a CDF boundary: then a neighbour in the list.
      Rng a(7), b(7);
      int off = 0;
      for (int i = 0; i < kDraws; ++i) {
        const int32_t got = row.draw(a), ref = draw(want, b);
        if (got == ref) continue;
        ++off;
        auto pos = [&](int32_t id) {
          return std::find_if(want.begin(), want.end(), [&](const TokenProb& t) { return t.id == id; }) - want.begin();
        };
        ASSERT_LE(std::abs(pos(got) - pos(ref)), 1) << what << " draw " << i;
      }
      ASSERT_LE(off, kMaxBoundaryDraws) << what;
    }
  }
  EXPECT_GT(dense, 0);
  EXPECT_GT(sparse, 0);
}

// The passes split over a pool give bitwise the result of one thread.
TEST(RowDist, PoolSplitIsBitwiseSerial) {
  const int64_t n = 262144;
  ThreadPool pool(3);
  RowDist one, many;
  std::vector<TokenProb> a, b;
  const std::vector<float> x = make_logits(Shape::kLm, n, 21);
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 0.7f}, SamplerConfig{.temperature = 0.7f, .top_p = 0.95f},
                            SamplerConfig{.temperature = 1.0f, .top_k = 40, .min_p = 0.02f}}) {
    one.build(cfg, x.data(), n);
    many.build(cfg, x.data(), n, &pool);
    one.to_list(&a);
    many.to_list(&b);
    ASSERT_EQ(a.size(), b.size()) << describe(cfg);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].id, b[i].id);
      ASSERT_EQ(a[i].p, b[i].p);
    }
    Rng r1(3), r2(3);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(one.draw(r1), many.draw(r2));
  }
}

TEST(RowDist, FullVocabularyRows) {
  const int64_t n = 262144;
  RowDist row;
  std::vector<TokenProb> list;
  const std::vector<float> x = make_logits(Shape::kNatural, n, 3);
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 0.7f}, SamplerConfig{.temperature = 0.7f, .top_p = 0.95f},
                            SamplerConfig{.temperature = 1.0f, .top_k = 40, .top_p = 0.9f, .min_p = 0.02f}}) {
    row.build(cfg, x.data(), n);
    row.to_list(&list);
    expect_same_list(list, distribution_reference(cfg, x.data(), n), describe(cfg));
  }
}

// Draws follow the reference probabilities (tokens expected >= 5 times get a bin; the rest pool).
void expect_draws_follow(Sampler& s, const std::vector<float>& x, const std::vector<TokenProb>& want, int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) counts[s.sample(x.data(), (int64_t)x.size())]++;
  double chi2 = 0, rest_expect = 0;
  int dof = -1, rest_count = 0;
  std::map<int32_t, double> p;
  for (const TokenProb& tp : want) p[tp.id] = tp.p;
  for (const auto& [id, c] : counts) ASSERT_TRUE(p.count(id)) << "drew token " << id << " outside the distribution";
  for (const auto& [id, pr] : p) {
    const int c = counts.count(id) ? counts[id] : 0;
    if (draws * pr >= 5) {
      chi2 += std::pow(c - draws * pr, 2) / (draws * pr);
      ++dof;
    } else {
      rest_expect += draws * pr;
      rest_count += c;
    }
  }
  if (rest_expect > 0) {
    chi2 += std::pow(rest_count - rest_expect, 2) / rest_expect;
    ++dof;
  }
  if (dof < 1) return;  // a single survivor: the membership check above is the test
  EXPECT_LT(chi2, chi2_critical(dof)) << describe(s.config()) << " dof " << dof;
}

TEST(RowDist, DrawsFollowTruncatedDistributions) {
  const std::vector<float> x = {2.0f, 1.5f, 1.4f, 0.9f, 0.3f, 0.0f, -0.5f, -1.0f, -2.0f, -4.0f};
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 0.8f, .top_k = 3}, SamplerConfig{.temperature = 0.8f, .top_p = 0.8f},
                            SamplerConfig{.temperature = 1.2f, .min_p = 0.2f},
                            SamplerConfig{.temperature = 1.0f, .top_k = 6, .top_p = 0.9f, .min_p = 0.1f},
                            SamplerConfig{.temperature = 1.0f}}) {
    cfg.seed = 17;
    Sampler s(cfg);
    expect_draws_follow(s, x, distribution_reference(cfg, x.data(), (int64_t)x.size()), 20000);
  }
  // A full vocabulary row, dense (temperature only) and through top-p.
  const std::vector<float> big = make_logits(Shape::kLm, 262144, 9);
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 0.7f, .seed = 3}, SamplerConfig{.temperature = 0.7f, .top_p = 0.95f, .seed = 4}}) {
    Sampler s(cfg);
    expect_draws_follow(s, big, distribution_reference(cfg, big.data(), (int64_t)big.size()), 5000);
  }
}

// accept_rejection over RowDist rows against accept_rejection_ref over reference lists: the same
// random numbers give the same decision and the same correction/bonus token.
TEST(RowDist, RejectionAcceptMatchesListOracle) {
  const int64_t n = 6000;
  const int d = 3;
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 0.8f}, SamplerConfig{.temperature = 0.8f, .top_p = 0.9f},
                            SamplerConfig{.temperature = 1.0f, .top_k = 20, .min_p = 0.05f}}) {
    std::vector<std::vector<float>> rows;
    std::vector<std::vector<TokenProb>> ref;
    for (int i = 0; i <= d; ++i) {
      rows.push_back(make_logits(Shape::kNatural, n, 100 + i));
      ref.push_back(distribution_reference(cfg, rows.back().data(), n));
    }
    Sampler s(cfg);
    std::mt19937 gen(5);
    int mismatches = 0, trials = 0, rejections = 0;
    for (int q_kind = 0; q_kind < 4; ++q_kind) {
      for (int rep = 0; rep < 150; ++rep) {
        // Drafts and their q: one-hot on the target's favourite, one-hot on a random token,
        // a sparse q of 50 tokens, or q concentrated on the target's top 3.
        std::vector<int32_t> drafts;
        std::vector<speculative::SparseDist> q;
        for (int i = 0; i < d; ++i) {
          speculative::SparseDist qi;
          if (q_kind == 0) qi = {{ref[(size_t)i][0].id, 1.0f}};
          if (q_kind == 1) qi = {{(int32_t)(gen() % n), 1.0f}};
          if (q_kind == 2) {
            double tot = 0;
            std::vector<double> w;
            std::map<int32_t, int> seen;
            while ((int)seen.size() < 50) seen[(int32_t)(gen() % n)] = 1;
            seen[ref[(size_t)i][0].id] = 1;
            for (size_t j = 0; j < seen.size(); ++j) w.push_back(1.0 + gen() % 10), tot += w.back();
            size_t j = 0;
            for (auto& kv : seen) qi.emplace_back(kv.first, (float)(w[j++] / tot));
          }
          if (q_kind == 3)
            for (int j = 0; j < 3 && j < (int)ref[(size_t)i].size(); ++j) qi.emplace_back(ref[(size_t)i][(size_t)j].id, 1.0f / 3);
          drafts.push_back(qi[gen() % qi.size()].first);
          q.push_back(std::move(qi));
        }
        Rng a((uint64_t)rep * 31 + (uint64_t)q_kind), b((uint64_t)rep * 31 + (uint64_t)q_kind);
        const speculative::Acceptance fast = speculative::accept_rejection(
            [&](int i) -> const RowDist& { return s.row(rows[(size_t)i].data(), n); }, drafts, q, a);
        const speculative::Acceptance slow = speculative::accept_rejection_ref(ref, drafts, q, b);
        ++trials;
        rejections += fast.n_accept < d;
        mismatches += fast.n_accept != slow.n_accept || fast.next != slow.next;
      }
    }
    EXPECT_EQ(mismatches, 0) << describe(cfg) << " over " << trials << " trials";
    EXPECT_GT(rejections, trials / 10) << "the residual path must be exercised";
  }
}

TEST(RowDist, ResidualExcludesAOneHotDraft) {
  // p over 3 tokens; q one-hot on the favourite: a residual draw never returns it.
  const std::vector<float> x = {1.0f, 0.0f, -1.0f};
  for (SamplerConfig cfg : {SamplerConfig{.temperature = 1.0f}, SamplerConfig{.temperature = 1.0f, .top_p = 0.99f}}) {
    RowDist row;
    row.build(cfg, x.data(), 3);
    const std::vector<IdProb> q = {{0, 1.0f}};
    Rng rng(1);
    std::map<int32_t, int> counts;
    for (int i = 0; i < 6000; ++i) counts[row.draw_residual(q, rng)]++;
    EXPECT_EQ(counts[0], 0);
    // The residual is p restricted to {1, 2}: ratio e^1.
    EXPECT_NEAR((double)counts[1] / counts[2], std::exp(1.0), 0.25);
  }
}

}  // namespace
}  // namespace dspark::sample
