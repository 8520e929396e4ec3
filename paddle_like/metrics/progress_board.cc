#include "paddle_like/metrics/progress_board.h"

#include <algorithm>

#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/request_limits.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::metrics {

namespace {
// How far back a repeated point is looked for: more than a trainer keeps unsent.
constexpr size_t kRecentPoints = 1024;
}  // namespace

grpc::Status ProgressBoard::Report(grpc::ServerContext* context, const proto::ProgressReport* request,
                                   proto::ProgressReply*) {
  if (grpc::Status s = rpc::CheckProtocol(context); !s.ok()) return s;
  if (grpc::Status s = rpc::Authorize(context, {rpc::kTrainers}, "Report"); !s.ok()) return s;
  if (request->trainer().empty() || request->trainer().size() > 128) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "ProgressReport.trainer: 1 to 128 characters");
  }
  if (Status s = rpc::CheckStringLengths(*request); !s.ok()) return rpc::ToGrpc(s);
  Add(*request);
  return grpc::Status::OK;
}

void ProgressBoard::Add(const proto::ProgressReport& report) {
  absl::MutexLock lock(&mu_);
  TrainerCurve& c = curves_[report.trainer()];
  for (const proto::ProgressPoint& p : report.points()) {
    // A trainer re-sends the points of a call it gave up on, which the master may have
    // served all the same: a point already here (same step, same time) is kept once.
    const size_t recent = std::min<size_t>(c.points.size(), kRecentPoints);
    if (std::any_of(c.points.end() - recent, c.points.end(), [&p](const proto::ProgressPoint& q) {
          return q.step() == p.step() && q.wall_time() == p.wall_time();
        })) {
      continue;
    }
    c.points.push_back(p);
    if (c.points.size() > max_points_) {
      std::vector<proto::ProgressPoint> kept;
      for (size_t i = 0; i < c.points.size(); i += 2) kept.push_back(c.points[i]);
      if (kept.back().step() != c.points.back().step()) kept.push_back(c.points.back());
      c.points = std::move(kept);
    }
  }
  if (report.evaluated()) {
    c.evaluated = true;
    c.test_metric_name = report.test_metric_name();
    c.test_metric = report.test_metric();
  }
}

std::map<std::string, TrainerCurve> ProgressBoard::Curves() const {
  absl::MutexLock lock(&mu_);
  return curves_;
}

}  // namespace pl::metrics
