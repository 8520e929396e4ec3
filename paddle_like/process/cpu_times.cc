#include "paddle_like/process/cpu_times.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl::process {
namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

}  // namespace

CpuTimes SelfCpuTimes() {
  rusage r{};
  ::getrusage(RUSAGE_SELF, &r);
  return {Seconds(r.ru_utime), Seconds(r.ru_stime)};
}

StatusOr<CpuTimes> ProcessCpuTimes(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  std::string stat;
  if (!in || !std::getline(in, stat)) return absl::NotFoundError(absl::StrCat("no process ", pid, " (", path, ")"));
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::DataLossError(absl::StrCat(path, " has no ')'"));
  std::istringstream fields(stat.substr(paren + 1));
  // Field 3 is the state; utime and stime are fields 14 and 15 (proc(5)).
  std::string skip;
  for (int field = 3; field <= 13; ++field) fields >> skip;
  long long utime = -1, stime = -1;
  fields >> utime >> stime;
  if (!fields || utime < 0 || stime < 0) return absl::DataLossError(absl::StrCat(path, ": no utime and stime"));
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return CpuTimes{utime / tick, stime / tick};
}

std::string CpuPerStepLine(const CpuTimes& used, int64_t steps, double wall_s) {
  const double n = static_cast<double>(steps > 0 ? steps : 1);
  return absl::StrFormat("cpu per step: %.2f ms user, %.2f ms kernel (%.2f cores busy)", used.user_s * 1e3 / n,
                         used.sys_s * 1e3 / n, wall_s > 0 ? used.total_s() / wall_s : 0.0);
}

}  // namespace pl::process
