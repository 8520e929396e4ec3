// ProgressBoard: the master's side of proto/job_progress.proto. Keeps every trainer's
// curve (loss, train accuracy, samples/s against its step) and its test metric, for the
// status page.
//
// Memory is bounded whatever the job's length: each trainer keeps at most
// `max_points`; when full, every other point is dropped, so the whole run stays drawn
// at half the resolution rather than losing its start.
//
// Thread-safety: thread-safe (gRPC threads report, the status page reads).
#ifndef PADDLE_LIKE_METRICS_PROGRESS_BOARD_H_
#define PADDLE_LIKE_METRICS_PROGRESS_BOARD_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/job_progress.grpc.pb.h"

namespace pl::metrics {

struct TrainerCurve {
  std::vector<proto::ProgressPoint> points;  // oldest first
  bool evaluated = false;
  std::string test_metric_name;
  double test_metric = 0;
};

class ProgressBoard final : public proto::JobProgress::Service {
 public:
  explicit ProgressBoard(size_t max_points = 400) : max_points_(max_points) {}

  grpc::Status Report(grpc::ServerContext* context, const proto::ProgressReport* request,
                      proto::ProgressReply* reply) override;
  // Adds a report (what Report does after its protocol check).
  void Add(const proto::ProgressReport& report);
  // Every trainer's curve, by name.
  std::map<std::string, TrainerCurve> Curves() const;

 private:
  const size_t max_points_;
  mutable absl::Mutex mu_;
  std::map<std::string, TrainerCurve> curves_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_PROGRESS_BOARD_H_
