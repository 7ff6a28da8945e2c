// Generation slots and the request queue of `dspark serve`.
//
// N slots, each with its own Session (KV cache), drafter state and SeqHistory (what its KV
// holds). One scheduler thread owns them all and steps every busy slot in turn: one step is a
// prefill chunk or one speculative round, so concurrent requests interleave at decode-step
// granularity over one thread pool, a long prompt does not stall the others for its whole
// prefill, and a cancelled request (client gone, shutdown) leaves its slot before its next step.
// Every slot speculates on its own: a drafter never serializes other requests behind it. Slots
// that are all in their decode rounds are verified together in one Model::forward_multi
// (weights read once for all of them; bitwise the same logits as separate forwards).
//
// Prompt cache: a finished slot keeps its KV and history in place, and a snapshot goes to the
// host-side PromptCache (LRU within the byte budget). A new request goes to the idle slot whose
// history shares the longest token prefix with its prompt (least recently used on ties); if a
// snapshot shares a longer one, it is restored into that slot first. Either way a
// conversation's next turn prefills only its new tokens.
//
// Thread safety: submit(), state() and shutdown() may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/threadpool.h"
#include "model/model.h"
#include "serve/batch_cost.h"
#include "serve/batch_gate.h"
#include "serve/job.h"
#include "serve/metrics.h"
#include "serve/prompt_cache.h"
#include "speculative/spec_stepper.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {

// A fresh drafter state for one slot (weights may be shared between calls).
using DrafterFactory = std::function<Result<std::unique_ptr<speculative::Drafter>>()>;

struct SchedulerConfig {
  int n_slots = 1;
  int max_queue = 16;                 // waiting requests beyond the busy slots; more get 429
  int64_t n_ctx = 4096;
  int64_t max_batch = 512;            // largest forward chunk
  int64_t prefill_chunk = 256;        // prompt tokens per scheduler step
  size_t cache_bytes = 1ull << 30;    // snapshot budget of the prompt cache; 0 disables all reuse
  bool batch_rounds = true;           // verify concurrent rounds in one forward_multi
  int64_t max_window = 65;            // largest verify window (1 + the largest gamma a request may ask)
  // One sequence's verify cost by window size, ms (index 0 unused; may be empty): the prior of the
  // batched-forward cost model that charges each slot's governor (serve/batch_cost.h).
  std::vector<double> verify_ms;
  BatchGateConfig gate;               // may batched rounds draft at all (serve/batch_gate.h)
  // Answers already served, continued by every slot's drafter where its prompt lookup finds nothing
  // (speculative/answer_cache.h): memory budget; 0 = off.
  size_t answer_cache_bytes = 16ull << 20;
};

class Scheduler {
 public:
  // Builds the slots (a Session and, with a factory, a drafter each) and starts the thread.
  static Result<std::unique_ptr<Scheduler>> create(const model::Model& model, const tokenizer::Tokenizer& tok,
                                                   const SchedulerConfig& cfg, DrafterFactory drafters,
                                                   ThreadPool* pool, Metrics* metrics);
  ~Scheduler();

  enum class Submit { kQueued, kQueueFull, kStopping };
  Submit submit(std::shared_ptr<Job> job);

  // Refuses new jobs, lets running and queued ones finish for up to `grace`, cancels the rest,
  // and joins the thread. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  // {"queue", "max_queue", "slots", "slots_busy", "slot_state": [...], "cache": {...},
  //  "batching": {"enabled", "forwards", "rounds"}, "answer_cache": {...} or null when off}
  nlohmann::json state() const;
  bool has_drafter() const { return (bool)drafters_; }

 private:
  struct Slot {
    int id = 0;
    std::unique_ptr<model::Session> session;
    std::unique_ptr<speculative::Drafter> drafter;
    speculative::SeqHistory history;
    std::shared_ptr<Job> job;
    std::unique_ptr<speculative::SpecStepper> stepper;
    speculative::Governor governor;     // kept across the slot's generations (costs and backoff carry over)
    uint64_t last_used = 0;
    bool first_text = false;
    int64_t cached_tokens = 0;   // history length, mirrored for state() (guarded by mu_)
  };

  Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, const SchedulerConfig& cfg,
            DrafterFactory drafters, ThreadPool* pool, Metrics* metrics);
  void loop();
  void assign_locked();                  // queued jobs -> idle slots
  bool start_job(Slot& s);               // creates the stepper; false if the job failed at once
  void step(Slot& s);
  void run_steps(const std::vector<Slot*>& active);   // one step for every busy slot
  void batched_rounds(std::vector<Slot*>& batch);     // their rounds through one forward_multi
  void finish(Slot& s, Status error, bool cancelled);
  size_t kv_bytes_per_token() const;

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  SchedulerConfig cfg_;
  DrafterFactory drafters_;
  ThreadPool* pool_;
  Metrics* metrics_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<model::ForwardScratch> scratch_;   // batched rounds (scheduler thread only)
  BatchCost batch_cost_;                             // what a batched forward costs by rows (scheduler thread only)
  BatchGate gate_;                                   // drafting or plain for batched rounds (guarded by mu_)
  int busy_ = 0;
  PromptCache cache_;
  std::unique_ptr<speculative::AnswerCache> answers_;       // answers already served (scheduler thread; counters any)
  int64_t restores_ = 0;           // snapshots restored into a slot
  double cache_save_ms_ = 0, cache_restore_ms_ = 0;  // time the scheduler thread spent copying snapshots
  int64_t batched_forwards_ = 0;   // forward_multi calls (each verified 2+ rounds)
  int64_t batched_rounds_ = 0;     // rounds verified in them
  int64_t batched_rows_ = 0;       // window rows verified in them
  double batch_plan_ms_ = 0, batch_forward_ms_ = 0, batch_finish_ms_ = 0;  // drafting; forward_multi; accept + commit
  double step_ms_ = 0, batch_ms_ = 0;  // scheduler thread: single steps (prefill, a lone round, start); batched rounds
  double start_ms_ = 0, prefill_ms_ = 0, lone_ms_ = 0;  // step_ms_ by kind: job starts, prefill chunks, lone rounds
  uint64_t clock_ = 0;
  bool stopping_ = false;
  bool cancel_all_ = false;
  std::thread thread_;
};

}  // namespace dspark::serve
