// MetricsServer: serves a prometheus::Registry as /metrics in the Prometheus text
// exposition format (version 0.0.4), formatted by prometheus-cpp's TextSerializer only
// when a scraper asks, over this package's HttpServer (http_server.h says why not
// prometheus-cpp's civetweb-based Exposer). The instruments themselves
// (prometheus::Counter, Gauge) are atomics.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   PL_ASSIGN_OR_RETURN(auto server, MetricsServer::Start({"0.0.0.0", 0}, registry));
//   server->port();   // the bound port (the one asked for, or the free one picked for 0)
//
// Any other path answers 404.
//
// Thread-safety: Start and the destructor from one thread; port() is thread-safe.
#ifndef PADDLE_LIKE_METRICS_METRICS_SERVER_H_
#define PADDLE_LIKE_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/metrics/http_server.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace pl::metrics {

struct MetricsServerOptions {
  std::string host = "0.0.0.0";  // an IPv4 address to listen on
  int port = 0;                  // 0: any free port
};

// The registry in the text exposition format.
std::string FormatMetrics(const prometheus::Registry& registry);

class MetricsServer {
 public:
  // UNAVAILABLE "cannot listen on HOST:PORT: Address already in use" (the cause from
  // bind(2)); INVALID_ARGUMENT for a bad host or a port outside [0, 65535].
  static StatusOr<std::unique_ptr<MetricsServer>> Start(const MetricsServerOptions& options,
                                                        std::shared_ptr<prometheus::Registry> registry);

  int port() const { return http_->port(); }

 private:
  MetricsServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<HttpServer> http_;  // last: stops before the registry goes
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_METRICS_SERVER_H_
