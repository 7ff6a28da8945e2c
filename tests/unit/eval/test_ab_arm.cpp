// Arm specs of `dspark ab`: the accepted forms and one clear error per bad form.
#include <gtest/gtest.h>

#include "eval/ab_arm.h"

namespace dspark::eval {
namespace {

TEST(AbArm, ParsesSerialAndDrafterSpecs) {
  auto s = parse_arm_spec("A", "serial");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->serial);
  auto n = parse_arm_spec("B", "draft-kind=ngram,num-draft-tokens=3");
  ASSERT_TRUE(n) << n.message();
  EXPECT_FALSE(n->serial);
  EXPECT_EQ(n->drafter.kind, "ngram");
  EXPECT_EQ(n->drafter.gamma, 3);
  EXPECT_EQ(n->text, "draft-kind=ngram,num-draft-tokens=3");
  auto d = parse_arm_spec("B", "draft-kind=dspark,draft-model=/m/dir,num-draft-tokens=5,draft-threshold=0.3");
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->drafter.model, "/m/dir");
  EXPECT_DOUBLE_EQ(d->drafter.threshold, 0.3);
  auto a = parse_arm_spec("B", "draft-model=x.gguf");  // kind auto, detected at load
  ASSERT_TRUE(a);
  EXPECT_EQ(a->drafter.kind, "auto");
  EXPECT_EQ(a->drafter.gamma, 0);        // the drafter's default (a DSpark block, else 5)
  EXPECT_EQ(a->drafter.quant, speculative::DraftQuant::kNone);   // an A/B measures the checkpoint as given
  auto full = parse_arm_spec("C", "draft-model=d,draft-schedule=cost,draft-copy=only,draft-quant=auto");
  ASSERT_TRUE(full) << full.message();
  EXPECT_EQ(full->drafter.schedule, speculative::DraftSchedule::kCost);
  EXPECT_EQ(full->drafter.copy, speculative::CopyMode::kOnly);
  EXPECT_EQ(full->drafter.quant, speculative::DraftQuant::kAuto);
}

TEST(AbArm, LmHeadIsTheLastKey) {
  auto f = parse_arm_spec("F", "serial,lm-head=full");
  ASSERT_TRUE(f) << f.message();
  EXPECT_TRUE(f->serial);
  EXPECT_TRUE(f->full_lm_head);
  auto a = parse_arm_spec("G", "draft-kind=ngram,num-draft-tokens=3,lm-head=argmax");
  ASSERT_TRUE(a) << a.message();
  EXPECT_FALSE(a->full_lm_head);
  EXPECT_EQ(a->drafter.gamma, 3);
}

TEST(AbArm, RejectsBadSpecsNamingTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"draft-kind=eagle", "eagle"},
      {"draft-kind=ngram,gamma=3", "unknown key 'gamma'"},
      {"draft-kind=ngram,num-draft-tokens=x", "num-draft-tokens"},
      {"draft-kind=ngram,num-draft-tokens=65", "num-draft-tokens"},
      {"draft-kind=ngram,num-draft-tokens=-1", "num-draft-tokens"},
      {"draft-kind=ngram,draft-threshold=1.5", "draft-threshold"},
      {"draft-kind=ngram,draft-threshold=nan", "draft-threshold"},
      {"draft-kind=ngram,draft-kind=ngram", "twice"},
      {"draft-kind=ngram,", "not key=value"},
      {"ngram", "not key=value"},
      {"num-draft-tokens=3", "needs draft-model"},
      {"draft-kind=dspark", "needs draft-model"},
      {"draft-kind=ngram,draft-model=x", "takes no draft-model"},
      {"draft-model=x,draft-schedule=fast", "draft-schedule"},
      {"draft-model=x,draft-copy=maybe", "draft-copy"},
      {"draft-model=x,draft-quant=int2", "draft-quant"},
      {"serial,lm-head=sparse", "lm-head must be argmax or full, not 'sparse'"},
      {"serial,lm-head=both", "lm-head must be argmax or full"},
      {"lm-head=full", "goes last, after the arm"},
      {"serial,lm-head=full,draft-kind=ngram", "goes last"},
  };
  for (const auto& [spec, needle] : cases) {
    auto r = parse_arm_spec("B", spec);
    ASSERT_FALSE(r) << spec;
    EXPECT_NE(r.message().find(needle), std::string::npos) << spec << " -> " << r.message();
    EXPECT_EQ(r.message().rfind("arm B: ", 0), 0u) << r.message();
  }
}

TEST(AbArm, NamedArms) {
  auto a = parse_named_arm("ng3=draft-kind=ngram,num-draft-tokens=3");
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->name, "ng3");
  EXPECT_EQ(a->drafter.gamma, 3);
  auto s = parse_named_arm("serial");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "serial");
  EXPECT_TRUE(s->serial);
  auto base = parse_named_arm("base=serial");
  ASSERT_TRUE(base);
  EXPECT_EQ(base->name, "base");
  EXPECT_FALSE(parse_named_arm("draft-kind=ngram"));  // a spec without a name
  EXPECT_FALSE(parse_named_arm("noequals"));
  EXPECT_FALSE(parse_named_arm("bad name=serial"));
  EXPECT_FALSE(parse_named_arm("=serial"));
  EXPECT_FALSE(parse_named_arm("x=draft-kind=bogus"));
}

}  // namespace
}  // namespace dspark::eval
