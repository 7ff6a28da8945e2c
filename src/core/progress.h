// A one-line progress bar on stderr for long work (download, hashing, regen, training,
// benchmarks), with the elapsed time and, while running, an estimate of the time left
// (elapsed x left / done). Redirected to a file, it prints one plain line every 10 s instead.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dspark {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, std::string unit = "")
      : label_(std::move(label)), total_(total), unit_(std::move(unit)), start_(std::chrono::steady_clock::now()) {}
  // Text shown after the counts (e.g. "812 tok/s"); set before update().
  void set_suffix(std::string s) { suffix_ = std::move(s); }
  // Redraws at most every 100 ms on a terminal (10 s otherwise), and always at the end.
  void update(uint64_t done) {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    const auto every = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10000);
    if (done < total_ && now - last_ < every) return;
    finished_ = done >= total_;
    last_ = now;
    const double frac = total_ ? (double)done / (double)total_ : 1.0;
    const int width = 30, fill = (int)(frac * width);
    std::string bar(fill, '#');
    bar.resize(width, ' ');
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    std::string time = " ";
    time += clock_text(elapsed_s);
    if (!finished_) time.append(" ETA ").append(done ? clock_text(elapsed_s * (double)(total_ - done) / (double)done) : "?");
    std::fprintf(stderr, "%s%s [%s] %3d%% %llu/%llu%s%s%s%s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
                 (int)(frac * 100), (unsigned long long)done, (unsigned long long)total_, unit_.c_str(),
                 suffix_.empty() ? "" : " ", suffix_.c_str(), time.c_str(), tty_ ? "\033[K" : "");
    if (done >= total_ || !tty_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  // "42s", "3m05s", "1h02m".
  static std::string clock_text(double s) {
    const long long t = (long long)(s + 0.5);
    char buf[32];
    if (t < 60) std::snprintf(buf, sizeof buf, "%llds", t);
    else if (t < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
    return buf;
  }

  std::string label_;
  uint64_t total_;
  std::string unit_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
  bool finished_ = false;
  bool tty_ = ::isatty(2) != 0;
  std::string suffix_;
};

}  // namespace dspark
