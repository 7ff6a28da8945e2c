#include "core/cpu_load.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace dspark {

std::optional<MachineCpuTicks> parse_proc_stat(std::string_view text) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice" (guest time is already
  // inside user / nice, so it is not added again).
  if (text.substr(0, 4) != "cpu ") return std::nullopt;
  const std::string_view line = text.substr(0, text.find('\n'));
  uint64_t v[8] = {};
  size_t at = 3;
  int got = 0;
  for (; got < 8; ++got) {
    while (at < line.size() && line[at] == ' ') ++at;
    if (at >= line.size()) break;
    const auto r = std::from_chars(line.data() + at, line.data() + line.size(), v[got]);
    if (r.ec != std::errc() || (r.ptr != line.data() + line.size() && *r.ptr != ' ')) return std::nullopt;
    at = (size_t)(r.ptr - line.data());
  }
  if (got < 4) return std::nullopt;  // kernels before 2.6 had only user nice system idle
  MachineCpuTicks t;
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // idle (v[3]) and iowait (v[4]) are not busy
  return t;
}

double other_cpus(const MachineCpuTicks& before, const MachineCpuTicks& after, double ticks_per_s, double own_s,
                  double wall_s) {
  if (!(wall_s > 0) || !(ticks_per_s > 0) || after.busy < before.busy) return 0;
  const double busy_s = (double)(after.busy - before.busy) / ticks_per_s;
  return std::max(0.0, (busy_s - own_s) / wall_s);
}

namespace {

std::optional<MachineCpuTicks> read_machine() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  return parse_proc_stat(line);
}

double seconds(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return 0;
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

}  // namespace

OtherLoad::OtherLoad()
    : machine_(read_machine()), own_s_(seconds(CLOCK_PROCESS_CPUTIME_ID)), wall_s_(seconds(CLOCK_MONOTONIC)) {}

std::optional<double> OtherLoad::cpus() const {
  const long hz = sysconf(_SC_CLK_TCK);
  const auto now = read_machine();
  if (!machine_ || !now || hz <= 0) return std::nullopt;
  return other_cpus(*machine_, *now, (double)hz, seconds(CLOCK_PROCESS_CPUTIME_ID) - own_s_,
                    seconds(CLOCK_MONOTONIC) - wall_s_);
}

}  // namespace dspark
