// A trainer's progress reports over real gRPC: ProgressReporter -> ProgressBoard.
#include <gtest/gtest.h>

#include "paddle_like/metrics/progress_board.h"
#include "paddle_like/metrics/progress_reporter.h"
#include "paddle_like/rpc/rpc.h"

namespace pl::metrics {
namespace {

struct Counting : TrainingObserver {
  int steps = 0, evaluations = 0;
  void OnStep(const StepRecord&) override { ++steps; }
  void OnEvaluation(int64_t, const std::string&, double) override { ++evaluations; }
};

TEST(ProgressReporterTest, ReportsPointsAndTheTestMetricAndPassesEveryCallOn) {
  ProgressBoard board;
  rpc::ServerOptions options;
  options.address = "127.0.0.1:0";
  int port = 0;
  auto server = rpc::StartServer(options, {&board}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  Counting next;
  {
    ProgressReporter reporter(absl::StrCat("127.0.0.1:", port), "trainer-7", &next, /*every=*/absl::Hours(1));
    reporter.OnStep({1, 3.0, 16, 64, 0.01, 0.0, 0.01});
    reporter.OnStep({2, 1.0, 48, 64, 0.01, 0.0, 0.01});
    // The window is an hour: only OnEvaluation closes it, and sends at once.
    reporter.OnEvaluation(2, "accuracy", 0.75);
    const auto curves = board.Curves();
    ASSERT_EQ(curves.count("trainer-7"), 1u);
    const TrainerCurve& c = curves.at("trainer-7");
    ASSERT_EQ(c.points.size(), 1u);
    EXPECT_EQ(c.points[0].step(), 2);
    EXPECT_FLOAT_EQ(c.points[0].loss(), 2.0f);
    EXPECT_FLOAT_EQ(c.points[0].train_accuracy(), 0.5f);
    EXPECT_FLOAT_EQ(c.points[0].samples_per_sec(), 6400.f);
    EXPECT_TRUE(c.evaluated);
    EXPECT_EQ(c.test_metric_name, "accuracy");
    EXPECT_FLOAT_EQ(c.test_metric, 0.75f);
  }
  EXPECT_EQ(next.steps, 2);
  EXPECT_EQ(next.evaluations, 1);
  (*server)->Shutdown();
}

// A master that answers each report only after `delay` (a busy machine).
class SlowMaster final : public proto::JobProgress::Service {
 public:
  SlowMaster(ProgressBoard* board, absl::Duration delay) : board_(board), delay_(delay) {}
  grpc::Status Report(grpc::ServerContext* context, const proto::ProgressReport* request,
                      proto::ProgressReply* reply) override {
    absl::SleepFor(delay_);
    return board_->Report(context, request, reply);
  }

 private:
  ProgressBoard* const board_;
  const absl::Duration delay_;
};

TEST(ProgressReporterTest, AMasterTooBusyToAnswerWithinASecondStillHasTheLastReportOnceItCloses) {
  ProgressBoard board;
  SlowMaster slow(&board, absl::Milliseconds(2500));  // past a report's 1 s, within the last one's 5 s
  rpc::ServerOptions options;
  options.address = "127.0.0.1:0";
  int port = 0;
  auto server = rpc::StartServer(options, {&slow}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  {
    ProgressReporter reporter(absl::StrCat("127.0.0.1:", port), "trainer-9", nullptr, /*every=*/absl::Hours(1));
    reporter.OnStep({1, 3.0, 16, 64, 0.01, 0.0, 0.01});
    reporter.OnEvaluation(1, "accuracy", 0.5);  // its send gives up after 1 s; the report is kept
  }
  // The job's end: the status page must show the result now, not some time later.
  const auto curves = board.Curves();
  ASSERT_EQ(curves.count("trainer-9"), 1u);
  EXPECT_TRUE(curves.at("trainer-9").evaluated);
  absl::SleepFor(absl::Seconds(1));  // the calls it gave up on, served late, add nothing
  EXPECT_EQ(board.Curves().at("trainer-9").points.size(), 1u);
  (*server)->Shutdown();
}

TEST(ProgressReporterTest, AnUnreachableMasterNeverHoldsAStepUp) {
  // Nothing listens on port 1; sends fail on the reporter's thread, steps do not wait.
  ProgressReporter reporter("127.0.0.1:1", "trainer-8", nullptr, absl::ZeroDuration());
  const absl::Time start = absl::Now();
  for (int step = 1; step <= 1000; ++step) reporter.OnStep({step, 1.0, -1, 64, 0.001, 0.0, 0.001});
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
}

}  // namespace
}  // namespace pl::metrics
