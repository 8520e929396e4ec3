#include "paddle_like/metrics/trainer_telemetry.h"

#include "paddle_like/core/log.h"
#include "paddle_like/metrics/prometheus_util.h"

namespace pl::metrics {

TrainerTelemetry::TrainerTelemetry(ProcessTelemetry* t, absl::Duration drain_every)
    : telemetry_(t),
      steps_(NewCounter(t, "pl_trainer_steps_total", "training steps this trainer ran")),
      samples_(NewCounter(t, "pl_trainer_samples_total", "samples this trainer trained on")),
      compute_s_(NewCounter(t, "pl_trainer_compute_seconds_total", "time in forward and backward")),
      exchange_s_(NewCounter(t, "pl_trainer_exchange_seconds_total", "time pushing gradients and pulling parameters")),
      dropped_counter_(NewCounter(t, "pl_trainer_records_dropped_total",
                                  "step records not recorded: the telemetry thread fell 4096 steps behind")),
      step_s_(NewHistogram(t, "pl_trainer_step_seconds", "wall time of one training step",
                           {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5})),
      staleness_(NewHistogram(t, "pl_trainer_staleness_updates",
                              "updates other trainers applied between the pull a step's gradients came from and "
                              "their application (async; mean over pservers)",
                              {0, 1, 2, 4, 8, 16, 32, 64, 128})),
      loss_(NewGauge(t, "pl_trainer_loss", "mean loss of the last step's batch")),
      train_accuracy_(NewGauge(t, "pl_trainer_train_accuracy", "accuracy on the last step's batch")),
      test_accuracy_(NewGauge(t, "pl_trainer_test_accuracy", "the job's test accuracy, once evaluated")) {
  // Nothing to drain yet: the first drain is one period in.
  drainer_ = std::make_unique<Ticker>(drain_every, [this] { Drain(); }, /*at_once=*/false);
}

TrainerTelemetry::~TrainerTelemetry() { drainer_.reset(); }

void TrainerTelemetry::OnStep(const StepRecord& r) {
  if (!ring_.Push(r)) dropped_.fetch_add(1, std::memory_order_relaxed);
}

void TrainerTelemetry::Drain() {
  absl::MutexLock lock(&drain_mu_);
  StepRecord r;
  while (ring_.Pop(&r)) Record(r);
  AdvanceCounter(dropped_counter_, static_cast<double>(dropped_.load(std::memory_order_relaxed)));
}

void TrainerTelemetry::Record(const StepRecord& r) {
  steps_->Increment();
  samples_->Increment(static_cast<double>(r.samples));
  compute_s_->Increment(r.compute_s);
  exchange_s_->Increment(r.exchange_s);
  step_s_->Observe(r.step_s);
  staleness_->Observe(r.staleness);
  loss_->Set(r.loss);
  const double accuracy = r.correct >= 0 && r.samples > 0 ? static_cast<double>(r.correct) / r.samples : -1;
  if (accuracy >= 0) train_accuracy_->Set(accuracy);
  EventFileWriter* events = telemetry_->events();
  if (events == nullptr || write_failed_) return;
  std::vector<Scalar> scalars = {{"loss", r.loss},
                                 {"train/samples_per_sec", r.step_s > 0 ? r.samples / r.step_s : 0},
                                 {"time/compute_ms", r.compute_s * 1e3},
                                 {"time/exchange_ms", r.exchange_s * 1e3},
                                 {"train/staleness", r.staleness}};
  if (accuracy >= 0) scalars.push_back({"train/accuracy", accuracy});
  if (Status s = events->AddScalars(r.step, scalars); !s.ok()) {
    // Training goes on without its curves: a full disk must not stop the job.
    write_failed_ = true;
    log::Warning(absl::StrCat("TensorBoard events no longer written: ", s.message()));
  }
}

void TrainerTelemetry::OnEvaluation(int64_t step, const std::string& metric, double value) {
  Drain();  // the steps before it first
  absl::MutexLock lock(&drain_mu_);
  if (metric == "accuracy") test_accuracy_->Set(value);
  if (EventFileWriter* events = telemetry_->events(); events != nullptr && !write_failed_) {
    (void)events->AddScalar("test/" + metric, value, step);
    (void)events->Flush();
  }
}

}  // namespace pl::metrics
