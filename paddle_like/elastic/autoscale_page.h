// pl-autoscale's HTTP face, from an Autoscaler::View: `/` a status page (capacity, each
// job's bounds, target, live trainers and last reason, the last decisions),
// `/status.json` the same as JSON (for scripts: benchmarks/elastic_cluster reads it),
// `/metrics` in Prometheus' text format, `/healthz`.
//
// Thread-safety: a pure function of its arguments.
#ifndef PADDLE_LIKE_ELASTIC_AUTOSCALE_PAGE_H_
#define PADDLE_LIKE_ELASTIC_AUTOSCALE_PAGE_H_

#include <string>

#include "paddle_like/elastic/autoscaler.h"
#include "paddle_like/metrics/http_server.h"

namespace pl::elastic {

metrics::HttpResponse ServeAutoscalePage(const Autoscaler::View& view, const std::string& path);

}  // namespace pl::elastic

#endif  // PADDLE_LIKE_ELASTIC_AUTOSCALE_PAGE_H_
