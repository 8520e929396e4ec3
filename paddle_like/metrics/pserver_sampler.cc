#include "paddle_like/metrics/pserver_sampler.h"

#include "paddle_like/metrics/prometheus_util.h"

namespace pl::metrics {

namespace {
constexpr int kHotRowsInMetrics = 5;
}  // namespace

PserverSampler::PserverSampler(ProcessTelemetry* t, std::function<proto::StatsResponse()> stats,
                               absl::Duration every)
    : telemetry_(t),
      stats_(std::move(stats)),
      every_(every),
      start_(absl::Now()),
      pushes_(NewCounter(t, "pl_pserver_pushes_total", "pushes applied")),
      rejected_(NewCounter(t, "pl_pserver_pushes_rejected_total", "pushes refused (bad shape, NaN, stale...)")),
      refused_norm_(NewCounter(t, "pl_pserver_pushes_refused_norm_total",
                               "of those, pushes whose gradient norm was out of bounds (norm_guard.h)")),
      pulls_(NewCounter(t, "pl_pserver_pulls_total", "pulls served (parameters sent to trainers)")),
      rows_pulled_(NewCounter(t, "pl_pserver_sparse_rows_pulled_total", "sparse rows sent to trainers")),
      rows_pushed_(NewCounter(t, "pl_pserver_sparse_rows_pushed_total", "sparse row gradients applied")),
      stream_entries_(&NewCounterFamily(t, "pl_pserver_stream_entries_total",
                                        "updates a replicated primary sent to its replicas, by way: with their "
                                        "dense blocks through shared memory, over a dense link, or inline in the gRPC "
                                        "call")),
      stream_linked_(&stream_entries_->Add({{"via", "link"}})),
      stream_inline_(&stream_entries_->Add({{"via", "inline"}})),
      stream_shm_(&stream_entries_->Add({{"via", "shm"}})),
      stream_bytes_(NewCounter(t, "pl_pserver_stream_dense_bytes_total",
                               "dense values a replicated primary sent to its replicas (bfloat16: 2 bytes each)")),
      stream_calls_(NewCounter(t, "pl_pserver_stream_calls_total",
                               "calls a replicated primary's streams made (several updates each when batched)")),
      stream_calls_rung_(NewCounter(t, "pl_pserver_stream_calls_rung_total",
                                    "of those calls, the ones rung through shared memory instead of made over gRPC")),
      version_(NewGauge(t, "pl_pserver_version", "updates applied to this shard (its version)")),
      dense_bytes_(NewGauge(t, "pl_pserver_dense_bytes", "bytes of dense parameters this shard holds")),
      sparse_rows_(NewGauge(t, "pl_pserver_sparse_rows", "sparse rows this shard holds")),
      rss_(NewGauge(t, "pl_pserver_resident_bytes", "resident memory of the process")),
      shm_regions_(NewGauge(t, "pl_pserver_shm_regions", "trainers attached through shared memory")),
      shm_bytes_(NewGauge(t, "pl_pserver_shm_bytes", "bytes of their shared-memory regions")),
      dense_links_(NewGauge(t, "pl_pserver_dense_links", "trainers on other hosts linked for their dense blocks")),
      table_rows_(&NewGaugeFamily(t, "pl_pserver_table_rows", "rows a sparse table holds on this shard")),
      table_bytes_(&NewGaugeFamily(t, "pl_pserver_table_bytes",
                                   "bytes a sparse table takes on this shard: values, optimizer state, index")),
      hot_rate_(&NewGaugeFamily(t, "pl_pserver_hot_row_updates_per_second",
                                "updates per second of a table's most updated rows on this shard, by rank")),
      table_evicted_(&NewCounterFamily(t, "pl_pserver_table_rows_evicted_total",
                                       "rows of a sparse table evicted on this shard (time to live, memory cap)")),
      table_admitted_(&NewCounterFamily(t, "pl_pserver_table_rows_admitted_total",
                                        "rows of a sparse table created by admission (admit_after) on this shard")),
      sparse_bytes_(NewGauge(t, "pl_pserver_sparse_bytes",
                             "bytes the memory cap counts: sparse rows with their optimizer state and index")),
      sparse_cap_(NewGauge(t, "pl_pserver_sparse_memory_cap_bytes", "--sparse_memory_mb in bytes (0: no cap)")) {
  if (stats_) Record(stats_(), absl::Now());
}

void PserverSampler::Tick() {
  const absl::Time now = absl::Now();
  if (now - last_ < every_ || !stats_) return;
  Record(stats_(), now);
}

void PserverSampler::Record(const proto::StatsResponse& s, absl::Time now) {
  AdvanceCounter(pushes_, s.pushes_applied());
  AdvanceCounter(rejected_, s.pushes_rejected());
  AdvanceCounter(refused_norm_, s.pushes_refused_norm());
  AdvanceCounter(pulls_, s.pulls());
  AdvanceCounter(rows_pulled_, s.sparse_rows_pulled());
  AdvanceCounter(rows_pushed_, s.sparse_rows_pushed());
  AdvanceCounter(stream_linked_, s.stream_entries_linked());
  AdvanceCounter(stream_inline_, s.stream_entries_inline());
  AdvanceCounter(stream_shm_, s.stream_entries_shm());
  AdvanceCounter(stream_bytes_, s.stream_dense_bytes());
  AdvanceCounter(stream_calls_, s.stream_calls());
  AdvanceCounter(stream_calls_rung_, s.stream_calls_rung());
  version_->Set(s.version());
  dense_bytes_->Set(s.dense_elements() * 4.0);  // float32
  sparse_rows_->Set(s.sparse_rows());
  rss_->Set(s.rss_bytes());
  shm_regions_->Set(s.shm_regions());
  shm_bytes_->Set(s.shm_bytes());
  dense_links_->Set(s.dense_links());
  for (const proto::TableStats& t : s.tables()) {
    table_rows_->Add({{"table", t.name()}}).Set(t.rows());
    table_bytes_->Add({{"table", t.name()}}).Set(t.bytes());
    AdvanceCounter(&table_evicted_->Add({{"table", t.name()}}), t.evicted());
    AdvanceCounter(&table_admitted_->Add({{"table", t.name()}}), t.admitted());
  }
  sparse_bytes_->Set(s.sparse_bytes());
  sparse_cap_->Set(s.sparse_memory_cap_bytes());
  for (prometheus::Gauge* g : hot_gauges_) hot_rate_->Remove(g);
  hot_gauges_.clear();
  for (const HotRowRates::Rate& r : hot_rates_.Update(s.tables(), now, kHotRowsInMetrics)) {
    prometheus::Gauge& g =
        hot_rate_->Add({{"table", r.table}, {"rank", std::to_string(r.rank)}, {"id", std::to_string(r.id)}});
    g.Set(r.per_second);
    hot_gauges_.push_back(&g);
  }
  if (EventFileWriter* events = telemetry_->events(); events != nullptr && last_ != absl::InfinitePast()) {
    const double dt = std::max(1e-3, absl::ToDoubleSeconds(now - last_));
    auto rate = [dt](int64_t now_total, int64_t before) { return std::max<int64_t>(0, now_total - before) / dt; };
    (void)events->AddScalars(absl::ToInt64Seconds(now - start_),
                             {{"pserver/pushes_per_sec", rate(s.pushes_applied(), previous_.pushes_applied())},
                              {"pserver/rows_pulled_per_sec", rate(s.sparse_rows_pulled(), previous_.sparse_rows_pulled())},
                              {"pserver/rows_pushed_per_sec", rate(s.sparse_rows_pushed(), previous_.sparse_rows_pushed())},
                              {"pserver/dense_mb", s.dense_elements() * 4.0 / 1e6},
                              {"pserver/sparse_rows", static_cast<double>(s.sparse_rows())},
                              {"pserver/rss_mb", s.rss_bytes() / 1e6}});
  }
  previous_ = s;
  last_ = now;
}

}  // namespace pl::metrics
