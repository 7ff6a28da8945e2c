// A one-line progress bar on stderr for long work (download, hashing, benchmarks), with the
// elapsed time and, while running, an estimate of the time left (elapsed x left / done).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dspark::tools {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, std::string unit = "")
      : label_(std::move(label)), total_(total), unit_(std::move(unit)), start_(std::chrono::steady_clock::now()) {}
  // Redraws at most every 100 ms (and always at the end).
  void update(uint64_t done) {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
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
    std::fprintf(stderr, "\r%s [%s] %3d%% %llu/%llu%s%s   ", label_.c_str(), bar.c_str(), (int)(frac * 100),
                 (unsigned long long)done, (unsigned long long)total_, unit_.c_str(), time.c_str());
    if (done >= total_) std::fprintf(stderr, "\n");
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
};

}  // namespace dspark::tools
