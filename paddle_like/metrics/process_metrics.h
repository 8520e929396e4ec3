// The standard process metrics every Prometheus client library exports (CPU seconds,
// resident memory, open descriptors, start time) and `pl_build_info`, as Prometheus
// text, read from /proc at each scrape; appended to every /metrics (metrics_server.h).
//
// Thread-safety: a free function; reads only /proc/self.
#ifndef PADDLE_LIKE_METRICS_PROCESS_METRICS_H_
#define PADDLE_LIKE_METRICS_PROCESS_METRICS_H_

#include <string>

namespace pl::metrics {

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds, and
// pl_build_info{version,commit} 1. A value /proc does not give is left out.
std::string ProcessMetricsText();

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_PROCESS_METRICS_H_
