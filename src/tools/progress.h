// A one-line progress bar on stderr for long work (download, hashing, benchmarks).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dspark::tools {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, std::string unit = "")
      : label_(std::move(label)), total_(total), unit_(std::move(unit)) {}
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
    std::fprintf(stderr, "\r%s [%s] %3d%% %llu/%llu%s", label_.c_str(), bar.c_str(), (int)(frac * 100),
                 (unsigned long long)done, (unsigned long long)total_, unit_.c_str());
    if (done >= total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  uint64_t total_;
  std::string unit_;
  std::chrono::steady_clock::time_point last_{};
  bool finished_ = false;
};

}  // namespace dspark::tools
