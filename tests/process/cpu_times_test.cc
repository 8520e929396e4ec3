#include "paddle_like/process/cpu_times.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pl::process {
namespace {

// Spins until this thread has used `seconds` of CPU, and returns what it computed (so
// the loop is not optimised away).
double BurnCpu(double seconds) {
  const CpuTimes start = SelfCpuTimes();
  double x = 0;
  while ((SelfCpuTimes() - start).user_s < seconds) {
    for (int i = 0; i < 100000; ++i) x = std::sqrt(x + i);
  }
  return x;
}

TEST(CpuTimesTest, SelfAndProcCountTheSameWork) {
  const CpuTimes self_before = SelfCpuTimes();
  auto proc_before = ProcessCpuTimes(getpid());
  ASSERT_TRUE(proc_before.ok()) << proc_before.status();
  EXPECT_GT(BurnCpu(0.3), 0);
  const CpuTimes self = SelfCpuTimes() - self_before;
  auto proc_after = ProcessCpuTimes(getpid());
  ASSERT_TRUE(proc_after.ok()) << proc_after.status();
  const CpuTimes proc = *proc_after - *proc_before;
  EXPECT_GE(self.user_s, 0.3);
  EXPECT_LT(self.total_s(), 1.0);
  // /proc counts in clock ticks (10 ms here): the two agree within a few.
  EXPECT_NEAR(proc.total_s(), self.total_s(), 0.05);
}

TEST(CpuTimesTest, AGoneProcessIsNotFound) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  auto cpu = ProcessCpuTimes(child);
  EXPECT_TRUE(absl::IsNotFound(cpu.status())) << cpu.status();
}

TEST(CpuTimesTest, PerStepLineDividesByStepsAndWallTime) {
  EXPECT_EQ(CpuPerStepLine({0.6, 0.2}, 200, 0.4), "cpu per step: 3.00 ms user, 1.00 ms kernel (2.00 cores busy)");
  // No steps: no division by zero.
  EXPECT_THAT(CpuPerStepLine({0.1, 0}, 0, 0), ::testing::HasSubstr("0.00 cores busy"));
}

}  // namespace
}  // namespace pl::process
