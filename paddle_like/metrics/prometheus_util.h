// Short helpers over prometheus-cpp's builders: one instrument per family, with the
// process's constant labels (role, index), which is how every paddle_like metric is made.
//
// Thread-safety: as prometheus::Registry (thread-safe).
#ifndef PADDLE_LIKE_METRICS_PROMETHEUS_UTIL_H_
#define PADDLE_LIKE_METRICS_PROMETHEUS_UTIL_H_

#include <map>
#include <string>
#include <vector>

#include "paddle_like/metrics/telemetry.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pl::metrics {

inline prometheus::Counter* NewCounter(ProcessTelemetry* t, const std::string& name, const std::string& help,
                                       const std::map<std::string, std::string>& labels = {}) {
  return &prometheus::BuildCounter().Name(name).Help(help).Labels(t->labels()).Register(t->registry()).Add(labels);
}

inline prometheus::Gauge* NewGauge(ProcessTelemetry* t, const std::string& name, const std::string& help,
                                   const std::map<std::string, std::string>& labels = {}) {
  return &prometheus::BuildGauge().Name(name).Help(help).Labels(t->labels()).Register(t->registry()).Add(labels);
}

// A family whose instruments the caller adds and removes (labels that change).
inline prometheus::Family<prometheus::Gauge>& NewGaugeFamily(ProcessTelemetry* t, const std::string& name,
                                                             const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(t->labels()).Register(t->registry());
}

inline prometheus::Family<prometheus::Counter>& NewCounterFamily(ProcessTelemetry* t, const std::string& name,
                                                                 const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(t->labels()).Register(t->registry());
}

inline prometheus::Histogram* NewHistogram(ProcessTelemetry* t, const std::string& name, const std::string& help,
                                           std::vector<double> buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Labels(t->labels()).Register(t->registry())
              .Add({}, prometheus::Histogram::BucketBoundaries(std::move(buckets)));
}

// Brings a Prometheus counter up to `total`, a cumulative count kept elsewhere (a
// pserver's StatsResponse, the master's JobStatus): counters only go up, so a total
// that went down (the process behind it restarted) is ignored until it passes again.
inline void AdvanceCounter(prometheus::Counter* c, double total) {
  const double delta = total - c->Value();
  if (delta > 0) c->Increment(delta);
}

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_PROMETHEUS_UTIL_H_
