// core/cpu_load.h: /proc/stat's "cpu" line read into busy ticks, and the CPUs' worth of time
// others used over an interval (what the kernel planner checks before it keeps a plan).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/cpu_load.h"

namespace dspark {
namespace {

TEST(CpuLoad, ParsesTheCpuLine) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  const auto t = parse_proc_stat("cpu  100 2 30 400 5 6 7 8 50 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->busy, 100u + 2 + 30 + 6 + 7 + 8);  // guest time is inside user already
  const auto old = parse_proc_stat("cpu 1 2 3 4");  // kernels before 2.6: four fields
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->busy, 6u);
}

TEST(CpuLoad, RejectsOtherText) {
  EXPECT_FALSE(parse_proc_stat("").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5").has_value());  // not the all-CPU line
  EXPECT_FALSE(parse_proc_stat("cpu  1 2").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4 5").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 -3 4 5").has_value());
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3 4").has_value());
}

TEST(CpuLoad, OthersAreTheBusyTimeThisProcessDidNotUse) {
  const MachineCpuTicks a{1000}, b{1000 + 300};  // 3 s busy in 2 s on 2 CPUs (100 Hz)
  EXPECT_NEAR(other_cpus(a, b, 100.0, 2.0, 2.0), 0.5, 1e-12);      // this process used 2 of the 3 s
  EXPECT_NEAR(other_cpus(a, b, 100.0, 0.0, 2.0), 1.5, 1e-12);
  EXPECT_EQ(other_cpus(a, b, 100.0, 3.5, 2.0), 0.0);  // tick rounding: never below 0
  EXPECT_EQ(other_cpus(b, a, 100.0, 0.0, 2.0), 0.0);  // counters that went back: no reading
  EXPECT_EQ(other_cpus(a, b, 100.0, 0.0, 0.0), 0.0);
}

// The live reading: this process keeps one CPU busy meanwhile. What others used is whatever else ran
// (other tests too, under `ctest -j`), so only its range is checked here; that this process's own
// time is left out is the pure function's test above (and an idle machine read 0.00-0.01 CPUs while a
// plan was timed, docs/KERNEL-PLANNER.md).
TEST(CpuLoad, ReadsThisMachineWithinItsCpus) {
  const OtherLoad load;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1;
  const auto others = load.cpus();
  if (!others) GTEST_SKIP() << "no /proc/stat here";
  EXPECT_GE(*others, 0.0);
  // At most every CPU, plus a tick of rounding over the interval (0.01 s / 0.2 s).
  EXPECT_LE(*others, (double)std::max(1u, std::thread::hardware_concurrency()) + 0.1);
}

}  // namespace
}  // namespace dspark
