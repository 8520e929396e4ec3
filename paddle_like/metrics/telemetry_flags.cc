#include "paddle_like/metrics/telemetry_flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

ABSL_FLAG(std::string, logdir, "", "write TensorBoard event files under DIR/<process name>/ (empty: none)");
ABSL_FLAG(int, metrics_port, -1, "serve Prometheus /metrics on this port (-1: off; 0: any free port)");
ABSL_FLAG(std::string, metrics_port_file, "", "write the bound /metrics port here (atomically) once serving");

namespace pl::metrics {

std::vector<cli::EnvFallback> WithTelemetryEnv(std::vector<cli::EnvFallback> env) {
  env.insert(env.end(), {{"logdir", "PL_LOGDIR"},
                         {"metrics_port", "PL_METRICS_PORT"},
                         {"metrics_port_file", "PL_METRICS_PORT_FILE"}});
  return env;
}

TelemetryOptions TelemetryOptionsFromFlags(const std::string& role, const std::string& index,
                                           const std::string& metrics_host) {
  TelemetryOptions o;
  o.logdir = absl::GetFlag(FLAGS_logdir);
  o.process_name = log::ProcessName();
  o.role = role;
  o.index = index;
  o.metrics_host = metrics_host;
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  return o;
}

std::unique_ptr<ProcessTelemetry> OpenTelemetryOrExit(const cli::Program& program, const std::string& role,
                                                      const std::string& index, const std::string& metrics_host) {
  const TelemetryOptions o = TelemetryOptionsFromFlags(role, index, metrics_host);
  cli::CheckOrExit(program, {cli::CheckRange("metrics_port", o.metrics_port, -1, 65535)});
  auto telemetry = ProcessTelemetry::Open(o);
  if (!telemetry.ok()) {
    // A port someone else holds is not a bad command line; a directory we cannot write is.
    if (absl::IsUnavailable(telemetry.status())) {
      log::Error(std::string(telemetry.status().message()));
      std::exit(1);
    }
    cli::ExitWithUsageError(program, telemetry.status().message());
  }
  if (EventFileWriter* events = (*telemetry)->events()) log::Info(absl::StrCat("event files: ", events->path()));
  if (const int port = (*telemetry)->metrics_port(); port >= 0) {
    log::Info(absl::StrCat("metrics: serving /metrics on ", metrics_host, ":", port));
  }
  return std::move(telemetry).value();
}

}  // namespace pl::metrics
