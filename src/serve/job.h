// One generation request on its way through the scheduler, and the channel its HTTP handler
// reads: streamed text, then the result. The scheduler thread writes, one handler thread reads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "speculative/spec_decode.h"

namespace dspark::serve {

struct Job {
  using Clock = std::chrono::steady_clock;

  // Input, set before submit.
  std::vector<int32_t> prompt;
  speculative::SpecParams params;     // gamma = this request's draft length cap
  bool use_drafter = false;    // run the slot's drafter (false: serial decoding)
  Clock::time_point t_submit = Clock::now();

  // Set by the reader (client gone) or the server (shutdown); the scheduler stops the job
  // before its next step and frees the slot.
  std::atomic<bool> cancel{false};

  // Output channel.
  std::mutex mu;
  std::condition_variable cv;
  std::string text;            // new text not yet taken by the reader
  bool finished = false;
  // Valid once finished:
  Status error;                // a failed generation (the request gets a 500)
  bool cancelled = false;      // stopped before its end (cancel, shutdown)
  speculative::SpecResult result;     // tokens, full text, finish reason, timings, spec stats
  bool spec_ran = false;       // a drafter ran (usage.speculation is reported)
  int64_t cached_tokens = 0;   // prompt tokens whose KV was reused
  int slot = -1;
  double queue_ms = 0, ttft_ms = 0, total_ms = 0;

  // Appends streamed text (scheduler thread).
  void push_text(std::string_view t) {
    std::lock_guard lk(mu);
    text.append(t);
    cv.notify_all();
  }
  // Blocks until there is new text or the job has finished, at most `timeout`; moves the new
  // text into *out. Returns true once the job has finished and all its text was taken.
  bool wait(std::string* out, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu);
    cv.wait_for(lk, timeout, [&] { return finished || !text.empty(); });
    out->swap(text);
    text.clear();
    return finished && out->empty();
  }
  bool is_finished() {
    std::lock_guard lk(mu);
    return finished;
  }
};

}  // namespace dspark::serve
