#include "paddle_like/metrics/job_sampler.h"

#include <algorithm>

#include "paddle_like/metrics/prometheus_util.h"

namespace pl::metrics {

JobSampler::JobSampler(ProcessTelemetry* t, const JobEventLog* events)
    : telemetry_(t),
      events_(events),
      start_(absl::Now()),
      todo_(NewGauge(t, "pl_master_tasks", "tasks of the current pass by state", {{"state", "todo"}})),
      pending_(NewGauge(t, "pl_master_tasks", "tasks of the current pass by state", {{"state", "pending"}})),
      done_(NewGauge(t, "pl_master_tasks", "tasks of the current pass by state", {{"state", "done"}})),
      failed_(NewGauge(t, "pl_master_tasks", "tasks of the current pass by state", {{"state", "failed"}})),
      pass_(NewGauge(t, "pl_master_pass", "the current pass, from 1")),
      num_passes_(NewGauge(t, "pl_master_num_passes", "passes the job runs")),
      live_trainers_(NewGauge(t, "pl_master_live_trainers", "trainers holding a live lease")),
      trainer_target_(NewGauge(t, "pl_master_trainer_target",
                               "trainers the job is asked to run (ScaleTrainers: pl-autoscale, pl-launch 'scale'); "
                               "-1: none set")),
      shards_below_copies_(NewGauge(t, "pl_master_shards_below_copies",
                                    "replicated shards with fewer copies in sync than the job was launched with")),
      losses_(NewGauge(t, "pl_master_losses",
                       "losses of learned state the job recorded (JobStatusResponse.losses): shards started over or "
                       "restored from an older checkpoint, pservers refusing pushes (failed tasks: "
                       "pl_master_tasks{state=\"failed\"})")),
      samples_(NewCounter(t, "pl_master_samples_total", "samples of the tasks reported done")),
      leases_expired_(NewCounter(t, "pl_master_leases_expired_total", "trainer and task leases that expired")),
      failures_(NewCounter(t, "pl_master_task_failures_total", "tasks reported failed by trainers")),
      pushes_refused_(NewCounter(t, "pl_master_pushes_refused_total",
                                 "pushes the pservers refused as out of bounds, as they reported them")) {}

void JobSampler::Record(const proto::JobStatusResponse& s, absl::Time now) {
  todo_->Set(s.todo());
  pending_->Set(s.pending());
  done_->Set(s.done());
  failed_->Set(s.failed());
  pass_->Set(s.pass());
  num_passes_->Set(s.num_passes());
  live_trainers_->Set(s.live_trainers());
  trainer_target_->Set(s.has_trainer_target() ? s.trainer_target() : -1);
  shards_below_copies_->Set(s.shards_below_copies());
  losses_->Set(s.losses_size());
  AdvanceCounter(pushes_refused_, s.pushes_refused());
  AdvanceCounter(samples_, s.samples_done());
  const int64_t expired = events_->Total(JobEventKind::kLeaseExpired);
  AdvanceCounter(leases_expired_, expired);
  AdvanceCounter(failures_, events_->Total(JobEventKind::kFailure));
  if (EventFileWriter* events = telemetry_->events()) {
    const double dt = last_ == absl::InfinitePast() ? 0 : absl::ToDoubleSeconds(now - last_);
    std::vector<Scalar> scalars = {{"master/tasks_done", static_cast<double>(s.done())},
                                   {"master/tasks_todo", static_cast<double>(s.todo())},
                                   {"master/pass", static_cast<double>(s.pass())},
                                   {"master/live_trainers", static_cast<double>(s.live_trainers())},
                                   {"master/trainer_target", static_cast<double>(s.has_trainer_target() ? s.trainer_target() : -1)},
                                   {"master/shards_below_copies", static_cast<double>(s.shards_below_copies())},
                                   {"master/leases_expired", static_cast<double>(expired)}};
    if (dt > 0) scalars.push_back({"master/samples_per_sec", std::max<int64_t>(0, s.samples_done() - last_samples_) / dt});
    (void)events->AddScalars(absl::ToInt64Seconds(now - start_), scalars);
  }
  last_samples_ = s.samples_done();
  last_ = now;
}

}  // namespace pl::metrics
