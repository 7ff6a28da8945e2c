// speculative::SpecConfig: one key table for the verbs' flags and ab specs, one parser, one check.
#include <gtest/gtest.h>

#include "speculative/spec_config.h"

namespace dspark::speculative {
namespace {

TEST(SpecConfig, EveryKeyRoundTripsThroughItsText) {
  SpecConfig c;
  c.kind = "dspark";
  c.model = "dir";
  c.gamma = 7;
  c.threshold = 0.25;
  c.schedule = DraftSchedule::kCost;
  c.copy = CopyMode::kOnly;
  c.quant = DraftQuant::kNone;
  c.governor = false;
  c.sure_drafts = false;
  c.suffix_index = "answers.sfx";
  c.suffix_min_prob = 0.375;
  c.tree = 3;
  std::string text;
  for (const SpecKey& k : spec_keys()) {
    if (!text.empty()) text += ",";
    text += k.name;
    text += "=";
    text += k.get(c);
  }
  auto back = parse_spec(text);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(spec_keys().size(), 12u);
  auto pooled = parse_spec("draft-governor=pooled");  // the governor with one estimate for every draft
  ASSERT_TRUE(pooled) << pooled.message();
  EXPECT_TRUE(pooled->governor);
  EXPECT_FALSE(pooled->governor_by_class);
  EXPECT_TRUE(parse_spec("draft-governor=on")->governor_by_class);
  for (const char* sched : {"fixed", "cost", "cost-static", "cost-gated"}) {
    std::string text = "draft-model=m,draft-schedule=";
    text.append(sched);
    auto s = parse_spec(text);
    ASSERT_TRUE(s) << sched;
    EXPECT_STREQ(schedule_name(s->schedule), sched);
    EXPECT_EQ(s->cost_schedule(), std::string(sched) != "fixed");
  }
}

// Every enum value has one name, and each name parses back to its value.
TEST(SpecConfig, EnumNamesRoundTrip) {
  for (int i = 0; i < 4; ++i) {
    DraftSchedule s{};
    ASSERT_TRUE(parse_schedule(schedule_name((DraftSchedule)i), &s));
    EXPECT_EQ((int)s, i);
    DraftQuant q{};
    ASSERT_TRUE(parse_draft_quant(draft_quant_name((DraftQuant)i), &q));
    EXPECT_EQ((int)q, i);
  }
  for (int i = 0; i < 5; ++i) {
    CopyMode m{};
    ASSERT_TRUE(parse_copy_mode(copy_mode_name((CopyMode)i), &m));
    EXPECT_EQ((int)m, i);
  }
  CopyMode m{};
  EXPECT_NE(parse_copy_mode("sometimes", &m).message().find("auto, on, off, only, first"), std::string::npos);
}

TEST(SpecConfig, DefaultsAndBase) {
  auto c = parse_spec("draft-model=m");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, "auto");
  EXPECT_EQ(c->gamma, 0);
  EXPECT_EQ(c->schedule, DraftSchedule::kFixed);
  EXPECT_TRUE(c->governor);  // every drafter goes through the governor unless told otherwise
  EXPECT_TRUE(c->sure_drafts);
  EXPECT_FALSE(parse_spec("draft-sure=off")->sure_drafts);
  SpecConfig base;
  base.quant = DraftQuant::kNone;
  c = parse_spec("draft-kind=ngram", base);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->quant, DraftQuant::kNone);
  EXPECT_TRUE(check_spec(*c));
}

TEST(SpecConfig, ErrorsNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"num-draft-tokens=65", "num-draft-tokens"}, {"num-draft-tokens=1.5", "num-draft-tokens"},
      {"draft-threshold=-0.1", "draft-threshold"}, {"draft-schedule=slow", "draft-schedule"},
      {"draft-copy=yes", "draft-copy"},            {"draft-quant=q4", "draft-quant"},
      {"draft-kind=a b", "draft-kind"},            {"draft-model=", "draft-model"},
      {"draft-governor=maybe", "draft-governor"},  {"draft-tree=5", "draft-tree"},
      {"draft-tree=-1", "draft-tree"},             {"draft-sure=maybe", "draft-sure"},
      {"bogus=1", "unknown key 'bogus'"},          {"draft-kind=ngram,draft-kind=ngram", "twice"},
  };
  for (const auto& [text, needle] : cases) {
    auto r = parse_spec(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.message().find(needle), std::string::npos) << text << " -> " << r.message();
  }
  SpecConfig c;
  EXPECT_FALSE(check_spec(c));  // auto without a model
  c.kind = "ngram";
  EXPECT_TRUE(check_spec(c));
  c.model = "x";
  EXPECT_FALSE(check_spec(c));
  c.model.clear();
  c.tree = 2;  // branches come from a suffix index
  EXPECT_FALSE(check_spec(c));
  EXPECT_NE(check_spec(c).message().find("draft-tree"), std::string::npos);
  EXPECT_TRUE(parse_spec("suffix-index=a.sfx,draft-tree=2"));
}

TEST(SpecConfig, SuffixIndexGoesWithDraftKindSuffixOrDSpark) {
  auto c = parse_spec("suffix-index=a.sfx");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->suffix_index, "a.sfx");
  EXPECT_TRUE(check_spec(*c));  // auto with only an index: suffix
  c->kind = "suffix";
  EXPECT_TRUE(check_spec(*c));
  c->model = "m.gguf";
  EXPECT_NE(check_spec(*c).message().find("takes no draft-model"), std::string::npos);
  c->model.clear();
  c->suffix_index.clear();
  EXPECT_NE(check_spec(*c).message().find("needs suffix-index"), std::string::npos);
  for (const char* kind : {"ngram", "draft-model"}) {
    SpecConfig d;
    d.kind = kind;
    d.model = std::string(kind) == "draft-model" ? "m.gguf" : "";
    d.suffix_index = "a.sfx";
    EXPECT_NE(check_spec(d).message().find("for draft-kind suffix or dspark only"), std::string::npos) << kind;
  }
  for (const char* kind : {"dspark", "auto"}) {  // the copy head's third source
    SpecConfig d;
    d.kind = kind;
    d.model = "dir";
    d.suffix_index = "a.sfx";
    EXPECT_TRUE(check_spec(d)) << kind;
  }
  EXPECT_FALSE(parse_spec("suffix-index="));
  EXPECT_FALSE(parse_spec("suffix-index=a.sfx,suffix-min-prob=1.5"));
  auto p = parse_spec("suffix-index=a.sfx,suffix-min-prob=0.25");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->suffix_min_prob, 0.25);
  EXPECT_TRUE(check_spec(*p));
  const Status lone = check_spec(*parse_spec("draft-kind=ngram,suffix-min-prob=0.25"));
  EXPECT_NE(lone.message().find("goes with suffix-index"), std::string::npos) << lone.message();
}

}  // namespace
}  // namespace dspark::speculative
