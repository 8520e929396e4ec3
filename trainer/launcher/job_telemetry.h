// JobTelemetry: seeing a launched job. --logdir, --metrics_port and --http_port are
// handed to the children (flags for the master and pservers; PL_LOGDIR, PL_METRICS_PORT
// and PL_METRICS_PORT_FILE for trainers, whose command may be any program), and each
// process's /metrics address is printed once its port file appears:
//   metrics: http://127.0.0.1:41234/metrics (pserver-0)
//   status page: http://127.0.0.1:41240/
//
// Thread-safety: not thread-safe; the launcher's loop uses it.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TELEMETRY_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TELEMETRY_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trainer/launcher/job_layout.h"
#include "trainer/launcher/launch_options.h"

namespace pl {

class JobTelemetry {
 public:
  using Log = std::function<void(const std::string&)>;
  // `options` and `layout` outlive it; `log` prints the announcements.
  JobTelemetry(const LaunchOptions* options, const JobLayout* layout, Log log)
      : options_(options), layout_(layout), log_(std::move(log)) {}

  // The /metrics port process `name` is given: --metrics_port for the master, then one
  // each for every pserver replica and trainer rank in that order (0: the OS picks; a
  // restart keeps the port announced before).
  int MetricsPortFor(const std::string& name) const;
  // Flags for a master's or pserver's command line.
  std::vector<std::string> Args(const std::string& name) const;
  // Environment variables for a trainer's.
  std::vector<std::pair<std::string, std::string>> Env(const std::string& name) const;
  // Process `name` is starting: its port files are removed, to be read afresh.
  void Watch(const std::string& name);
  // Announces the ports written since, as reached at `host`.
  void Announce(const std::string& host);

 private:
  const LaunchOptions* const options_;
  const JobLayout* const layout_;
  const Log log_;
  std::map<std::string, int> metrics_ports_;  // announced /metrics ports by process
  std::set<std::string> metrics_pending_;     // started, metrics port not read yet
  int http_port_ = -1;                        // the master's status page, once read
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_JOB_TELEMETRY_H_
