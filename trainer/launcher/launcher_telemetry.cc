// Launcher: seeing the job. --logdir, --metrics_port and --http_port are handed to the
// children (flags for the master and pservers, PL_LOGDIR / PL_METRICS_PORT /
// PL_METRICS_PORT_FILE for trainers, whose command may be any program), and each
// process's /metrics address is printed once its port file appears:
//   metrics: http://127.0.0.1:41234/metrics (pserver-0)
//   status page: http://127.0.0.1:41240/
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/launcher/launcher.h"

namespace pl {

int Launcher::MetricsPortFor(const std::string& name) const {
  if (auto it = metrics_ports_.find(name); it != metrics_ports_.end()) return it->second;  // a restart keeps it
  const int base = options_.metrics_port;
  if (base <= 0) return base;
  if (name == "master") return base;
  const int replicas = std::max(1, options_.replicas);
  int n = 0;
  if (absl::StartsWith(name, "pserver-")) {
    // "pserver-I", or with --replicas R "pserver-I.r": every replica a port of its own.
    const std::vector<std::string> parts = absl::StrSplit(name.substr(8), absl::MaxSplits('.', 1));
    int r = 0;
    if (absl::SimpleAtoi(parts[0], &n) && (parts.size() == 1 || absl::SimpleAtoi(parts[1], &r))) {
      return base + 1 + n * replicas + r;
    }
  }
  if (absl::StartsWith(name, "trainer-") && absl::SimpleAtoi(name.substr(8), &n)) {
    return base + 1 + total_pservers() * replicas + n;
  }
  return 0;
}

std::string Launcher::LogDir() const {
  if (options_.logdir.empty()) return "";
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(options_.logdir, ec);
  return ec ? options_.logdir : abs.string();
}

std::vector<std::string> Launcher::TelemetryArgs(const std::string& name) const {
  std::vector<std::string> args;
  if (!options_.logdir.empty()) args.insert(args.end(), {"--logdir", LogDir()});
  if (options_.metrics_port >= 0) {
    args.insert(args.end(), {"--metrics_port", std::to_string(MetricsPortFor(name)), "--metrics_port_file",
                             PortFile(name + ".metrics")});
  }
  if (name == "master" && options_.http_port >= 0) {
    args.insert(args.end(), {"--http_port", std::to_string(http_port_ > 0 ? http_port_ : options_.http_port),
                             "--http_port_file", PortFile("master.http")});
  }
  return args;
}

std::vector<std::pair<std::string, std::string>> Launcher::TelemetryEnv(const std::string& name) const {
  std::vector<std::pair<std::string, std::string>> env;
  if (!options_.logdir.empty()) env.emplace_back("PL_LOGDIR", LogDir());
  if (options_.metrics_port >= 0) {
    env.emplace_back("PL_METRICS_PORT", std::to_string(MetricsPortFor(name)));
    env.emplace_back("PL_METRICS_PORT_FILE", PortFile(name + ".metrics"));
  }
  return env;
}

void Launcher::WatchTelemetry(const std::string& name) {
  if (options_.metrics_port >= 0) {
    ::unlink(PortFile(name + ".metrics").c_str());
    metrics_pending_.insert(name);
  }
  if (name == "master" && options_.http_port >= 0 && http_port_ <= 0) ::unlink(PortFile("master.http").c_str());
}

void Launcher::AnnounceTelemetry() {
  const std::string host = !multi_node() || node_addr_.empty() ? "127.0.0.1" : node_addr_;
  for (auto it = metrics_pending_.begin(); it != metrics_pending_.end();) {
    const int port = ReadPortFile(PortFile(*it + ".metrics"));
    if (port == 0) {
      ++it;
      continue;
    }
    metrics_ports_[*it] = port;
    supervisor_->Log(absl::StrCat("metrics: http://", host, ":", port, "/metrics (", *it, ")"));
    it = metrics_pending_.erase(it);
  }
  if (options_.http_port >= 0 && http_port_ <= 0 && runs_master()) {
    if (const int port = ReadPortFile(PortFile("master.http")); port > 0) {
      http_port_ = port;
      supervisor_->Log(absl::StrCat("status page: http://", host, ":", port, "/"));
    }
  }
}

}  // namespace pl
