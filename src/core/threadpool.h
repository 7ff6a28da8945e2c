// A small fork-join pool for kernels. The caller's thread takes part as thread 0.
// Workers spin briefly between jobs (decode issues ~130 jobs per token, so a condvar
// wake-up per job would cost more than the work) and then sleep.
// Thread safety: run() must be called from one thread at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dspark {

class ThreadPool {
 public:
  // fn(thread_index, n_threads)
  using Job = std::function<void(int, int)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs job(i, n) on every thread i in [0, n) and waits for all.
  void run(const Job& job);

  // Splits [0, n) into contiguous chunks of at least `grain` items, one per thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Number of physical cores reported by the OS (falls back to logical CPUs).
  static int default_threads();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const Job* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace dspark
