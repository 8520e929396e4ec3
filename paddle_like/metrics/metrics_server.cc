#include "paddle_like/metrics/metrics_server.h"

#include "paddle_like/metrics/process_metrics.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace pl::metrics {

std::string FormatMetrics(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect()) + ProcessMetricsText();
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options,
                                                              std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->registry_ = std::move(registry);
  const prometheus::Registry* r = server->registry_.get();
  PL_ASSIGN_OR_RETURN(server->http_, HttpServer::Start({options.host, options.port}, [r](const std::string& path) {
                        if (path != "/metrics") return HttpResponse{404, "text/plain; charset=utf-8", "try /metrics\n"};
                        return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", FormatMetrics(*r)};
                      }));
  return server;
}

}  // namespace pl::metrics
