// Sync mode: the per-step barrier over the live trainers.
#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/dist/bf16.h"
#include "pserver/store/sync_barrier.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;

class SyncShard : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shard_.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f)),
                                      SparseSpec("e", 1, 0, InitSpec::Constant(0.0f))},
                                     Sgd(0.5f), 7, /*sync=*/true)).ok());
  }
  StatusOr<int64_t> Push(int64_t trainer, int64_t step, std::vector<float> g, absl::Time deadline = absl::InfiniteFuture()) {
    proto::PushRequest r;
    r.set_trainer_id(trainer);
    r.set_step(step);
    AddDense(&r, "p", 0, g);
    return shard_.Push(PushFrame::FromProtoRef(r), deadline);
  }
  ParameterShard shard_{0, 1};
};

TEST_F(SyncShard, TwoLiveTrainersAreAveragedAndAppliedOnce) {
  shard_.SetLiveTrainers({1, 2});
  auto v = Push(1, 0, {1.0f, 2.0f});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 0);  // waiting for trainer 2
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(1.0f, 1.0f));
  v = Push(2, 0, {3.0f, 6.0f});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  // mean gradient (2, 4), lr 0.5
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.0f, -1.0f));
  // A late duplicate of step 0 is stale: dropped.
  v = Push(1, 0, {100.0f, 100.0f});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.0f, -1.0f));
}

// A pull asking for bfloat16 gets the finished step's values rounded, in half the bytes.
TEST_F(SyncShard, ABfloat16PullSendsTheStepsValuesRounded) {
  shard_.SetLiveTrainers({1});
  ASSERT_TRUE(Push(1, 0, {0.002f, -1.0f}).ok());  // p = {1 - 0.001, 1 + 0.5}
  proto::PullRequest req;
  proto::DenseBlock* b = req.add_dense();
  b->set_param("p");
  b->set_block(0);
  req.set_bf16(true);
  req.set_min_version(1);
  proto::PullResponse resp;
  ASSERT_TRUE(shard_.Pull(req, absl::InfiniteFuture(), &resp).ok());
  ASSERT_EQ(resp.dense(0).bf16_values().size(), 4u);
  EXPECT_TRUE(resp.dense(0).values().empty());
  float got[2];
  DecodeBf16(resp.dense(0).bf16_values().data(), 2, got);
  EXPECT_EQ(got[0], 1.0f);  // 0.999 is within half a bfloat16 ulp (2^-8) of 1
  EXPECT_EQ(got[1], 1.5f);
}

TEST_F(SyncShard, ARetriedPushCountsOnce) {
  shard_.SetLiveTrainers({1, 2});
  ASSERT_TRUE(Push(1, 0, {2.0f, 2.0f}).ok());
  ASSERT_TRUE(Push(1, 0, {2.0f, 2.0f}).ok());
  EXPECT_EQ(shard_.version(), 0);
  ASSERT_TRUE(Push(2, 0, {0.0f, 0.0f}).ok());
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.5f, 0.5f));  // mean 1, not 4/3
}

TEST_F(SyncShard, ATrainerLeavingTheLiveSetLeavesTheBarrier) {
  shard_.SetLiveTrainers({1, 2});
  ASSERT_TRUE(Push(1, 0, {2.0f, 4.0f}).ok());
  EXPECT_EQ(shard_.version(), 0);
  shard_.SetLiveTrainers({1});  // trainer 2's lease expired
  EXPECT_EQ(shard_.version(), 1);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.0f, -1.0f));
}

TEST_F(SyncShard, ANewTrainerJoinsAtTheNextStep) {
  shard_.SetLiveTrainers({1, 2});
  ASSERT_TRUE(Push(1, 0, {0.0f, 0.0f}).ok());
  shard_.SetLiveTrainers({1, 2, 3});  // 3 arrives mid-step: not waited for
  ASSERT_TRUE(Push(2, 0, {0.0f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 1);
  ASSERT_TRUE(Push(1, 1, {0.0f, 0.0f}).ok());
  ASSERT_TRUE(Push(2, 1, {0.0f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 1);  // now 3 takes part
  ASSERT_TRUE(Push(3, 1, {3.0f, 3.0f}).ok());
  EXPECT_EQ(shard_.version(), 2);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.5f, 0.5f));
}

TEST_F(SyncShard, SparseRowsAreAveragedOverTheStepsTrainers) {
  shard_.SetLiveTrainers({1, 2});
  proto::PushRequest a;
  a.set_trainer_id(1);
  AddRows(&a, "e", 1, {5, 6}, {2.0f, 4.0f});
  proto::PushRequest b;
  b.set_trainer_id(2);
  AddRows(&b, "e", 1, {5}, {2.0f});
  ASSERT_TRUE(shard_.Push(PushFrame::FromProtoRef(a)).ok());
  ASSERT_TRUE(shard_.Push(PushFrame::FromProtoRef(b)).ok());
  EXPECT_EQ(shard_.version(), 1);
  // row 5: mean (2+2)/2 = 2; row 6: 4/2 = 2 (trainer 2 contributed zero); lr 0.5
  EXPECT_THAT(PullRows(shard_, "e", {5, 6}), ::testing::ElementsAre(-1.0f, -1.0f));
}

TEST_F(SyncShard, PullWaitsForTheVersionWithinItsDeadline) {
  shard_.SetLiveTrainers({1});
  proto::PullRequest pull;
  auto* d = pull.add_dense();
  d->set_param("p");
  d->set_block(0);
  pull.set_min_version(1);
  proto::PullResponse resp;
  const absl::Time start = absl::Now();
  Status s = shard_.Pull(pull, absl::Now() + absl::Milliseconds(50), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  std::thread pusher([&] {
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE(Push(1, 0, {2.0f, 2.0f}).ok());
  });
  s = shard_.Pull(pull, absl::Now() + absl::Seconds(5), &resp);
  pusher.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(resp.version(), 1);
  EXPECT_THAT(Floats(resp.dense(0).values()), ::testing::ElementsAre(0.0f, 0.0f));
}

TEST_F(SyncShard, APushForALaterStepWaitsForIt) {
  shard_.SetLiveTrainers({1, 2});
  // Trainer 1 runs ahead: its step-1 push waits until step 0 completes.
  ASSERT_TRUE(Push(1, 0, {0.0f, 0.0f}).ok());
  auto early = Push(1, 1, {0.0f, 0.0f}, absl::Now() + absl::Milliseconds(30));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded);
  StatusOr<int64_t> ahead = absl::UnknownError("not run");
  std::thread t([&] { ahead = Push(1, 1, {2.0f, 2.0f}, absl::Now() + absl::Seconds(5)); });
  absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(Push(2, 0, {0.0f, 0.0f}).ok());
  t.join();
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  ASSERT_TRUE(Push(2, 1, {0.0f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 2);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(0.5f, 0.5f));
}

TEST_F(SyncShard, ConcurrentTrainersStayInLockstepAndOneMayLeave) {
  shard_.SetLiveTrainers({1, 2, 3, 4});
  constexpr int kSteps = 30;
  std::vector<std::thread> trainers;
  for (int t = 1; t <= 4; ++t) {
    trainers.emplace_back([&, t] {
      const int steps = t == 4 ? 10 : kSteps;  // trainer 4 is preempted after 10 steps
      for (int step = 0; step < steps; ++step) {
        auto v = Push(t, step, {1.0f, 1.0f}, absl::Now() + absl::Seconds(10));
        ASSERT_TRUE(v.ok()) << v.status();
        proto::PullRequest pull;
        pull.set_min_version(step + 1);
        pull.add_dense()->set_param("p");
        proto::PullResponse resp;
        if (t == 4 && step == steps - 1) return;  // gone without waiting
        Status s = shard_.Pull(pull, absl::Now() + absl::Seconds(10), &resp);
        ASSERT_TRUE(s.ok()) << s;
      }
    });
  }
  trainers[3].join();
  shard_.SetLiveTrainers({1, 2, 3});  // its lease expires
  for (int t = 0; t < 3; ++t) trainers[t].join();
  EXPECT_EQ(shard_.version(), kSteps);
  // Every step's mean gradient is 1; lr 0.5.
  EXPECT_THAT(PullBlock(shard_, "p", 0), ::testing::ElementsAre(1.0f - 0.5f * kSteps, 1.0f - 0.5f * kSteps));
}

TEST_F(SyncShard, ShutdownWakesWaiters) {
  proto::PullRequest pull;
  pull.set_min_version(5);
  proto::PullResponse resp;
  std::thread t([&] {
    absl::SleepFor(absl::Milliseconds(20));
    shard_.Shutdown();
  });
  EXPECT_EQ(shard_.Pull(pull, absl::Now() + absl::Seconds(10), &resp).code(), absl::StatusCode::kUnavailable);
  t.join();
}

// The barrier alone: a step's update waits for the reads holding the step, and a
// push that comes while the update is due finds its step finished.
TEST(SyncBarrierTest, AStepsUpdateWaitsForItsReadersAndThenClosesTheStep) {
  VersionClock clock(0);
  SyncBarrier barrier(&clock);
  barrier.SetLive({1});
  std::atomic<int> applied{-1};
  std::thread completer;
  {
    const SyncBarrier::StepHold read = barrier.HoldForRead();
    {
      SyncBarrier::Admission a = barrier.Admit(1, 0);
      ASSERT_EQ(a.kind, SyncBarrier::Admission::kAdmitted);
      EXPECT_EQ(a.version, 0);
    }
    EXPECT_EQ(barrier.Admit(1, 0).kind, SyncBarrier::Admission::kRepeated);
    completer = std::thread([&] { barrier.MaybeComplete([&](int contributors) { applied = contributors; }); });
    absl::SleepFor(absl::Milliseconds(30));
    EXPECT_EQ(applied, -1) << "the update ran while a read held the step";
    EXPECT_EQ(clock.version(), 0);
  }
  completer.join();
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(clock.version(), 1);
  EXPECT_EQ(barrier.Admit(2, 0).kind, SyncBarrier::Admission::kStale);
}

// A trainer that pushes before the membership names it (a job's start, a trainer added)
// is waited for from the next step: its pushes stop being stale, where each was a batch
// lost. One that left is never waited for again, even if a push of its was in flight.
TEST(SyncBarrierTest, APusherIsLiveFromItsFirstPushUnlessItLeft) {
  VersionClock clock(0);
  SyncBarrier barrier(&clock);
  barrier.SetLive({1});
  int applied = -1;
  auto complete = [&] { barrier.MaybeComplete([&](int contributors) { applied = contributors; }); };
  { SyncBarrier::Admission a = barrier.Admit(1, 0); }
  complete();
  ASSERT_EQ(clock.version(), 1);  // step 0 finished with trainer 1 alone
  // Trainer 2 (not yet in the membership) pushes step 0: stale, but live from now on.
  EXPECT_EQ(barrier.Admit(2, 0).kind, SyncBarrier::Admission::kStale);
  { SyncBarrier::Admission a = barrier.Admit(1, 1); }
  complete();
  EXPECT_EQ(clock.version(), 1) << "step 1 finished without trainer 2, whose pushes would all be stale";
  { SyncBarrier::Admission a = barrier.Admit(2, 1); }
  complete();
  EXPECT_EQ(clock.version(), 2);
  EXPECT_EQ(applied, 2);
  // Trainer 2 leaves; a push of its that was in flight does not bring it back.
  barrier.SetLive({1});
  { SyncBarrier::Admission a = barrier.Admit(2, 2); }
  { SyncBarrier::Admission a = barrier.Admit(1, 2); }
  complete();
  ASSERT_EQ(clock.version(), 3);
  { SyncBarrier::Admission a = barrier.Admit(1, 3); }
  complete();
  EXPECT_EQ(clock.version(), 4) << "a step waited for a trainer that had left";
}

}  // namespace
}  // namespace pl::pserver
