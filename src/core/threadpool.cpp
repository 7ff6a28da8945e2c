#include "core/threadpool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DSPARK_PAUSE() _mm_pause()
#else
#define DSPARK_PAUSE() ((void)0)
#endif

namespace dspark {

namespace {
// ~50-100 us of pause instructions: long enough to catch the next kernel of a decode step
// (they come every few tens of microseconds), short enough not to steal a shared core.
constexpr int kSpinIterations = 4000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(const Job& job) {
  if (n_threads_ == 1) {
    job(0, 1);
    return;
  }
  job_ = &job;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  job(0, n_threads_);
  // Spin briefly, then yield: on an oversubscribed machine the worker we wait for may be
  // descheduled, and burning our time slice would only delay it.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) DSPARK_PAUSE();
    else std::this_thread::yield();
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for a while, then sleep until the generation changes.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      DSPARK_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t n_chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || n_chunks == 1) {
    fn(0, n);
    return;
  }
  run([&](int i, int nt) {
    const int64_t per = (n + nt - 1) / nt;
    const int64_t begin = std::min<int64_t>(n, per * i);
    const int64_t end = std::min<int64_t>(n, begin + per);
    if (begin < end) fn(begin, end);
  });
}

int ThreadPool::default_threads() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string val = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "physical id") phys = val;
    if (key == "core id") cores.insert({phys, val});
  }
  int n = (int)cores.size();
  if (n <= 0) n = (int)std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

}  // namespace dspark
