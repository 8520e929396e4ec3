// RunTaskLoop against a real master (Master + MasterService over gRPC on 127.0.0.1) with
// a real MasterClient and heartbeat: what the master counts after each outcome of a task.
#include "paddle_like/client/task_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "master/master_grpc_service.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::HasSubstr;

constexpr int kChunks = 6;  // one chunk a task, 10 records each (MakeChunks)

// The master's service, counting the calls the loop makes: the trainer's frequent calls
// made on the Master here (the service answers them asynchronously), the others passed
// to the real service.
class CountingService final : public proto::Master::Service {
 public:
  CountingService(MasterService* real, Master* master) : real_(real), master_(master) {}
  grpc::Status RegisterTrainer(grpc::ServerContext* ctx, const proto::RegisterTrainerRequest* req,
                               proto::RegisterTrainerResponse* resp) override {
    return real_->RegisterTrainer(ctx, req, resp);
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const proto::HeartbeatRequest* req,
                         proto::HeartbeatResponse* resp) override {
    return Answer(ctx, req->trainer_id(), [&] { return master_->Heartbeat(*req); }, resp);
  }
  grpc::Status GetTask(grpc::ServerContext* ctx, const proto::GetTaskRequest* req, proto::GetTaskResponse* resp) override {
    ++get_task;
    if (req->has_finished()) ++reported_with_lease;
    return Answer(ctx, req->trainer_id(), [&] { return master_->GetTask(*req); }, resp);
  }
  grpc::Status TaskFinished(grpc::ServerContext* ctx, const proto::TaskFinishedRequest* req,
                            proto::TaskFinishedResponse* resp) override {
    ++task_finished;
    return Answer(ctx, req->trainer_id(), [&] { return master_->TaskFinished(*req); }, resp);
  }
  grpc::Status TaskFailed(grpc::ServerContext* ctx, const proto::TaskFailedRequest* req,
                          proto::TaskFailedResponse* resp) override {
    return real_->TaskFailed(ctx, req, resp);
  }
  grpc::Status Leave(grpc::ServerContext* ctx, const proto::LeaveRequest* req, proto::LeaveResponse* resp) override {
    return real_->Leave(ctx, req, resp);
  }
  std::atomic<int> get_task{0}, reported_with_lease{0}, task_finished{0};

 private:
  template <typename Call, typename Resp>
  grpc::Status Answer(grpc::ServerContext* ctx, int64_t trainer_id, Call call, Resp* out) {
    if (Status token = master_->CheckTrainerToken(trainer_id, rpc::CallerToken(ctx)); !token.ok()) {
      return rpc::ToGrpc(token);
    }
    StatusOr<Resp> result = call();
    if (!result.ok()) return rpc::ToGrpc(result.status());
    *out = *std::move(result);
    return grpc::Status::OK;
  }
  MasterService* const real_;
  Master* const master_;
};

class TaskLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LocalDirStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    MasterOptions o;
    o.queue.num_passes = 1;
    o.queue.max_failures = 2;
    o.num_pservers = 0;
    o.lease_ms = 5000;
    o.log = [](const std::string&) {};
    auto master = Master::Open(o, store_.get(), [] { return StatusOr<std::vector<ChunkInfo>>(testing::MakeChunks(kChunks)); });
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    service_ = std::make_unique<MasterService>(master_.get());
    counting_ = std::make_unique<CountingService>(service_.get(), master_.get());
    int port = 0;
    auto server = rpc::StartServer({}, {counting_.get()}, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<MasterClient>(absl::StrCat("127.0.0.1:", port), "t", absl::Seconds(20));
    ASSERT_TRUE(client_->Register().ok());
    heartbeat_ = std::make_unique<HeartbeatThread>(client_.get());
    callbacks_.log = [this](const std::string& line) { lines_.push_back(line); };
  }

  void TearDown() override {
    heartbeat_.reset();
    if (server_) server_->Shutdown();
  }

  proto::JobStatusResponse JobStatus() {
    auto s = master_->JobStatus({});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : proto::JobStatusResponse{};
  }

  StatusOr<TaskLoopResult> Run() { return RunTaskLoop(*client_, *heartbeat_, stop_, callbacks_); }

  testing::ScratchDir dir_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<CountingService> counting_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MasterClient> client_;
  std::unique_ptr<HeartbeatThread> heartbeat_;
  std::atomic<bool> stop_{false};
  TaskLoopCallbacks callbacks_;
  std::vector<std::string> lines_;
};

TEST_F(TaskLoopTest, EveryTaskIsTrainedOnceAndCountedWithItsSamples) {
  std::set<int64_t> seen;
  int before_lease = 0;
  callbacks_.before_lease = [&] { ++before_lease; };
  callbacks_.train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
    EXPECT_TRUE(seen.insert(task.id()).second) << "task " << task.id() << " leased twice";
    return TaskOutcome::Trained(10);
  };
  auto result = Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->job_done);
  EXPECT_FALSE(result->stopped);
  EXPECT_EQ(result->tasks_done, kChunks);
  EXPECT_EQ(seen.size(), kChunks);
  EXPECT_EQ(before_lease, kChunks + 1);  // and once more for the JOB_DONE answer
  // One call a task: each trained task reported in the call that leases the next.
  EXPECT_EQ(counting_->get_task.load(), kChunks + 1);
  EXPECT_EQ(counting_->reported_with_lease.load(), kChunks);
  EXPECT_EQ(counting_->task_finished.load(), 0);
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_TRUE(s.job_done());
  EXPECT_EQ(s.done(), kChunks);
  EXPECT_EQ(s.samples_done(), kChunks * 10);
  EXPECT_EQ(s.failed(), 0);
}

TEST_F(TaskLoopTest, ABadTaskIsFailedAtTheMasterAndTheLoopGoesOn) {
  int64_t bad = 0;
  callbacks_.train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
    if (bad == 0) {
      bad = task.id();
      return TaskOutcome::BadTask("chunk 3 is corrupt");
    }
    return TaskOutcome::Trained(10);
  };
  auto result = Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->job_done);
  // The bad task was leased again (max_failures 2) and trained the second time.
  EXPECT_EQ(result->tasks_done, kChunks);
  EXPECT_THAT(lines_, ::testing::Contains(absl::StrCat("task ", bad, " failed: chunk 3 is corrupt")));
  EXPECT_EQ(JobStatus().done(), kChunks);
}

TEST_F(TaskLoopTest, AnInterruptedTaskGoesBackAtOnceAndTheLoopEnds) {
  int64_t held = 0;
  callbacks_.train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
    held = task.id();
    stop_.store(true);  // a SIGTERM during the task
    return TaskOutcome::Interrupted();
  };
  auto result = Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stopped);
  EXPECT_FALSE(result->job_done);
  EXPECT_EQ(result->tasks_done, 0);
  EXPECT_THAT(lines_, ::testing::Contains(absl::StrCat("stop requested: returned task ", held, " to the master")));
  // Given back, not failed: every task is to do again, none pending (no lease to wait out).
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.todo(), kChunks) << s.ShortDebugString();
  EXPECT_EQ(s.pending(), 0) << s.ShortDebugString();
  EXPECT_EQ(s.failed(), 0) << s.ShortDebugString();
}

// A leave (SIGUSR1: the launcher shrinking the job) during a task lets the task finish
// and be counted; the loop ends before the next lease, so nothing is trained twice.
TEST_F(TaskLoopTest, ALeaveDuringATaskFinishesItAndLeasesNoMore) {
  std::atomic<bool> leave{false};
  int trained = 0;
  callbacks_.train_task = [&](const proto::Task&) -> StatusOr<TaskOutcome> {
    ++trained;
    if (trained == 2) leave.store(true);  // mid-task: the second one still ends trained
    return TaskOutcome::Trained(10);
  };
  auto result = RunTaskLoop(*client_, *heartbeat_, stop_, callbacks_, &leave);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(trained, 2);
  EXPECT_EQ(result->tasks_done, 2);
  EXPECT_TRUE(result->left);
  EXPECT_TRUE(result->stopped);
  EXPECT_FALSE(result->job_done);
  EXPECT_THAT(lines_, ::testing::Contains(HasSubstr("leaving as asked, after 2 task(s)")));
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.done(), 2) << s.ShortDebugString();
  EXPECT_EQ(s.todo(), kChunks - 2) << s.ShortDebugString();
  EXPECT_EQ(s.pending(), 0) << s.ShortDebugString();
  EXPECT_EQ(s.tasks_returned(), 0) << s.ShortDebugString();
  EXPECT_EQ(s.samples_retrained(), 0) << s.ShortDebugString();
}

// Dropped by the master while training (here: its Leave made for it), the trainer's
// report with its next lease does not count: it registers again, the task goes to the
// queue and is trained again, and the caller learns the new id before its next task.
TEST_F(TaskLoopTest, ATrainerDroppedWhileTrainingIsToldItsReportDidNotCountAndJoinsAgain) {
  std::vector<int64_t> ids_seen;
  callbacks_.before_lease = [&] { ids_seen.push_back(client_->trainer_id()); };
  int trained = 0;
  callbacks_.train_task = [&](const proto::Task&) -> StatusOr<TaskOutcome> {
    // Every task is trained under the id the caller was last told.
    EXPECT_EQ(ids_seen.back(), client_->trainer_id()) << "task " << trained + 1;
    if (++trained == 2) {
      proto::LeaveRequest leave;
      leave.set_trainer_id(client_->trainer_id());
      EXPECT_TRUE(master_->Leave(leave).ok());
    }
    return TaskOutcome::Trained(10);
  };
  auto result = Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->job_done);
  EXPECT_EQ(trained, kChunks + 1);  // the second task trained twice
  EXPECT_EQ(result->tasks_done, kChunks);
  EXPECT_THAT(lines_, ::testing::Contains(HasSubstr("no longer ours (this trainer had been dropped")));
  ASSERT_GE(ids_seen.size(), 2u);
  EXPECT_NE(ids_seen.back(), ids_seen.front());
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.done(), kChunks);
  EXPECT_EQ(s.samples_done(), kChunks * 10);
}

// A stop after a leave still gives the task in hand back at once (the launcher's
// SIGTERM when the task did not end within its grace).
TEST_F(TaskLoopTest, AStopAfterALeaveStillGivesTheTaskBack) {
  std::atomic<bool> leave{false};
  callbacks_.train_task = [&](const proto::Task&) -> StatusOr<TaskOutcome> {
    leave.store(true);
    stop_.store(true);
    return TaskOutcome::Interrupted(3);
  };
  auto result = RunTaskLoop(*client_, *heartbeat_, stop_, callbacks_, &leave);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stopped);
  EXPECT_FALSE(result->left);
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.todo(), kChunks) << s.ShortDebugString();
  EXPECT_EQ(s.samples_retrained(), 3) << s.ShortDebugString();
}

TEST_F(TaskLoopTest, AnErrorFailsTheTaskAndIsReturnedNamingIt) {
  int64_t held = 0;
  callbacks_.train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
    held = task.id();
    return absl::UnavailableError("push pserver 1: gone");
  };
  auto result = Run();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(absl::StrCat("task ", held)));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("push pserver 1: gone"));
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.pending(), 0) << "the failed task must not wait for its lease\n" << s.ShortDebugString();
  EXPECT_EQ(s.todo(), kChunks) << "a task failed once of max_failures 2 is to do again\n" << s.ShortDebugString();
}

TEST_F(TaskLoopTest, AnErrorDuringAStopGivesTheTaskBackInstead) {
  callbacks_.train_task = [&](const proto::Task&) -> StatusOr<TaskOutcome> {
    stop_.store(true);  // the stop interrupted a call to a dead pserver
    return absl::CancelledError("stopping");
  };
  auto result = Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stopped);
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.todo(), kChunks) << s.ShortDebugString();
  EXPECT_EQ(s.failed(), 0) << s.ShortDebugString();
}

// TaskLeaser: the same loop one step at a time (a Python generator drives it).
TEST_F(TaskLoopTest, TheLeaserStepsThroughTheJobAndRefusesOutOfOrderCalls) {
  TaskLeaser leaser(*client_, *heartbeat_, stop_);
  EXPECT_EQ(leaser.Report(TaskOutcome::Trained(10)).code(), absl::StatusCode::kFailedPrecondition);
  std::set<int64_t> seen;
  for (int i = 0;; ++i) {
    ASSERT_LT(i, kChunks + 1);
    auto task = leaser.Next();
    ASSERT_TRUE(task.ok()) << task.status();
    if (!task->has_value()) break;
    EXPECT_TRUE(leaser.holds_task());
    EXPECT_EQ(leaser.Next().status().code(), absl::StatusCode::kFailedPrecondition);  // report first
    seen.insert((*task)->id());
    ASSERT_TRUE(leaser.Report(TaskOutcome::Trained(10)).ok());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kChunks));
  EXPECT_TRUE(leaser.result().job_done);
  EXPECT_EQ(leaser.result().tasks_done, kChunks);
  EXPECT_EQ(JobStatus().samples_done(), 10 * kChunks);
}

TEST_F(TaskLoopTest, TheLeaserLeasesNothingAfterATaskIsGivenBack) {
  TaskLeaser leaser(*client_, *heartbeat_, stop_);
  auto task = leaser.Next();
  ASSERT_TRUE(task.ok() && task->has_value());
  ASSERT_TRUE(leaser.Report(TaskOutcome::Interrupted(4)).ok());
  auto next = leaser.Next();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->has_value());
  EXPECT_FALSE(leaser.result().job_done);
  const proto::JobStatusResponse s = JobStatus();
  EXPECT_EQ(s.todo(), kChunks);  // back in the queue at once, not failed
  EXPECT_EQ(s.failed(), 0);
  EXPECT_EQ(s.samples_retrained(), 4);
}

}  // namespace
}  // namespace pl
