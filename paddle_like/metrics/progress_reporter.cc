#include "paddle_like/metrics/progress_reporter.h"

#include "paddle_like/rpc/rpc.h"

namespace pl::metrics {
namespace {

constexpr int kMaxPending = 600;  // points kept while the master is unreachable
// A report's call: short while training (what fails is kept for the next), longer for
// the last one, which nothing follows. Each waits for the channel to be ready within its
// deadline: a first connection that failed under load (the channel then backs off and
// fails calls at once) took the evaluation's point and the last one with it, and the
// status page never showed the job's result. So a master that is gone makes the exit
// wait up to kLastReportDeadline.
constexpr absl::Duration kReportDeadline = absl::Seconds(1);
constexpr absl::Duration kLastReportDeadline = absl::Seconds(5);

}  // namespace

ProgressReporter::ProgressReporter(const std::string& master_address, std::string trainer, TrainingObserver* next,
                                   absl::Duration every)
    : trainer_(std::move(trainer)),
      next_(next),
      every_(every),
      stub_(proto::JobProgress::NewStub(rpc::MakeChannel(master_address))) {
  sender_ = std::make_unique<Ticker>(absl::Seconds(2), [this] { Send(kReportDeadline); });
}

ProgressReporter::~ProgressReporter() {
  sender_.reset();
  Send(kLastReportDeadline);  // what the ticker's last call could not deliver, if anything
}

void ProgressReporter::OnStep(const StepRecord& r) {
  if (next_ != nullptr) next_->OnStep(r);
  ++steps_;
  loss_sum_ += r.loss;
  seconds_ += r.step_s;
  samples_ += r.samples;
  classifier_ = r.correct >= 0;
  if (classifier_) correct_ += r.correct;
  last_step_ = r.step;
  const absl::Time now = absl::Now();
  if (now - window_start_ < every_ || unsupported_.load()) return;
  ClosePoint(now);
}

void ProgressReporter::ClosePoint(absl::Time now) {
  if (steps_ == 0) return;
  proto::ProgressPoint p;
  p.set_step(last_step_);
  p.set_wall_time(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  p.set_loss(static_cast<float>(loss_sum_ / steps_));
  p.set_train_accuracy(classifier_ && samples_ > 0 ? static_cast<float>(correct_) / samples_ : -1.f);
  p.set_samples_per_sec(static_cast<float>(seconds_ > 0 ? samples_ / seconds_ : 0));
  window_start_ = now;
  loss_sum_ = seconds_ = 0;
  steps_ = correct_ = samples_ = 0;
  absl::MutexLock lock(&mu_);
  *pending_.add_points() = std::move(p);
  if (pending_.points_size() > kMaxPending) pending_.mutable_points()->DeleteSubrange(0, 1);
}

void ProgressReporter::OnEvaluation(int64_t step, const std::string& metric, double value) {
  if (next_ != nullptr) next_->OnEvaluation(step, metric, value);
  ClosePoint(absl::Now());
  {
    absl::MutexLock lock(&mu_);
    pending_.set_evaluated(true);
    pending_.set_test_metric_name(metric);
    pending_.set_test_metric(static_cast<float>(value));
  }
  Send(kReportDeadline);  // the end of the job: the page shows the result at once
}

void ProgressReporter::Send(absl::Duration deadline) {
  if (unsupported_.load()) return;
  proto::ProgressReport report;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.points_size() == 0 && !pending_.evaluated()) return;
    report.Swap(&pending_);
  }
  report.set_trainer(trainer_);
  proto::ProgressReply reply;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(deadline)), /*wait_for_ready=*/true);
  const grpc::Status s = stub_->Report(ctx.get(), report, &reply);
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    unsupported_.store(true);
  } else if (!s.ok()) {
    // Kept for the next try, before what arrived since.
    absl::MutexLock lock(&mu_);
    report.mutable_points()->MergeFrom(pending_.points());
    if (!report.evaluated() && pending_.evaluated()) {
      report.set_evaluated(true);
      report.set_test_metric_name(pending_.test_metric_name());
      report.set_test_metric(pending_.test_metric());
    }
    pending_.Swap(&report);
    pending_.clear_trainer();
    const int excess = pending_.points_size() - kMaxPending;
    if (excess > 0) pending_.mutable_points()->DeleteSubrange(0, excess);
  }
}

}  // namespace pl::metrics
