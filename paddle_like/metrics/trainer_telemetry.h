// TrainerTelemetry: a TrainingObserver that records each step of a trainer in its
// process's telemetry: one TensorBoard Event per step (loss, train/accuracy,
// train/samples_per_sec, time/compute_ms, time/exchange_ms, one frame for all five),
// and the Prometheus instruments
//   pl_trainer_steps_total, pl_trainer_samples_total        counters
//   pl_trainer_step_seconds                                  histogram
//   pl_trainer_compute_seconds_total, ..._exchange_seconds_total  counters
//   pl_trainer_loss, pl_trainer_train_accuracy, pl_trainer_test_accuracy  gauges
// Instruments are atomics (no lock, no formatting) except the step histogram, whose
// Observe takes prometheus-cpp's uncontended mutex once per step.
//
// Thread-safety: as TrainingObserver (the training loop's thread).
#ifndef PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_
#define PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_

#include "paddle_like/metrics/telemetry.h"
#include "paddle_like/metrics/training_observer.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace pl::metrics {

class TrainerTelemetry final : public TrainingObserver {
 public:
  // `telemetry` must outlive this object.
  explicit TrainerTelemetry(ProcessTelemetry* telemetry);

  void OnStep(const StepRecord& r) override;
  void OnEvaluation(int64_t step, const std::string& metric, double value) override;

 private:
  ProcessTelemetry* const telemetry_;
  prometheus::Counter* steps_;
  prometheus::Counter* samples_;
  prometheus::Counter* compute_s_;
  prometheus::Counter* exchange_s_;
  prometheus::Histogram* step_s_;
  prometheus::Gauge* loss_;
  prometheus::Gauge* train_accuracy_;
  prometheus::Gauge* test_accuracy_;
  bool write_failed_ = false;
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_
