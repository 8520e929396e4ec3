// The master's side of a job of virtual trainers (docs/consistent-training.md): the
// data cut into exactly V tasks, the lease slots dealt over the live trainers, the
// micro-batch fixed by the first trainer, and tasks handed on without retraining.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "master/master_service.h"
#include "master/task_queue.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using pl::testing::FakeClock;
using pl::testing::MakeChunks;
using pl::testing::MakeQueue;
using pl::testing::ScratchDir;
using Result = TaskQueue::Result;

TaskQueueOptions VirtualOpts(int v, int passes = 1) {
  TaskQueueOptions o;
  o.num_passes = passes;
  o.chunks_per_task = 1;
  o.virtual_trainers = v;
  o.seed = 3;
  o.lease_ms = 1000;
  return o;
}

TEST(VirtualTaskQueueTest, CutsTheChunksIntoExactlyVTasksOfConsecutiveChunks) {
  FakeClock clock;
  TaskQueue q = MakeQueue(clock, 11, VirtualOpts(4));  // 11 = 3 + 3 + 3 + 2
  ASSERT_EQ(q.num_tasks(), 4);
  EXPECT_THAT(q.task_records(), ElementsAre(30, 30, 30, 20));
  std::map<int64_t, std::vector<int>> chunks;  // task -> global chunk numbers
  for (int slot = 0; slot < 4; ++slot) {
    TaskQueue::Lease lease = q.GetTask(1, slot);
    ASSERT_EQ(lease.result, Result::kTask);
    for (const proto::Chunk& c : lease.task.chunks()) {
      chunks[lease.task.id()].push_back(std::stoi(c.path().substr(3)) * 4 + c.index());
    }
  }
  EXPECT_THAT(chunks[1], ElementsAre(0, 1, 2));
  EXPECT_THAT(chunks[2], ElementsAre(3, 4, 5));
  EXPECT_THAT(chunks[3], ElementsAre(6, 7, 8));
  EXPECT_THAT(chunks[4], ElementsAre(9, 10));
}

TEST(VirtualTaskQueueTest, RefusesFewerChunksThanVirtualTrainers) {
  FakeClock clock;
  auto q = TaskQueue::Create(MakeChunks(3), VirtualOpts(4), clock.fn());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(q.status().message(), HasSubstr("4 virtual trainers need at least 4 chunks"));
  auto huge = TaskQueue::Create(MakeChunks(3), VirtualOpts(kMaxVirtualTrainers + 1), clock.fn());
  EXPECT_THAT(huge.status().message(), HasSubstr("virtual_trainers must be in 0..4096"));
}

TEST(VirtualTaskQueueTest, ATrainerHoldsOneTaskPerSlotAndARetryGetsTheSameOne) {
  FakeClock clock;
  TaskQueue q = MakeQueue(clock, 4, VirtualOpts(4));
  const int64_t a = q.GetTask(7, 0).task.id();
  const int64_t b = q.GetTask(7, 2).task.id();
  EXPECT_NE(a, b);
  EXPECT_EQ(q.GetTask(7, 2).task.id(), b);  // the retried call leases nothing new
  EXPECT_EQ(q.pending(), 2);
  EXPECT_EQ(q.TaskInSlot(7, 0), a);
  EXPECT_EQ(q.TaskInSlot(7, 1), 0);
  EXPECT_THAT(q.TasksHeldBy(7), ElementsAre(a, b));
  EXPECT_EQ(q.TaskHeldBy(7), a);
  // Renewing one trainer renews every lease it holds.
  clock.now += 900;
  EXPECT_EQ(q.RenewLeases(7), 2);
  clock.now += 900;
  EXPECT_EQ(q.ExpireLeases(), 0);
  clock.now += 200;
  EXPECT_EQ(q.ExpireLeases(), 2);
  EXPECT_TRUE(q.TasksHeldBy(7).empty());
}

TEST(VirtualTaskQueueTest, SlotsAndTheMicroBatchSurviveARestart) {
  FakeClock clock;
  TaskQueue q = MakeQueue(clock, 8, VirtualOpts(4, 2));
  ASSERT_TRUE(q.FixMicroBatch(32).ok());
  const int64_t a = q.GetTask(5, 1).task.id();
  const int64_t b = q.GetTask(5, 3).task.id();
  auto back = TaskQueue::Deserialize(q.Serialize(), clock.fn());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->virtual_trainers(), 4);
  EXPECT_EQ(back->micro_batch(), 32);
  EXPECT_EQ(back->TaskInSlot(5, 1), a);
  EXPECT_EQ(back->TaskInSlot(5, 3), b);
  EXPECT_THAT(back->task_records(), ElementsAre(20, 20, 20, 20));

  proto::TaskQueueState two_in_a_slot = q.Serialize();
  for (proto::TaskRecord& r : *two_in_a_slot.mutable_tasks()) {
    if (r.state() == proto::TaskRecord::PENDING) r.set_holder_slot(1);
  }
  auto bad = TaskQueue::Deserialize(two_in_a_slot, clock.fn());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("both held in slot 1 of trainer 5"));
  proto::TaskQueueState wrong_count = q.Serialize();
  wrong_count.set_virtual_trainers(3);
  EXPECT_THAT(TaskQueue::Deserialize(wrong_count, clock.fn()).status().message(),
              HasSubstr("4 tasks for 3 virtual trainers"));
}

TEST(VirtualTaskQueueTest, TheFirstMicroBatchIsTheJobs) {
  FakeClock clock;
  TaskQueue q = MakeQueue(clock, 4, VirtualOpts(4));
  EXPECT_EQ(q.FixMicroBatch(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q.micro_batch(), 0);
  ASSERT_TRUE(q.FixMicroBatch(64).ok());
  EXPECT_TRUE(q.FixMicroBatch(64).ok());
  Status other = q.FixMicroBatch(32);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr("micro-batch is 64 samples"));
  EXPECT_EQ(q.micro_batch(), 64);
}

// ---------------------------------------------------------------- the master's calls

MasterOptions VirtualMaster(FakeClock& clock, int v) {
  MasterOptions o;
  o.queue = VirtualOpts(v);
  o.num_pservers = 1;
  o.lease_ms = 1000;
  o.now_ms = clock.fn();
  o.expire_interval_ms = 0;
  o.log = [](const std::string&) {};
  return o;
}

Master::ChunkSource Chunks(int n) {
  return [n]() -> StatusOr<std::vector<ChunkInfo>> { return MakeChunks(n); };
}

proto::RegisterTrainerRequest Trainer(const std::string& name, int64_t micro_batch) {
  proto::RegisterTrainerRequest r;
  r.set_name(name);
  r.set_micro_batch(micro_batch);
  return r;
}

proto::GetTaskRequest Slot(int64_t trainer, int32_t slot) {
  proto::GetTaskRequest r;
  r.set_trainer_id(trainer);
  r.set_slot(slot);
  return r;
}

class VirtualMasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LocalDirStore::Open(dir_.path());
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
    auto m = Master::Open(VirtualMaster(clock_, 5), store_.get(), Chunks(10));
    ASSERT_TRUE(m.ok()) << m.status();
    master_ = std::move(m).value();
  }
  int32_t SlotsOf(int64_t trainer) {
    proto::HeartbeatRequest hb;
    hb.set_trainer_id(trainer);
    auto resp = master_->Heartbeat(hb);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->lease_slots() : -1;
  }

  ScratchDir dir_;
  FakeClock clock_;
  std::unique_ptr<LocalDirStore> store_;
  std::unique_ptr<Master> master_;
};

TEST_F(VirtualMasterTest, RegisteringGivesTheScheduleAndRefusesAnotherMicroBatch) {
  auto none = master_->RegisterTrainer(Trainer("python", 0));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("must give its micro-batch"));
  auto first = master_->RegisterTrainer(Trainer("a", 16));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_schedule());
  EXPECT_EQ(first->schedule().virtual_trainers(), 5);
  EXPECT_EQ(first->schedule().micro_batch(), 16);
  EXPECT_EQ(first->schedule().num_passes(), 1);
  EXPECT_THAT(first->schedule().task_records(), ElementsAre(20, 20, 20, 20, 20));
  auto other = master_->RegisterTrainer(Trainer("b", 8));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("trainer b refused"));
  EXPECT_THAT(other.status().message(), HasSubstr("micro-batch is 16 samples"));
  // The refused ones joined nothing.
  EXPECT_EQ(master_->JobStatus({})->live_trainers(), 1);
}

TEST_F(VirtualMasterTest, SlotsAreDealtOverTheLiveTrainersAndFollowJoins) {
  const int64_t a = master_->RegisterTrainer(Trainer("a", 16))->trainer_id();
  EXPECT_EQ(SlotsOf(a), 5);
  for (int slot = 0; slot < 5; ++slot) {
    auto r = master_->GetTask(Slot(a, slot));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->result(), proto::GetTaskResponse::TASK) << "slot " << slot;
  }
  const int64_t b = master_->RegisterTrainer(Trainer("b", 16))->trainer_id();
  const int64_t c = master_->RegisterTrainer(Trainer("c", 16))->trainer_id();
  EXPECT_EQ(SlotsOf(a), 2);  // 5 over 3: 2, 2, 1 in id order
  EXPECT_EQ(SlotsOf(b), 2);
  EXPECT_EQ(SlotsOf(c), 1);
  // A slot beyond the share leases nothing new, but a slot still held is given again
  // (so the holder learns what to give back).
  auto beyond = master_->GetTask(Slot(c, 1));
  ASSERT_TRUE(beyond.ok());
  EXPECT_EQ(beyond->result(), proto::GetTaskResponse::WAIT);
  EXPECT_EQ(beyond->lease_slots(), 1);
  auto still_held = master_->GetTask(Slot(a, 4));
  ASSERT_TRUE(still_held.ok());
  EXPECT_EQ(still_held->result(), proto::GetTaskResponse::TASK);
  EXPECT_EQ(master_->GetTask(Slot(a, 5)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VirtualMasterTest, AHandedOnTaskCountsNothingRetrained) {
  const int64_t a = master_->RegisterTrainer(Trainer("a", 16))->trainer_id();
  auto lease = master_->GetTask(Slot(a, 0));
  ASSERT_TRUE(lease.ok());
  proto::TaskFailedRequest back;
  back.set_trainer_id(a);
  back.set_task_id(lease->task().id());
  back.set_pass(lease->task().pass());
  back.set_returned(true);
  back.set_resumable(true);
  back.set_samples_pushed(48);  // its steps stay in the job: whoever goes on starts after them
  ASSERT_TRUE(master_->TaskFailed(back).ok());
  auto status = master_->JobStatus({});
  EXPECT_EQ(status->samples_retrained(), 0);
  EXPECT_EQ(status->tasks_returned(), 1);
  EXPECT_EQ(status->todo(), 5);
  // The same return without `resumable` (an ordinary job's) retrains what was pushed.
  auto again = master_->GetTask(Slot(a, 0));
  back.set_task_id(again->task().id());
  back.set_resumable(false);
  ASSERT_TRUE(master_->TaskFailed(back).ok());
  EXPECT_EQ(master_->JobStatus({})->samples_retrained(), 48);
}

}  // namespace
}  // namespace pl
