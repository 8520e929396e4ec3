// JobSampler: the master's view of the job in its telemetry, sampled on a timer from
// JobStatus and the event log:
//   pl_master_tasks{state="todo|pending|done|failed"}, pl_master_pass,
//   pl_master_num_passes, pl_master_live_trainers,
//   pl_master_shards_below_copies, pl_master_losses                     gauges
//   pl_master_samples_total, pl_master_leases_expired_total,
//   pl_master_task_failures_total, pl_master_pushes_refused_total       counters
// and TensorBoard scalars master/tasks_done, master/tasks_todo, master/pass,
// master/live_trainers, master/shards_below_copies, master/leases_expired,
// master/samples_per_sec (step = seconds since the sampler started).
//
// Thread-safety: one thread (the sampling timer) calls Record.
#ifndef PADDLE_LIKE_METRICS_JOB_SAMPLER_H_
#define PADDLE_LIKE_METRICS_JOB_SAMPLER_H_

#include "absl/time/time.h"
#include "paddle_like/metrics/job_events.h"
#include "paddle_like/metrics/telemetry.h"
#include "proto/master.pb.h"

namespace prometheus {
class Counter;
class Gauge;
}  // namespace prometheus

namespace pl::metrics {

class JobSampler {
 public:
  // Both must outlive the sampler.
  JobSampler(ProcessTelemetry* telemetry, const JobEventLog* events);

  void Record(const proto::JobStatusResponse& s, absl::Time now = absl::Now());

 private:
  ProcessTelemetry* const telemetry_;
  const JobEventLog* const events_;
  const absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  int64_t last_samples_ = 0;
  prometheus::Gauge *todo_, *pending_, *done_, *failed_, *pass_, *num_passes_, *live_trainers_, *trainer_target_, *shards_below_copies_,
      *losses_;
  prometheus::Counter *samples_, *leases_expired_, *failures_, *pushes_refused_;
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_JOB_SAMPLER_H_
