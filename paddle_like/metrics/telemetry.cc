#include "paddle_like/metrics/telemetry.h"

#include "absl/strings/str_cat.h"
#include "paddle_like/io/atomic_file.h"
#include "prometheus/registry.h"

namespace pl::metrics {

StatusOr<std::unique_ptr<ProcessTelemetry>> ProcessTelemetry::Open(const TelemetryOptions& options) {
  std::unique_ptr<ProcessTelemetry> t(new ProcessTelemetry());
  t->labels_ = {{"role", options.role}, {"index", options.index}};
  t->registry_ = std::make_shared<prometheus::Registry>();
  if (!options.logdir.empty()) {
    EventFileOptions eo;
    eo.flush_every = options.flush_every;
    auto events = EventFileWriter::Open(absl::StrCat(options.logdir, "/", options.process_name), eo);
    if (!events.ok()) return Annotate(events.status(), "--logdir");
    t->events_ = std::move(events).value();
  }
  if (options.metrics_port >= 0) {
    auto server = MetricsServer::Start({options.metrics_host, options.metrics_port}, t->registry_);
    if (!server.ok()) return Annotate(server.status(), "--metrics_port");
    t->server_ = std::move(server).value();
    if (!options.metrics_port_file.empty()) {
      PL_RETURN_IF_ERROR(Annotate(
          WriteFileAtomically(options.metrics_port_file, absl::StrCat(t->server_->port(), "\n")),
          "--metrics_port_file"));
    }
  }
  return t;
}

ProcessTelemetry::~ProcessTelemetry() {
  server_.reset();  // no scrape runs while the registry goes
  if (events_) (void)events_->Close();
}

}  // namespace pl::metrics
