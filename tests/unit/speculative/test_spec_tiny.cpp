// The speculative loop on a tiny random Gemma 3 target: lossless at temperature 0 for every
// drafter kind and gamma, self-drafting accepts everything, the KV length tracks the committed
// tokens, and at temperature > 0 the emitted tokens follow the target's distribution.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "../model/tiny_gemma3.h"
#include "../tokenizer/tiny_vocab.h"
#include "generate/generate.h"
#include "speculative/drafter_model.h"
#include "speculative/drafter_ngram.h"
#include "speculative/drafter_suffix.h"
#include "random_drafter.h"
#include "speculative/spec_decode.h"

namespace dspark {
namespace {

constexpr int kVocab = 300;

class SpecTiny : public ::testing::Test {
 protected:
  static std::string write(const testing::TinyGemma3& m, const char* tag) {
    const std::string p =
        (std::filesystem::temp_directory_path() / (std::string("spec_tiny_").append(tag).append(std::to_string(getpid())).append(".gguf"))).string();
    EXPECT_TRUE(m.write(p).is_ok());
    return p;
  }
  void SetUp() override {
    target_path_ = write(testing::TinyGemma3(11, kVocab), "t");
    draft_path_ = write(testing::TinyGemma3(12, kVocab), "d");
    target_ = std::move(model::load_model(target_path_)).value();
    other_ = std::move(model::load_model(draft_path_)).value();
    tok_ = tokenizer::testing::make_padded_tiny_tokenizer(kVocab);
  }
  void TearDown() override {
    std::filesystem::remove(target_path_);
    std::filesystem::remove(draft_path_);
  }

  std::vector<int32_t> serial(const std::vector<int32_t>& prompt, int n) {
    model::Session s(*target_, {.n_ctx = 256, .max_batch = 64}, &pool_);
    generate::GenerateParams gp;
    gp.max_tokens = n;
    gp.ignore_eos = true;
    return std::move(generate::generate(*target_, s, *tok_, prompt, gp, {})).value().tokens;
  }

  // Greedy, n tokens past EOS, drafts of at most gamma; the governor as each test sets it.
  static speculative::SpecParams greedy_params(int n, int gamma) {
    speculative::SpecParams sp;
    sp.gen.max_tokens = n;
    sp.gen.ignore_eos = true;
    sp.gamma = gamma;
    return sp;
  }

  std::string target_path_, draft_path_;
  std::unique_ptr<model::Model> target_, other_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  ThreadPool pool_{2};
};

TEST_F(SpecTiny, GreedyIsLosslessForEveryDrafterAndGamma) {
  const std::vector<int32_t> prompt = {2, 40, 41, 42, 40, 41};
  const int n = 40;
  const auto want = serial(prompt, n);
  // A suffix index over the serial answer with every fourth token changed, and the answer again
  // reversed: its drafts are right in places and wrong in others.
  std::vector<int32_t> corpus = want;
  for (size_t i = 3; i < corpus.size(); i += 4) corpus[i] = (corpus[i] + 1) % kVocab;
  corpus.push_back(speculative::kSuffixSeparator);
  corpus.insert(corpus.end(), want.rbegin(), want.rend());
  corpus.push_back(speculative::kSuffixSeparator);
  auto sa = speculative::build_suffix_array(corpus);
  const auto index = speculative::SuffixIndex::from_arrays(corpus, std::move(sa));
  for (int gamma : {1, 2, 3, 5, 7}) {
    for (bool governed : {false, true}) {
      speculative::NgramDrafter ngram;
      speculative::ModelDrafter self(*target_, {.n_ctx = 256, .max_batch = 64}, &pool_);
      speculative::ModelDrafter other(*other_, {.n_ctx = 256, .max_batch = 64}, &pool_);
      testing::RandomDrafter random(0, kVocab, 77);
      speculative::SuffixDrafter suffix(index);
      for (speculative::Drafter* d : std::vector<speculative::Drafter*>{&ngram, &self, &other, &random, &suffix}) {
        model::Session s(*target_, {.n_ctx = 256, .max_batch = 64}, &pool_);
        speculative::SpecParams sp = greedy_params(n, gamma);
        // Governed: deciding from a verify table (0.5 per extra token) where a drafter that accepts
        // nothing loses (plain rounds, with probes) and the self-drafter wins every round.
        sp.governor = {.enabled = governed, .verify_ms = {0, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}, .deterministic = true,
                       .warmup_rounds = 1};
        auto r = speculative::generate_spec(*target_, s, *tok_, prompt, sp, *d, {});
        ASSERT_TRUE(r.is_ok()) << r.message();
        EXPECT_EQ(r->out.tokens, want) << d->kind() << " gamma " << gamma << (governed ? " governed" : "");
        const speculative::GovernorStats& g = r->stats.governor;
        EXPECT_EQ(g.plain_rounds + g.drafting_rounds, r->stats.rounds);
        if (governed) {
          EXPECT_EQ(g.rounds[(size_t)speculative::GovernorReason::kOff], 0);
          if (d == &random) {
            EXPECT_GT(g.rounds[(size_t)speculative::GovernorReason::kPlain], 0) << "gamma " << gamma;
            EXPECT_GT(g.rounds[(size_t)speculative::GovernorReason::kProbeDraft], 0) << "gamma " << gamma;
          }
          if (d == &self) {
            EXPECT_EQ(g.drafting_rounds + g.rounds[(size_t)speculative::GovernorReason::kLimit], r->stats.rounds);
          }
        } else {
          EXPECT_EQ(g.rounds[(size_t)speculative::GovernorReason::kOff] + g.rounds[(size_t)speculative::GovernorReason::kLimit],
                    r->stats.rounds);
        }
        EXPECT_EQ(r->stats.generated, n);
        EXPECT_EQ(s.n_past(), (int64_t)prompt.size() - 1 + r->stats.rounds + r->stats.accepted);
        if (d == &self) {
          EXPECT_EQ(r->stats.accepted, r->stats.drafted) << "self-draft must accept every token";
        }
      }
    }
  }
}

// Sure drafts (Drafter::sure_drafts): the suffix drafter's long copies of the request's own text are
// taken in rounds the governor makes plain (a steep verify table), past gamma, and the output stays
// serial's; draft-sure off (GovernorConfig::sure_drafts) takes none.
TEST_F(SpecTiny, SureCopiesAreLossless) {
  std::vector<int32_t> prompt = {2, 40, 41, 42, 40, 41, 43, 44};
  const auto first = serial(prompt, 24);
  prompt.insert(prompt.end(), first.begin(), first.end());  // the answer, then the question again
  prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 8);
  const int n = 40;
  const auto want = serial(prompt, n);
  std::vector<int32_t> corpus = {1, 2, 3, speculative::kSuffixSeparator};
  auto sa = speculative::build_suffix_array(corpus);
  const auto index = speculative::SuffixIndex::from_arrays(corpus, std::move(sa));
  for (bool sure : {true, false}) {
    speculative::SuffixDrafter suffix(index);
    model::Session s(*target_, {.n_ctx = 256, .max_batch = 64}, &pool_);
    speculative::SpecParams sp = greedy_params(n, 2);
    std::vector<double> v = {0};
    for (int r = 1; r <= 17; ++r) v.push_back((double)r);  // a draft never pays at these costs
    sp.governor = {.enabled = true, .verify_ms = v, .deterministic = true, .warmup_rounds = 1, .sure_drafts = sure};
    auto r = speculative::generate_spec(*target_, s, *tok_, prompt, sp, suffix, {});
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->out.tokens, want) << (sure ? "sure" : "no sure drafts");
    EXPECT_EQ(s.n_past(), (int64_t)prompt.size() - 1 + r->stats.rounds + r->stats.accepted);
    const int64_t sure_rounds = r->stats.governor.rounds[(size_t)speculative::GovernorReason::kSure];
    if (sure) {
      EXPECT_GT(sure_rounds, 0) << r->stats.to_json().dump();
      EXPECT_GT(r->stats.accepted, 0);
    } else {
      EXPECT_EQ(sure_rounds, 0);
    }
  }
}

// A drafter that knows the answer and proposes a tree whose chain is wrong and whose branch is the
// answer's next two tokens: every round takes the branch.
class BranchOracle : public speculative::Drafter {
 public:
  BranchOracle(std::vector<int32_t> answer, int64_t prompt_len) : answer_(std::move(answer)), prompt_len_(prompt_len) {}
  std::string kind() const override { return "branch-oracle"; }
  Status begin(std::span<const int32_t>, const speculative::TapRows&) override { return Status::ok(); }
  Status draft(const speculative::DraftRequest& req, speculative::DraftResult* out) override {
    out->clear();
    const int64_t i = req.pos + 1 - prompt_len_;  // answer index of the first drafted position
    if (req.max_n <= 0 || i < 0 || i + 2 > (int64_t)answer_.size()) return Status::ok();
    out->tokens = {(answer_[(size_t)i] + 1) % kVocab};  // the chain: wrong
    if (!req.tree_ok) return Status::ok();
    out->tokens.push_back(answer_[(size_t)i]);
    out->tokens.push_back(answer_[(size_t)i + 1]);
    out->parent = {-1, -1, 1};
    out->confidence = {0.9f, 0.9f, 0.9f};
    out->chain = 1;
    return Status::ok();
  }
  Status commit(std::span<const int32_t>, int64_t, const speculative::TapRows&) override { return Status::ok(); }
  std::unique_ptr<speculative::Drafter> fork() const override { return std::make_unique<BranchOracle>(answer_, prompt_len_); }

 private:
  std::vector<int32_t> answer_;
  int64_t prompt_len_;
};

// Token trees (speculative/token_tree.h): branches verified in one forward give serial's tokens
// exactly, for a drafter whose branches are always taken and for the suffix drafter's own trees; a
// flat verify table keeps the branches, a steep one keeps the chain.
TEST_F(SpecTiny, GreedyTreesAreLossless) {
  const std::vector<int32_t> prompt = {2, 40, 41, 42, 40, 41};
  const int n = 40;
  const auto want = serial(prompt, n);
  std::vector<int32_t> corpus = want;  // the answer, and twice its 8 tokens before 12 and 26 then a wrong one
  corpus.push_back(speculative::kSuffixSeparator);
  for (size_t j : {12, 26})
    for (int copy = 0; copy < 2; ++copy) {
      corpus.insert(corpus.end(), want.begin() + (int64_t)j - 8, want.begin() + (int64_t)j);
      corpus.push_back((want[j] + 1) % kVocab);
      corpus.push_back(speculative::kSuffixSeparator);
    }
  auto sa = speculative::build_suffix_array(corpus);
  const auto index = speculative::SuffixIndex::from_arrays(corpus, std::move(sa));
  speculative::SuffixDrafterConfig cfg;
  cfg.tree_width = 2;
  for (bool flat : {true, false}) {
    BranchOracle oracle(want, (int64_t)prompt.size());
    speculative::SuffixDrafter suffix(index, cfg);
    for (speculative::Drafter* d : std::vector<speculative::Drafter*>{&oracle, &suffix}) {
      model::Session s(*target_, {.n_ctx = 256, .max_batch = 64}, &pool_);
      speculative::SpecParams sp = greedy_params(n, 4);
      std::vector<double> v = {0};
      for (int r = 1; r <= 17; ++r) v.push_back(flat ? 1.0 + 0.001 * r : (double)r);
      sp.governor = {.enabled = true, .verify_ms = v, .deterministic = true, .warmup_rounds = 1};
      auto r = speculative::generate_spec(*target_, s, *tok_, prompt, sp, *d, {});
      ASSERT_TRUE(r.is_ok()) << r.message();
      EXPECT_EQ(r->out.tokens, want) << d->kind() << (flat ? " flat" : " steep");
      EXPECT_EQ(s.n_past(), (int64_t)prompt.size() - 1 + r->stats.rounds + r->stats.accepted) << d->kind();
      if (flat) {
        EXPECT_GT(r->stats.tree_rounds, 0) << d->kind();
      } else {
        EXPECT_EQ(r->stats.tree_rounds, 0) << d->kind() << ": steep windows keep a chain";
      }
      if (flat && d == &oracle) {
        EXPECT_EQ(r->stats.tree_branch_taken, r->stats.tree_rounds) << r->stats.to_json().dump();
        EXPECT_GT(r->stats.tree_rounds, 10);
      }
    }
  }
}

TEST_F(SpecTiny, DraftModelVocabularyMustMatch) {
  EXPECT_TRUE(speculative::check_same_vocab(*tok_, *tok_).is_ok());
  std::vector<tokenizer::testing::TinyPiece> pieces;
  auto v = tokenizer::testing::make_tiny_vocab(pieces);
  for (int i = (int)v.tokens.size(); i < kVocab; ++i) {
    v.tokens.push_back(i == 290 ? std::string("other") : std::string("w").append(std::to_string(i)));
    v.scores.push_back(0);
    v.types.push_back((int32_t)tokenizer::TokenType::kNormal);
  }
  tokenizer::Tokenizer other = std::move(tokenizer::SpmTokenizer::create(v)).value();
  const Status st = speculative::check_same_vocab(*tok_, other);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("token 290"), std::string::npos) << st.message();
  v.tokens.pop_back();
  v.scores.pop_back();
  v.types.pop_back();
  tokenizer::Tokenizer shorter = std::move(tokenizer::SpmTokenizer::create(v)).value();
  EXPECT_NE(speculative::check_same_vocab(*tok_, shorter).message().find("tokens"), std::string::npos);
}

// A drafter whose drafts come in two classes by the pending token's parity (Drafter::class_priors):
// after an odd token class 0, which the governor by class keeps, else class 1, which it drops.
class TwoClassDrafter : public speculative::Drafter {
 public:
  explicit TwoClassDrafter(speculative::Drafter& inner) : inner_(inner) {}
  std::string kind() const override { return "two-class"; }
  int max_gamma() const override { return inner_.max_gamma(); }
  Status begin(std::span<const int32_t> prompt, const speculative::TapRows& taps) override {
    return inner_.begin(prompt, taps);
  }
  Status draft(const speculative::DraftRequest& req, speculative::DraftResult* out) override {
    DSPARK_RETURN_IF_ERROR(inner_.draft(req, out));
    out->draft_class = req.pending % 2 == 1 ? 0 : 1;
    return Status::ok();
  }
  Status commit(std::span<const int32_t> committed, int64_t pos, const speculative::TapRows& taps) override {
    return inner_.commit(committed, pos, taps);
  }
  std::unique_ptr<speculative::Drafter> fork() const override { return nullptr; }
  std::vector<double> class_priors() const override { return {0.9, 0.05}; }

 private:
  speculative::Drafter& inner_;
};

// Chi-square of the first two emitted tokens against the target's exact distribution, with a
// drafter (another model) whose proposals disagree with the target most of the time. Governed: a
// governor deciding from constants (a verify table, as sampled requests do) that takes the first
// round plain and drafts the second, so the decisions vary with the sampled history. ByClass: the
// same governor by class: the first round (pending 51, class 0) drafts the whole room, and later rounds
// keep or drop their drafts by the sampled pending token, so what is verified varies with the sampled
// history too.
enum class Sampling { kFree, kGoverned, kByClass };
class SpecTinySampling : public SpecTiny, public ::testing::WithParamInterface<Sampling> {};

TEST_P(SpecTinySampling, FollowsTargetDistribution) {
  const bool governed = GetParam() != Sampling::kFree, by_class = GetParam() == Sampling::kByClass;
  const std::vector<int32_t> prompt = {2, 50, 51};
  const float temp = 1.0f;
  // Target distribution of the first token and of the second given the first.
  auto target_dist = [&](const std::vector<int32_t>& ctx) {
    model::Session s(*target_, {.n_ctx = 64, .max_batch = 64}, &pool_);
    EXPECT_TRUE(target_->forward(s, ctx, {}).is_ok());
    sample::Sampler smp({.temperature = temp});
    std::map<int32_t, double> p;
    for (const auto& tp : smp.distribution(s.logits(), kVocab)) p[tp.id] = tp.p;
    return p;
  };
  const auto p1 = target_dist(prompt);
  const int runs = 3000;
  std::map<int32_t, int> first;
  std::map<int32_t, std::map<int32_t, int>> second;
  int64_t drafted = 0, accepted = 0, plain_rounds = 0, class_draft = 0, class_plain = 0;
  for (int r = 0; r < runs; ++r) {
    speculative::ModelDrafter model_drafter(*other_, {.n_ctx = 64, .max_batch = 64}, &pool_);
    TwoClassDrafter two_class(model_drafter);
    speculative::Drafter& other = by_class ? (speculative::Drafter&)two_class : model_drafter;
    model::Session s(*target_, {.n_ctx = 64, .max_batch = 64}, &pool_);
    speculative::SpecParams sp;
    // Governed: round 2 has room for a draft; by class: round 1 drafts 3 tokens, later rounds up to 2.
    sp.gen.max_tokens = by_class ? 4 : governed ? 3 : 2;
    sp.gen.ignore_eos = true;
    sp.gen.sampler = {.temperature = temp, .seed = (uint64_t)r + 1};
    sp.gamma = 3;
    if (governed) sp.governor = {.enabled = true, .verify_ms = {0, 1, 1.1, 1.2, 1.3}, .warmup_rounds = 0,
                                 .by_class = by_class};
    auto res = speculative::generate_spec(*target_, s, *tok_, prompt, sp, other, {});
    ASSERT_TRUE(res.is_ok()) << res.message();
    ASSERT_EQ((int)res->out.tokens.size(), sp.gen.max_tokens);
    first[res->out.tokens[0]]++;
    second[res->out.tokens[0]][res->out.tokens[1]]++;
    drafted += res->stats.drafted;
    accepted += res->stats.accepted;
    plain_rounds += res->stats.governor.rounds[(size_t)speculative::GovernorReason::kPlain];
    class_draft += res->stats.governor.rounds[(size_t)speculative::GovernorReason::kClassDraft];
    class_plain += res->stats.governor.rounds[(size_t)speculative::GovernorReason::kClassPlain];
  }
  if (by_class) {
    EXPECT_GE(class_draft, runs);     // every run's first round drafted by its class
    EXPECT_GE(class_plain, runs / 10);  // later rounds after an even token dropped their drafts
  } else if (governed) {
    EXPECT_GE(plain_rounds, runs);  // every run's first round was plain
  }
  auto chi2_test = [](const std::map<int32_t, double>& p, const std::map<int32_t, int>& counts, int n) {
    // Bins with expected count >= 5; the rest pooled.
    double chi2 = 0, rest_expect = 0;
    int rest_count = 0, dof = -1;
    for (const auto& [id, pr] : p) {
      const auto it = counts.find(id);
      const int c = it == counts.end() ? 0 : it->second;
      if (n * pr >= 5) { chi2 += std::pow(c - n * pr, 2) / (n * pr); ++dof; }
      else { rest_expect += n * pr; rest_count += c; }
    }
    if (rest_expect > 0) { chi2 += std::pow(rest_count - rest_expect, 2) / rest_expect; ++dof; }
    return std::make_pair(chi2, dof);
  };
  auto [chi1, dof1] = chi2_test(p1, first, runs);
  // Critical value at p = 0.001 ~ dof + 3.1 sqrt(2 dof) + 4 (Wilson-Hilferty upper tail, generous).
  EXPECT_LT(chi1, dof1 + 3.1 * std::sqrt(2.0 * dof1) + 4) << "dof " << dof1;
  int32_t top = first.begin()->first;
  for (const auto& [id, c] : first) if (c > first[top]) top = id;
  auto ctx2 = prompt;
  ctx2.push_back(top);
  auto [chi2, dof2] = chi2_test(target_dist(ctx2), second[top], first[top]);
  EXPECT_LT(chi2, dof2 + 3.1 * std::sqrt(2.0 * dof2) + 4) << "dof " << dof2;
  const double rate = (double)accepted / drafted;
  std::printf("T=1 spec on tiny model: acceptance %.3f over %lld drafts; chi2 first %.1f (dof %d), second %.1f (dof %d)\n",
              rate, (long long)drafted, chi1, dof1, chi2, dof2);
  EXPECT_LT(rate, 0.6);  // the drafter must disagree often for the test to mean something
}

INSTANTIATE_TEST_SUITE_P(SpecTiny, SpecTinySampling,
                         ::testing::Values(Sampling::kFree, Sampling::kGoverned, Sampling::kByClass),
                         [](const ::testing::TestParamInfo<Sampling>& i) {
                           return i.param == Sampling::kFree ? "Free" : i.param == Sampling::kGoverned ? "Governed" : "ByClass";
                         });

}  // namespace
}  // namespace dspark
