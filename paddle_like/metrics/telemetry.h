// ProcessTelemetry: what one process (master, pserver, trainer) owns to be seen: its
// TensorBoard event file under <logdir>/<process name>/ and its Prometheus registry,
// served on /metrics when a metrics port is given. The process's samplers and step
// recorders (job_sampler.h, pserver_sampler.h, trainer_telemetry.h) write into both.
//
// Every metric carries the labels role="trainer|pserver|master" and index="N", so one
// Prometheus scraping a whole job tells the processes apart even when names repeat.
//
// Thread-safety: Open from one thread; the accessors are thread-safe, and so are the
// EventFileWriter and prometheus::Registry they return.
#ifndef PADDLE_LIKE_METRICS_TELEMETRY_H_
#define PADDLE_LIKE_METRICS_TELEMETRY_H_

#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/metrics/event_file_writer.h"
#include "paddle_like/metrics/metrics_server.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace pl::metrics {

struct TelemetryOptions {
  std::string logdir;              // empty: no event file
  std::string process_name;        // "trainer-0": the event file's subdirectory
  std::string role;                // label role: "trainer", "pserver", "master"
  std::string index = "0";         // label index
  std::string metrics_host = "0.0.0.0";
  int metrics_port = -1;           // -1: /metrics not served; 0: any free port
  std::string metrics_port_file;   // the bound port is written here (atomically); empty: not
  absl::Duration flush_every = absl::Seconds(2);
};

class ProcessTelemetry {
 public:
  // Errors name the flag: "--logdir: cannot create the log directory 'D': ..."
  // (its code from errno), "--metrics_port: cannot listen on
  // H:P: Address already in use" (UNAVAILABLE), "--metrics_port_file: ...".
  static StatusOr<std::unique_ptr<ProcessTelemetry>> Open(const TelemetryOptions& options);
  ~ProcessTelemetry();

  // nullptr when no logdir was given.
  EventFileWriter* events() const { return events_.get(); }
  prometheus::Registry& registry() const { return *registry_; }
  // {"role": ..., "index": ...}: the constant labels of every family.
  const std::map<std::string, std::string>& labels() const { return labels_; }
  // The bound /metrics port, -1 when not served.
  int metrics_port() const { return server_ ? server_->port() : -1; }

 private:
  ProcessTelemetry() = default;

  std::map<std::string, std::string> labels_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<EventFileWriter> events_;
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TELEMETRY_H_
