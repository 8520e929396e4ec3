#include "trainer/launcher/job_telemetry.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pl {

int JobTelemetry::MetricsPortFor(const std::string& name) const {
  if (auto it = metrics_ports_.find(name); it != metrics_ports_.end()) return it->second;  // a restart keeps it
  const int base = options_->metrics_port;
  if (base <= 0) return base;
  if (name == "master") return base;
  const int replicas = std::max(1, options_->replicas);
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
    return base + 1 + layout_->total_pservers() * replicas + n;
  }
  return 0;
}

std::vector<std::string> JobTelemetry::Args(const std::string& name) const {
  std::vector<std::string> args;
  if (!options_->logdir.empty()) args.insert(args.end(), {"--logdir", layout_->LogDir()});
  if (options_->metrics_port >= 0) {
    args.insert(args.end(), {"--metrics_port", std::to_string(MetricsPortFor(name)), "--metrics_port_file",
                             layout_->PortFile(name + ".metrics")});
  }
  if (name == "master" && options_->http_port >= 0) {
    args.insert(args.end(), {"--http_port", std::to_string(http_port_ > 0 ? http_port_ : options_->http_port),
                             "--http_port_file", layout_->PortFile("master.http")});
  }
  return args;
}

std::vector<std::pair<std::string, std::string>> JobTelemetry::Env(const std::string& name) const {
  std::vector<std::pair<std::string, std::string>> env;
  if (!options_->logdir.empty()) env.emplace_back("PL_LOGDIR", layout_->LogDir());
  if (options_->metrics_port >= 0) {
    env.emplace_back("PL_METRICS_PORT", std::to_string(MetricsPortFor(name)));
    env.emplace_back("PL_METRICS_PORT_FILE", layout_->PortFile(name + ".metrics"));
  }
  return env;
}

void JobTelemetry::Watch(const std::string& name) {
  if (options_->metrics_port >= 0) {
    ::unlink(layout_->PortFile(name + ".metrics").c_str());
    metrics_pending_.insert(name);
  }
  if (name == "master" && options_->http_port >= 0 && http_port_ <= 0) ::unlink(layout_->PortFile("master.http").c_str());
}

void JobTelemetry::Announce(const std::string& host) {
  for (auto it = metrics_pending_.begin(); it != metrics_pending_.end();) {
    const int port = ReadPortFile(layout_->PortFile(*it + ".metrics"));
    if (port == 0) {
      ++it;
      continue;
    }
    metrics_ports_[*it] = port;
    log_(absl::StrCat("metrics: http://", host, ":", port, "/metrics (", *it, ")"));
    it = metrics_pending_.erase(it);
  }
  if (options_->http_port >= 0 && http_port_ <= 0 && layout_->runs_master()) {
    if (const int port = ReadPortFile(layout_->PortFile("master.http")); port > 0) {
      http_port_ = port;
      log_(absl::StrCat("status page: http://", host, ":", port, "/"));
    }
  }
}

}  // namespace pl
