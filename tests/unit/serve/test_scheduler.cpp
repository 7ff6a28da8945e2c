// The scheduler and request preparation on a tiny random Gemma 3: answers equal serial
// generation (with and without drafters, several slots at once), prompt-cache reuse, the queue
// bound, cancellation freeing the slot, shutdown; prepare()'s model, context and spec checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../model/tiny_gemma3.h"
#include "../tokenizer/tiny_vocab.h"
#include "generate/generate.h"
#include "serve/prepare.h"
#include "serve/scheduler.h"
#include "speculative/drafter_ngram.h"

namespace dspark::serve {
namespace {

constexpr int kVocab = 300;
using namespace std::chrono_literals;

class SchedulerTiny : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("sched_tiny_" + std::to_string(getpid()) + ".gguf")).string();
    ASSERT_TRUE(dspark::testing::TinyGemma3(31, kVocab).write(path_).is_ok());
    model_ = std::move(model::load_model(path_)).value();
    tok_ = tokenizer::testing::make_padded_tiny_tokenizer(kVocab);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // The reference runs on its own pool: a ThreadPool serves one calling thread at a time, and the
  // scheduler thread may still be using pool_.
  std::vector<int32_t> serial(const std::vector<int32_t>& prompt, int n) {
    model::Session s(*model_, {.n_ctx = 128, .max_batch = 16}, &serial_pool_);
    generate::GenerateParams gp;
    gp.max_tokens = n;
    gp.ignore_eos = true;
    return std::move(generate::generate(*model_, s, *tok_, prompt, gp, {})).value().tokens;
  }

  std::unique_ptr<Scheduler> make(int slots, int queue, bool drafter, size_t cache_bytes = 1 << 30, bool batch = true) {
    DrafterFactory f;
    if (drafter) f = []() -> Result<std::unique_ptr<speculative::Drafter>> { return std::unique_ptr<speculative::Drafter>(std::make_unique<speculative::NgramDrafter>()); };
    SchedulerConfig cfg{.n_slots = slots, .max_queue = queue, .n_ctx = 128, .max_batch = 16, .prefill_chunk = 5,
                        .cache_bytes = cache_bytes, .batch_rounds = batch, .max_window = 65, .verify_ms = {},
                        .gate = {}};
    return std::move(Scheduler::create(*model_, *tok_, cfg, f, &pool_, &metrics_)).value();
  }

  static std::shared_ptr<Job> job(const std::vector<int32_t>& prompt, int n, bool spec) {
    auto j = std::make_shared<Job>();
    j->prompt = prompt;
    j->params.gen.max_tokens = n;
    j->params.gen.ignore_eos = true;
    j->params.gamma = spec ? 4 : 0;
    j->use_drafter = spec;
    return j;
  }

  static void wait(Job& j) {
    std::string text;
    while (!j.wait(&text, 20ms)) {
    }
  }

  std::string path_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  ThreadPool pool_{2};
  ThreadPool serial_pool_{1};
  Metrics metrics_;
};

std::vector<int32_t> prompt_of(int n, int seed) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < n; ++i) p.push_back(30 + (seed * 13 + i * 7) % 60);
  return p;
}

TEST_F(SchedulerTiny, ConcurrentSlotsMatchSerial) {
  for (bool batch : {true, false}) {
    auto s = make(3, 8, true, 1 << 30, batch);
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 6; ++i) {
      jobs.push_back(job(prompt_of(7 + i * 3, i), 12, i % 2 == 0));
      ASSERT_EQ(s->submit(jobs.back()), Scheduler::Submit::kQueued);
    }
    for (int i = 0; i < 6; ++i) {
      wait(*jobs[i]);
      EXPECT_TRUE(jobs[i]->error.is_ok()) << jobs[i]->error.message();
      EXPECT_FALSE(jobs[i]->cancelled);
      EXPECT_EQ(jobs[i]->result.out.tokens, serial(jobs[i]->prompt, 12)) << "job " << i << " batch " << batch;
      EXPECT_EQ(jobs[i]->spec_ran, i % 2 == 0);
    }
    const auto st = s->state();
    EXPECT_EQ(st["slots_busy"], 0);
    EXPECT_EQ(st["queue"], 0);
    if (batch) {
      EXPECT_GT(st["batching"]["forwards"].get<int64_t>(), 0);  // rounds of several slots went through forward_multi
    } else {
      EXPECT_EQ(st["batching"]["forwards"], 0);
    }
  }
}

TEST_F(SchedulerTiny, NextTurnReusesThePreviousOne) {
  auto s = make(2, 4, true);
  auto p1 = prompt_of(20, 1);
  auto j1 = job(p1, 8, true);
  s->submit(j1);
  wait(*j1);
  auto p2 = p1;
  p2.insert(p2.end(), j1->result.out.tokens.begin(), j1->result.out.tokens.end());
  p2.push_back(50);
  p2.push_back(51);
  auto j2 = job(p2, 8, true);
  s->submit(j2);
  wait(*j2);
  EXPECT_EQ(j2->slot, j1->slot);  // the slot holding the conversation
  EXPECT_EQ(j2->cached_tokens, (int64_t)(p1.size() + j1->result.out.tokens.size() - 1));
  EXPECT_EQ(j2->result.out.tokens, serial(p2, 8));
  EXPECT_EQ(metrics_.totals()["prompt_cache"]["hits"], 1);  // j1 found an empty cache
}

// A question asked again (prompt cache off, so nothing else is reused) is drafted from the answer
// to its first asking: every slot's drafter sees the shared answer cache; answers stay serial's.
TEST_F(SchedulerTiny, AnswerCacheDraftsARepeatedQuestion) {
  std::vector<speculative::NgramDrafter*> drafters;
  DrafterFactory f = [&drafters]() -> Result<std::unique_ptr<speculative::Drafter>> {
    auto d = std::make_unique<speculative::NgramDrafter>();
    drafters.push_back(d.get());
    return std::unique_ptr<speculative::Drafter>(std::move(d));
  };
  SchedulerConfig cfg{.n_slots = 2, .max_queue = 4, .n_ctx = 128, .max_batch = 16, .prefill_chunk = 5,
                      .cache_bytes = 0, .batch_rounds = true, .max_window = 65, .verify_ms = {}, .gate = {},
                      .answer_cache_bytes = 1 << 20};
  auto s = std::move(Scheduler::create(*model_, *tok_, cfg, f, &pool_, &metrics_)).value();
  ASSERT_EQ(drafters.size(), 2u);
  const auto p = prompt_of(16, 4);
  auto j1 = job(p, 12, true);
  s->submit(j1);
  wait(*j1);
  auto j2 = job(p, 12, true);
  s->submit(j2);
  wait(*j2);
  EXPECT_EQ(j1->result.out.tokens, serial(p, 12));
  EXPECT_EQ(j2->result.out.tokens, j1->result.out.tokens);
  const auto st = s->state()["answer_cache"];
  EXPECT_EQ(st["answers"], 2);
  EXPECT_GT(st["hits"].get<int64_t>(), 0);
  int64_t rounds = 0, accepted = 0;
  for (const speculative::NgramDrafter* d : drafters) {
    const auto ds = d->stats();
    ASSERT_TRUE(ds.contains("answer_cache"));
    rounds += ds["answer_cache"]["rounds"].get<int64_t>();
    accepted += ds["answer_cache"]["accepted"].get<int64_t>();
  }
  EXPECT_GT(rounds, 0);
  EXPECT_GT(accepted, 0);
  // Off: no cache, and the drafters report none.
  drafters.clear();
  cfg.answer_cache_bytes = 0;
  auto off = std::move(Scheduler::create(*model_, *tok_, cfg, f, &pool_, &metrics_)).value();
  EXPECT_TRUE(off->state()["answer_cache"].is_null());
  EXPECT_FALSE(drafters.front()->stats().contains("answer_cache"));
}

TEST_F(SchedulerTiny, CacheOffReusesNothing) {
  auto s = make(1, 4, false, 0);
  auto p = prompt_of(12, 2);
  auto j1 = job(p, 4, false), j2 = job(p, 4, false);
  s->submit(j1);
  wait(*j1);
  s->submit(j2);
  wait(*j2);
  EXPECT_EQ(j2->cached_tokens, 0);
  EXPECT_EQ(j2->result.out.tokens, j1->result.out.tokens);
  EXPECT_EQ(s->state()["cache"]["entries"], 0);
  EXPECT_EQ(s->state()["cache"]["slot_tokens"], 0);
}

TEST_F(SchedulerTiny, SnapshotsServeMoreConversationsThanSlots) {
  // One slot, two conversations taking turns: each next turn is restored from the host-side
  // cache (the slot itself holds the other conversation by then) and stays exact.
  for (bool drafter : {false, true}) {
    auto s = make(1, 4, drafter);
    std::vector<int32_t> conv[2] = {prompt_of(14, 3), prompt_of(15, 4)};
    for (int turn = 0; turn < 3; ++turn)
      for (int c = 0; c < 2; ++c) {
        auto j = job(conv[c], 6, drafter);
        s->submit(j);
        wait(*j);
        ASSERT_TRUE(j->error.is_ok()) << j->error.message();
        EXPECT_EQ(j->result.out.tokens, serial(conv[c], 6)) << "turn " << turn << " conv " << c;
        if (turn > 0) {
          EXPECT_GE(j->cached_tokens, (int64_t)conv[c].size() - 3) << "turn " << turn << " conv " << c;
        }
        conv[c].insert(conv[c].end(), j->result.out.tokens.begin(), j->result.out.tokens.end());
        conv[c].push_back(40 + turn);
      }
    const auto st = s->state();
    EXPECT_EQ(st["cache"]["restores"], 4);
    EXPECT_EQ(st["cache"]["entries"], 2);  // each conversation's latest turn supersedes its earlier ones
  }
}

TEST_F(SchedulerTiny, SnapshotBudgetEvictsLeastRecentlyUsed) {
  model::Session s(*model_, {.n_ctx = 128, .max_batch = 16}, &pool_);
  // Runs p + 2 generated tokens on the session and snapshots its first n positions (all by default).
  auto fill = [&](PromptCache& cache, const std::vector<int32_t>& p, int64_t n = INT64_MAX) {
    speculative::SeqHistory h;
    speculative::SpecParams sp;
    sp.gen.max_tokens = 2;
    sp.gen.ignore_eos = true;
    auto st = speculative::SpecStepper::create(*model_, s, *tok_, p, sp, nullptr, &h, {});
    ASSERT_TRUE(st.is_ok());
    while (!(*st)->done()) ASSERT_TRUE((*st)->step().is_ok());
    cache.save(s.kv(), h, n);
  };
  // Tiny model: 6 layers (1 global, 5 sliding with rings of window 8 + max_batch 16), kv_dim 16, K and V
  // f16 = 64 bytes per layer row. A 40-token prompt + 2 generated leaves 41 positions in the KV: the
  // snapshot keeps 41 rows of the global layer, 24 of each sliding one, and the 41 token ids.
  const size_t per_entry = (41 + 5 * 24) * 64 + 41 * sizeof(int32_t);
  PromptCache big(1 << 20);
  fill(big, prompt_of(40, 1));
  fill(big, prompt_of(40, 2));
  EXPECT_EQ(big.entries(), 2u);
  EXPECT_EQ(big.bytes(), 2 * per_entry);
  PromptCache small(big.bytes() / 2 + 100);  // room for one
  fill(small, prompt_of(40, 3));
  fill(small, prompt_of(40, 4));
  EXPECT_EQ(small.entries(), 1u);
  EXPECT_EQ(small.best(prompt_of(40, 4)).second, 40);  // the newest stays
  EXPECT_EQ(small.best(prompt_of(40, 3)).second, 1);   // the older one went (only the BOS matches)
  PromptCache none(10);                                 // smaller than any sequence: stores nothing
  fill(none, prompt_of(40, 5));
  EXPECT_EQ(none.entries(), 0u);
  // A prefix of the sequence: 40 of the 41 positions (high water 41): 40 rows of the global layer,
  // 40 - (41 - 24) = 23 of each sliding one (ring rows of positions 0..16 were overwritten).
  PromptCache head(1 << 20);
  fill(head, prompt_of(40, 6), 40);
  EXPECT_EQ(head.bytes(), (40 + 5 * 23) * 64 + 40 * sizeof(int32_t));
  EXPECT_EQ(head.best(prompt_of(40, 6)).second, 40);
  // A restore copies only the positions the caller will use; generating on from there is exact.
  // (30: the ring rows a query at 30 reads, positions 23..29, are among those kept, 17..39.)
  const std::vector<int32_t> p = prompt_of(40, 6);
  speculative::SeqHistory h;
  ASSERT_TRUE(head.restore(0, s.kv(), &h, 30));
  EXPECT_EQ(s.kv().length(), 30);
  EXPECT_EQ(h.tokens, std::vector<int32_t>(p.begin(), p.begin() + 30));
  speculative::SpecParams sp;
  sp.gen.max_tokens = 4;
  sp.gen.ignore_eos = true;
  auto st = speculative::SpecStepper::create(*model_, s, *tok_, p, sp, nullptr, &h, {});
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ((*st)->reused_tokens(), 30);
  while (!(*st)->done()) ASSERT_TRUE((*st)->step().is_ok());
  EXPECT_EQ((*st)->result().out.tokens, serial(p, 4));
}

TEST_F(SchedulerTiny, QueueBoundAndCancellation) {
  // The tiny model decodes a 100-token job in milliseconds, so long1 may end before the queue is
  // probed. An attempt counts only if long1 was still running when it was cancelled (hence also
  // when `extra` was submitted: slot busy, long2 queued, the queue full).
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto s = make(1, 1, false);
    auto long1 = job(prompt_of(10, 3), 110, false);
    auto long2 = job(prompt_of(10, 4), 110, false);
    auto extra = job(prompt_of(10, 5), 5, false);
    ASSERT_EQ(s->submit(long1), Scheduler::Submit::kQueued);
    // Wait until long1 occupies the slot (or already ended), so long2 is the one queued job allowed.
    // Up to 10 s: under `ctest -j2` on 2 cores the scheduler thread can be starved for over a second.
    for (int i = 0; i < 5000 && s->state()["slots_busy"] == 0 && !long1->is_finished(); ++i)
      std::this_thread::sleep_for(2ms);
    ASSERT_EQ(s->submit(long2), Scheduler::Submit::kQueued);
    const auto extra_first = s->submit(extra);
    // long2 first: cancelled while queued, it ends at its first step (the tiny model would finish
    // all 110 tokens in the moment between long1's end and a later cancel).
    long2->cancel = true;
    long1->cancel = true;
    wait(*long1);
    wait(*long2);
    if (!long1->cancelled) {  // finished before the probe was conclusive: try again
      if (extra_first == Scheduler::Submit::kQueued) wait(*extra);
      continue;
    }
    EXPECT_EQ(extra_first, Scheduler::Submit::kQueueFull);
    EXPECT_LT(long1->result.out.tokens.size(), 110u);
    EXPECT_TRUE(long2->cancelled);
    ASSERT_EQ(s->submit(extra), Scheduler::Submit::kQueued);
    wait(*extra);
    EXPECT_EQ(extra->result.out.tokens, serial(extra->prompt, 5));
    return;
  }
  FAIL() << "long1 finished before cancellation in every attempt";
}

TEST_F(SchedulerTiny, ShutdownCancelsAndRefuses) {
  // The tiny model may finish both jobs before shutdown() runs (they take milliseconds): such an
  // attempt shows nothing about cancelling and is retried; only conclusive attempts are checked.
  int conclusive = 0;
  for (int attempt = 0; attempt < 20 && conclusive == 0; ++attempt) {
    auto s = make(1, 4, true);
    auto a = job(prompt_of(10, 6), 100, true);
    auto b = job(prompt_of(10, 7), 100, true);
    s->submit(a);
    s->submit(b);
    s->shutdown(0ms);
    EXPECT_TRUE(a->is_finished());
    EXPECT_TRUE(b->is_finished());
    EXPECT_EQ(s->submit(job(prompt_of(5, 1), 2, false)), Scheduler::Submit::kStopping);
    if (!b->cancelled && b->error.is_ok() && b->result.out.tokens.size() == 100) continue;  // ran to the end first
    ++conclusive;
    EXPECT_TRUE(b->cancelled) << "b: error '" << b->error.message() << "', tokens " << b->result.out.tokens.size();
  }
  EXPECT_GT(conclusive, 0) << "every attempt finished before shutdown; nothing was cancelled";
}

TEST_F(SchedulerTiny, EngineErrorFailsOnlyThatJob) {
  auto s = make(1, 4, false);
  auto bad = job(prompt_of(10, 6), 125, false);  // 10 + 125 > n_ctx 128: refused by the stepper
  auto good = job(prompt_of(10, 6), 4, false);
  s->submit(bad);
  s->submit(good);
  wait(*bad);
  wait(*good);
  EXPECT_FALSE(bad->error.is_ok());
  EXPECT_NE(bad->error.message().find("context"), std::string::npos) << bad->error.message();
  EXPECT_TRUE(good->error.is_ok());
  EXPECT_EQ(good->result.out.tokens, serial(good->prompt, 4));
  EXPECT_EQ(metrics_.totals()["failed"], 1);
}

TEST_F(SchedulerTiny, PrepareChecksModelContextAndSpec) {
  ServedModel m{.id = "tiny", .aliases = {"tiny.gguf"}, .n_ctx = 64, .default_max_tokens = 1000,
                .has_drafter = true, .default_gamma = 5, .max_gamma = 7, .chat = {}};
  GenRequest r;
  r.endpoint = Endpoint::kCompletion;
  r.model = "tiny";
  r.prompt = "abc abc";
  r.temperature = 0;
  auto ok = prepare(r, *tok_, m, 42);
  ASSERT_TRUE(std::get_if<Prepared>(&ok));
  const Prepared& p = std::get<Prepared>(ok);
  EXPECT_EQ(p.params.gen.max_tokens, 64 - (int)p.prompt.size());  // default capped by the context
  EXPECT_TRUE(p.use_drafter);
  EXPECT_EQ(p.params.gamma, 5);
  EXPECT_EQ(p.params.sure_gamma, speculative::Drafter::kMaxSureGamma);  // no num_draft_tokens: sure drafts may run past gamma
  EXPECT_EQ(p.params.gen.sampler.seed, 42u);

  r.model = "tiny.gguf";
  auto alias = prepare(r, *tok_, m, 0);
  EXPECT_TRUE(std::get_if<Prepared>(&alias));
  r.model = "gpt-4";
  auto nf = prepare(r, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&nf));
  EXPECT_EQ(std::get<ApiError>(nf).status, 404);
  EXPECT_EQ(std::get<ApiError>(nf).code, "model_not_found");

  r.model = "tiny";
  r.max_tokens = 60;
  auto big = prepare(r, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&big));
  EXPECT_EQ(std::get<ApiError>(big).code, "context_length_exceeded");
  r.max_tokens.reset();
  r.prompt = std::string(200, 'a');
  auto longp = prepare(r, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&longp));
  EXPECT_EQ(std::get<ApiError>(longp).code, "context_length_exceeded");

  r.prompt = "abc";
  r.prompt_tokens = {2, 5000};
  auto ids = prepare(r, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&ids));
  EXPECT_EQ(std::get<ApiError>(ids).param, "prompt");
  r.prompt_tokens.clear();

  r.speculative.num_draft_tokens = 0;
  EXPECT_FALSE(std::get<Prepared>(prepare(r, *tok_, m, 0)).use_drafter);
  r.speculative = {.enabled = true, .num_draft_tokens = 3};
  EXPECT_EQ(std::get<Prepared>(prepare(r, *tok_, m, 0)).params.gamma, 3);
  EXPECT_EQ(std::get<Prepared>(prepare(r, *tok_, m, 0)).params.sure_gamma, 3);  // asked for 3: no round drafts more
  r.speculative = {.enabled = true, .num_draft_tokens = 64};  // more than the drafter can draft: clamped
  EXPECT_EQ(std::get<Prepared>(prepare(r, *tok_, m, 0)).params.gamma, 7);
  m.has_drafter = false;
  auto nospec = prepare(r, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&nospec));
  EXPECT_EQ(std::get<ApiError>(nospec).param, "speculative.enabled");
  r.speculative = {};
  EXPECT_FALSE(std::get<Prepared>(prepare(r, *tok_, m, 0)).use_drafter);

  GenRequest c;
  c.model = "tiny";
  c.messages = {{"assistant", "x"}};
  auto order = prepare(c, *tok_, m, 0);
  ASSERT_TRUE(std::get_if<ApiError>(&order));
  EXPECT_EQ(std::get<ApiError>(order).param, "messages");
}

TEST(Metrics, PrometheusNamesAndHistograms) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  speculative::SpecStats st;
  st.resize(2);
  st.add_round(2, 1);
  st.generated = 2;
  m.record_job({.prompt_tokens = 5, .completion_tokens = 2, .cached_tokens = 3, .spec = &st, .ttft_s = 0.02,
                .total_s = 0.3});
  speculative::SpecStats wide;
  wide.resize(4);
  wide.add_round(4, 4);
  m.record_job({.completion_tokens = 5, .spec = &wide, .total_s = 200});
  const std::string t = m.prometheus({{"queue", 1}, {"slots", 2}, {"slots_busy", 1}, {"cache", {{"entries", 1}}}});
  for (const char* want :
       {"dspark_requests_total{route=\"/v1/chat/completions\",code=\"400\"} 1", "dspark_spec_draft_tokens_total 6",
        "dspark_spec_accepted_tokens_total 5", "dspark_spec_rounds_total 2",
        "dspark_spec_accepted_tokens_per_pos_total{position=\"1\"} 2",
        "dspark_spec_accepted_tokens_per_pos_total{position=\"4\"} 1", "dspark_request_duration_seconds_bucket{le=\"0.5\"} 1",
        "dspark_request_duration_seconds_bucket{le=\"+Inf\"} 2", "dspark_request_duration_seconds_count 2",
        "dspark_prompt_cache_hits_total 1", "dspark_slots{state=\"idle\"} 1", "dspark_queue_length 1",
        "# TYPE dspark_time_to_first_token_seconds histogram"})
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
  EXPECT_EQ(m.totals()["speculation"]["accepted_by_pos"], nlohmann::json({2, 1, 1, 1}));
}

}  // namespace
}  // namespace dspark::serve
