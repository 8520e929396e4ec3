// PserverSampler: turns a pserver's own counters (proto::StatsResponse, what its Stats
// RPC answers) into its telemetry, sampled from the pserver's main-loop timer so the
// Push/Pull paths carry no instrumentation at all:
//   pl_pserver_pushes_total, pl_pserver_pushes_rejected_total,
//   pl_pserver_pushes_refused_norm_total, pl_pserver_pulls_total,
//   pl_pserver_sparse_rows_pulled_total, pl_pserver_sparse_rows_pushed_total  counters
//   pl_pserver_version, pl_pserver_dense_bytes, pl_pserver_sparse_rows,
//   pl_pserver_resident_bytes, pl_pserver_shm_regions, pl_pserver_shm_bytes,
//   pl_pserver_dense_links   gauges
//   pl_pserver_table_rows{table}, pl_pserver_table_bytes{table}                 gauges
//   pl_pserver_table_rows_evicted_total{table}, pl_pserver_table_rows_admitted_total{table}
//   pl_pserver_sparse_bytes, pl_pserver_sparse_memory_cap_bytes (0: none)       gauges
//   pl_pserver_hot_row_updates_per_second{table, rank, id}: each table's 5 most
//       updated rows (rank 1 the hottest; a row leaving the 5 leaves the family)
// and TensorBoard scalars pserver/pushes_per_sec, pserver/rows_pulled_per_sec,
// pserver/rows_pushed_per_sec, pserver/dense_mb, pserver/sparse_rows, pserver/rss_mb
// (step = seconds since the sampler started).
//
// Thread-safety: one thread (the main loop) calls Tick.
#ifndef PADDLE_LIKE_METRICS_PSERVER_SAMPLER_H_
#define PADDLE_LIKE_METRICS_PSERVER_SAMPLER_H_

#include <functional>

#include "absl/time/time.h"
#include "paddle_like/metrics/hot_row_rates.h"
#include "paddle_like/metrics/telemetry.h"
#include "proto/pserver.pb.h"

namespace prometheus {
class Counter;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace pl::metrics {

class PserverSampler {
 public:
  // `telemetry` must outlive the sampler; `stats` (PserverService::StatsNow) is called
  // on the sampling thread. Records a first sample at once, so /metrics has values from
  // the start.
  PserverSampler(ProcessTelemetry* telemetry, std::function<proto::StatsResponse()> stats,
                 absl::Duration every = absl::Seconds(1));

  // Records a sample when `every` has passed since the last one.
  void Tick();
  // Records one sample now.
  void Record(const proto::StatsResponse& s, absl::Time now);

 private:
  ProcessTelemetry* const telemetry_;
  const std::function<proto::StatsResponse()> stats_;
  const absl::Duration every_;
  const absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  proto::StatsResponse previous_;
  prometheus::Counter *pushes_, *rejected_, *refused_norm_, *pulls_, *rows_pulled_, *rows_pushed_;
  prometheus::Family<prometheus::Counter>* stream_entries_;
  prometheus::Counter *stream_linked_, *stream_inline_, *stream_shm_, *stream_bytes_, *stream_calls_,
      *stream_calls_rung_;
  prometheus::Gauge *version_, *dense_bytes_, *sparse_rows_, *rss_, *shm_regions_, *shm_bytes_, *dense_links_;
  prometheus::Family<prometheus::Gauge> *table_rows_, *table_bytes_, *hot_rate_;
  prometheus::Family<prometheus::Counter> *table_evicted_, *table_admitted_;
  prometheus::Gauge *sparse_bytes_, *sparse_cap_;
  HotRowRates hot_rates_;
  std::vector<prometheus::Gauge*> hot_gauges_;  // the last sample's, removed at the next
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_PSERVER_SAMPLER_H_
