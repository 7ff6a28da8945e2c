// How much CPU time everything but this process used over an interval: to tell whether a timing
// (the kernel planner's) ran on a quiet machine. Linux: /proc/stat's first line (all CPUs, in
// clock ticks) against this process's own CPU time; elsewhere the reading is unavailable.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dspark {

// The machine's busy CPU time in clock ticks: user + nice + system + irq + softirq + steal (steal: time
// the hypervisor gave this VM's CPUs to others).
struct MachineCpuTicks {
  uint64_t busy = 0;
};

// The "cpu " line of /proc/stat's text; nullopt when it has none or it is malformed.
std::optional<MachineCpuTicks> parse_proc_stat(std::string_view text);

// CPUs' worth of time others used between two readings wall_s seconds apart while this process used
// own_s seconds of CPU: (busy ticks / ticks_per_s - own_s) / wall_s, at least 0.
double other_cpus(const MachineCpuTicks& before, const MachineCpuTicks& after, double ticks_per_s, double own_s,
                  double wall_s);

// A reading now and, later, what others used since it. Unavailable readings give nullopt.
class OtherLoad {
 public:
  OtherLoad();  // the first reading
  std::optional<double> cpus() const;  // CPUs' worth other processes (and steal) used since the first reading
 private:
  std::optional<MachineCpuTicks> machine_;
  double own_s_ = 0, wall_s_ = 0;
};

}  // namespace dspark
