// ProgressReporter: a TrainingObserver that passes every call on to another observer and
// sends the master (proto/job_progress.proto) one point per `every` of training: the
// mean loss, train accuracy and samples/s of the steps in between. Points are sent in
// batches from a thread of its own, so a slow or gone master never holds a step up.
// A master that does not know the service (UNIMPLEMENTED) ends the reporting quietly;
// other failures keep the points for the next try (bounded: the oldest go first).
// OnEvaluation closes the window under way (a short job still draws a point) and sends
// at once.
//
// Thread-safety: OnStep/OnEvaluation from the training thread; sending is internal.
#ifndef PADDLE_LIKE_METRICS_PROGRESS_REPORTER_H_
#define PADDLE_LIKE_METRICS_PROGRESS_REPORTER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/metrics/ticker.h"
#include "paddle_like/metrics/training_observer.h"
#include "proto/job_progress.grpc.pb.h"

namespace pl::metrics {

class ProgressReporter final : public TrainingObserver {
 public:
  // `next` (may be null) must outlive this object.
  ProgressReporter(const std::string& master_address, std::string trainer, TrainingObserver* next,
                   absl::Duration every = absl::Seconds(1));
  // Sends what is left (bounded: 5 s at most, for a master too busy to answer or gone).
  ~ProgressReporter() override;

  void OnStep(const StepRecord& r) override;
  void OnEvaluation(int64_t step, const std::string& metric, double value) override;

 private:
  void Send(absl::Duration deadline);
  // Turns the window's steps into a point (none when it has no step).
  void ClosePoint(absl::Time now);

  const std::string trainer_;
  TrainingObserver* const next_;
  const absl::Duration every_;
  std::unique_ptr<proto::JobProgress::Stub> stub_;
  // The window being averaged (training thread only).
  absl::Time window_start_ = absl::Now();
  double loss_sum_ = 0, seconds_ = 0;
  int64_t steps_ = 0, correct_ = 0, samples_ = 0, last_step_ = 0;
  bool classifier_ = false;

  absl::Mutex mu_;
  proto::ProgressReport pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> unsupported_{false};
  std::unique_ptr<Ticker> sender_;  // last: stops first
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_PROGRESS_REPORTER_H_
