// Shared helpers of the benchmark binaries: wall-clock timing with best-of-N
// repetitions, the machine's load average, where the binaries and the prepared data
// live, a child process whose peak resident memory is read back, and the report
// lines every benchmark prints.
//
// Every figure a benchmark prints is a ratio against a reference measured in the same
// run; ReportLine keeps that form uniform:
//   <name>  <value> <unit>  ref <ref value> <unit> (<what the ref is>)  ratio <r>
//
// Thread-safety: the functions are reentrant; nothing here is shared between threads.
#ifndef PADDLE_LIKE_BENCHMARKS_BENCH_UTIL_H_
#define PADDLE_LIKE_BENCHMARKS_BENCH_UTIL_H_

#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "paddle_like/core/cli.h"

namespace pl::bench {

inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `fn` (one unit of work) repeatedly for at least `min_seconds` per repetition
// and returns the best seconds-per-call over `reps` repetitions. The best, not the
// mean: on a shared machine the noise only ever adds time.
inline double BestSecondsPerCall(const std::function<void()>& fn, int reps, double min_seconds) {
  fn();  // warm-up: first-touch page faults, thread pools, caches
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    int64_t calls = 0;
    const double start = NowSeconds();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = NowSeconds() - start;
    } while (elapsed < min_seconds);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

// "1.23 1.10 0.98" from /proc/loadavg, or "?" when unreadable.
inline std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
  return buf;
}

// The directory holding this executable (build/bin), from /proc/self/exe.
inline std::string SelfBinDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// <build>/data/fashion-mnist: where `make data` (or pl-convert by hand) puts the records.
inline std::string DefaultFashionDir() { return SelfBinDir() + "/../data/fashion-mnist"; }

inline bool FileExists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// The parts --only names (empty: all), each one of `known`; otherwise a one-line usage
// error naming --only, and exit.
inline std::set<std::string> OnlyParts(const cli::Program& program, const std::vector<std::string>& parts,
                                       const std::set<std::string>& known) {
  for (const std::string& part : parts) {
    if (known.count(part) == 0) {
      cli::ExitWithUsageError(program,
                              "--only: unknown part '" + part + "' (known: " + absl::StrJoin(known, ",") + ")");
    }
  }
  return {parts.begin(), parts.end()};
}

// Runs argv to completion with stdout/stderr sent to `log_path`; returns its exit code
// (or -1 when it could not start or died by a signal) and its peak resident set in
// bytes, from wait4's rusage of exactly that child.
struct ChildRun {
  int exit_code = -1;
  int64_t max_rss_bytes = 0;
  double seconds = 0;
};
inline ChildRun RunAndMeasure(const std::vector<std::string>& argv, const std::string& log_path) {
  ChildRun result;
  const double start = NowSeconds();
  const pid_t pid = fork();
  if (pid < 0) return result;
  if (pid == 0) {
    FILE* log = std::fopen(log_path.c_str(), "w");
    if (log != nullptr) {
      dup2(fileno(log), STDOUT_FILENO);
      dup2(fileno(log), STDERR_FILENO);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (wait4(pid, &status, 0, &usage) == pid) {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  }
  result.seconds = NowSeconds() - start;
  return result;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's resident set (VmRSS of /proc/self/status), in bytes; 0 if unreadable.
inline int64_t SelfRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

// One result line; `ratio` is value / ref unless the caller passes its own.
inline void ReportLine(const std::string& name, double value, const std::string& unit, double ref,
                       const std::string& ref_unit, const std::string& ref_what, double ratio) {
  std::printf("  %-44s %10.4g %-9s ref %10.4g %-9s (%s)  ratio %.3f\n", name.c_str(), value, unit.c_str(), ref,
              ref_unit.c_str(), ref_what.c_str(), ratio);
  std::fflush(stdout);
}

inline void Header(const std::string& title) {
  std::printf("\n== %s ==\n", title.c_str());
  std::fflush(stdout);
}

}  // namespace pl::bench

#endif  // PADDLE_LIKE_BENCHMARKS_BENCH_UTIL_H_
