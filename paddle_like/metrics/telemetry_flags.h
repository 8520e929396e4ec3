// The telemetry flags every paddle_like binary shares, defined once here:
//   --logdir DIR            TensorBoard event files under DIR/<process name>/ (env PL_LOGDIR)
//   --metrics_port P        serve /metrics on P (-1 off, 0 any free port; env PL_METRICS_PORT)
//   --metrics_port_file F   write the bound metrics port to F (env PL_METRICS_PORT_FILE)
// pl-launch sets the environment variables for trainers (whose command may be any
// program, a Python script included) and passes the flags to the master and pservers.
//
// Thread-safety: call from main, after pl::cli::ParseOrExit, before other threads start.
#ifndef PADDLE_LIKE_METRICS_TELEMETRY_FLAGS_H_
#define PADDLE_LIKE_METRICS_TELEMETRY_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include "paddle_like/core/cli.h"
#include "paddle_like/metrics/telemetry.h"

namespace pl::metrics {

// `env` followed by {logdir, PL_LOGDIR}, {metrics_port, PL_METRICS_PORT} and
// {metrics_port_file, PL_METRICS_PORT_FILE}: a Program's environment fallbacks.
std::vector<cli::EnvFallback> WithTelemetryEnv(std::vector<cli::EnvFallback> env);

// The options the flags ask for; the process name is pl::log's (set it first).
TelemetryOptions TelemetryOptionsFromFlags(const std::string& role, const std::string& index,
                                           const std::string& metrics_host);

// Opens the process's telemetry or exits with one line: a --metrics_port outside
// [-1, 65535] or a --logdir that cannot be written is "<program>: error: ..." with exit
// status 2 (bad input); a port that cannot be bound exits 1 naming host, port and cause.
// Logs where the event files and /metrics are.
std::unique_ptr<ProcessTelemetry> OpenTelemetryOrExit(const cli::Program& program, const std::string& role,
                                                      const std::string& index, const std::string& metrics_host);

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TELEMETRY_FLAGS_H_
