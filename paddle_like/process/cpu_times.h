// CpuTimes: the CPU time a process has used, in user mode and in the kernel, so that
// closing lines and benchmarks can say where a job's cores went (the kernel's share
// is its network stack's work, which a wall-clock split into compute and exchange
// cannot show).
//
// Thread-safety: the functions are thread-safe.
#ifndef PADDLE_LIKE_PROCESS_CPU_TIMES_H_
#define PADDLE_LIKE_PROCESS_CPU_TIMES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "paddle_like/core/status.h"

namespace pl::process {

struct CpuTimes {
  double user_s = 0;
  double sys_s = 0;
  double total_s() const { return user_s + sys_s; }
  CpuTimes operator-(const CpuTimes& earlier) const { return {user_s - earlier.user_s, sys_s - earlier.sys_s}; }
};

// Every thread of this process, so far (getrusage).
CpuTimes SelfCpuTimes();
// Process `pid`'s, every thread, from /proc/PID/stat (clock-tick resolution). NOT_FOUND
// once it is gone (after it is reaped), DATA_LOSS when the file cannot be parsed.
StatusOr<CpuTimes> ProcessCpuTimes(pid_t pid);

// "cpu per step: U ms user, K ms kernel (C cores busy)": `used` over `steps` steps that
// took `wall_s` seconds. Trainers end with it; benchmarks parse it.
std::string CpuPerStepLine(const CpuTimes& used, int64_t steps, double wall_s);

}  // namespace pl::process

#endif  // PADDLE_LIKE_PROCESS_CPU_TIMES_H_
