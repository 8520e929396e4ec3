// TrainerTelemetry: a TrainingObserver that records each step of a trainer in its
// process's telemetry: one TensorBoard Event per step (loss, train/accuracy,
// train/samples_per_sec, time/compute_ms, time/exchange_ms, train/staleness, one frame
// for all six),
// and the Prometheus instruments
//   pl_trainer_steps_total, pl_trainer_samples_total        counters
//   pl_trainer_step_seconds, pl_trainer_staleness_updates   histograms
//   pl_trainer_compute_seconds_total, ..._exchange_seconds_total  counters
//   pl_trainer_loss, pl_trainer_train_accuracy, pl_trainer_test_accuracy  gauges
//   pl_trainer_records_dropped_total                         counter (see below)
//
// The step itself takes no lock and formats nothing: OnStep copies its record into a
// lock-free ring (spsc_ring.h); a thread of this object drains the ring every
// `drain_every`, updates the instruments and writes the events. So /metrics runs at most
// `drain_every` behind, and a record that finds the ring full (4,096 steps not drained:
// the drain thread starved) is dropped and counted rather than making the step wait.
// OnEvaluation and the destructor drain first, so the files end complete and in order.
//
// Thread-safety: OnStep and OnEvaluation from one thread (the training loop's).
#ifndef PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_
#define PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_

#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/metrics/spsc_ring.h"
#include "paddle_like/metrics/telemetry.h"
#include "paddle_like/metrics/ticker.h"
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
  explicit TrainerTelemetry(ProcessTelemetry* telemetry, absl::Duration drain_every = absl::Milliseconds(200));
  ~TrainerTelemetry() override;  // drains what is left

  void OnStep(const StepRecord& r) override;
  void OnEvaluation(int64_t step, const std::string& metric, double value) override;

  // Records what the ring holds now (the drain thread's work; tests call it to wait
  // for nothing).
  void Drain();

 private:
  void Record(const StepRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_);

  ProcessTelemetry* const telemetry_;
  SpscRing<StepRecord> ring_{4096};
  std::atomic<int64_t> dropped_{0};
  absl::Mutex drain_mu_;  // one consumer at a time: the drain thread, OnEvaluation, the destructor
  prometheus::Counter* steps_;
  prometheus::Counter* samples_;
  prometheus::Counter* compute_s_;
  prometheus::Counter* exchange_s_;
  prometheus::Counter* dropped_counter_;
  prometheus::Histogram* step_s_;
  prometheus::Histogram* staleness_;
  prometheus::Gauge* loss_;
  prometheus::Gauge* train_accuracy_;
  prometheus::Gauge* test_accuracy_;
  bool write_failed_ ABSL_GUARDED_BY(drain_mu_) = false;
  std::unique_ptr<Ticker> drainer_;  // last: stops (with a final drain) before the rest goes
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TRAINER_TELEMETRY_H_
