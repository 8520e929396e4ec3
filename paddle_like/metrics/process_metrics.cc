#include "paddle_like/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/build_info.h"

namespace pl::metrics {
namespace {

void Gauge(std::string* out, const char* name, const char* type, const char* help, double value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ", value, "\n");
}

// Seconds since boot at which this process started, from /proc/self/stat field 22.
bool ReadStat(double* cpu_seconds, double* start_after_boot_s, double* vsize) {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; fields >> x;) f.push_back(x);
  // After "pid (comm) ": state is field 3, utime 14, stime 15, starttime 22, vsize 23.
  if (f.size() < 21) return false;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  *cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
  *start_after_boot_s = std::stod(f[19]) / tick;
  *vsize = std::stod(f[20]);
  return true;
}

double BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return -1;
}

}  // namespace

std::string ProcessMetricsText() {
  std::string out;
  double cpu = 0, start = 0, vsize = 0;
  if (ReadStat(&cpu, &start, &vsize)) {
    Gauge(&out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu);
    Gauge(&out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
    if (const double boot = BootTime(); boot > 0) {
      Gauge(&out, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
            boot + start);
    }
  }
  std::ifstream statm("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  if (statm >> pages_total >> pages_resident) {
    Gauge(&out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
          pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int fds = -1;  // the directory's own descriptor is not counted
    while (readdir(dir) != nullptr) ++fds;
    closedir(dir);
    Gauge(&out, "process_open_fds", "gauge", "Number of open file descriptors.", fds - 2);  // minus . and ..
  }
  if (rlimit lim; getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    Gauge(&out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
          static_cast<double>(lim.rlim_cur));
  }
  absl::StrAppend(&out, "# HELP pl_build_info The paddle_like build this process runs (always 1).\n",
                  "# TYPE pl_build_info gauge\npl_build_info{version=\"", PL_PROJECT_VERSION, "\",commit=\"",
                  PL_GIT_COMMIT, "\"} 1\n");
  return out;
}

}  // namespace pl::metrics
