// A one-line progress bar on stderr for long work (download, hashing, benchmarks).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace dspark::tools {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, std::string unit = "")
      : label_(std::move(label)), total_(total), unit_(std::move(unit)), start_(std::chrono::steady_clock::now()) {}
  // Text shown after the counts (e.g. "812 tok/s"); set before update().
  void set_suffix(std::string s) { suffix_ = std::move(s); }
  // Redraws at most every 100 ms (and always at the end).
  void update(uint64_t done) {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    // Redirected to a log file: one plain line every 10 s instead of a redrawn bar.
    const auto every = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10000);
    if (done < total_ && now - last_ < every) return;
    finished_ = done >= total_;
    last_ = now;
    const double frac = total_ ? (double)done / (double)total_ : 1.0;
    const int width = 30, fill = (int)(frac * width);
    std::string bar(fill, '#');
    bar.resize(width, ' ');
    // ETA from the average rate so far.
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string eta;
    if (done > 0 && done < total_) {
      const long s = (long)(elapsed * (double)(total_ - done) / (double)done);
      char buf[48];
      std::snprintf(buf, sizeof buf, " ETA %ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
      eta = buf;
    }
    std::fprintf(stderr, "%s%s [%s] %3d%% %llu/%llu%s%s%s%s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(), (int)(frac * 100),
                 (unsigned long long)done, (unsigned long long)total_, unit_.c_str(), suffix_.empty() ? "" : " ",
                 suffix_.c_str(), eta.c_str(), tty_ ? "\033[K" : "");
    if (done >= total_ || !tty_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  uint64_t total_;
  std::string unit_;
  std::chrono::steady_clock::time_point last_{};
  bool finished_ = false;
  bool tty_ = ::isatty(2) != 0;
  std::string suffix_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dspark::tools
