// The distributed runtime across hosts: pl-master, pl-pservers and pl-trainers on
// different hosts of a test bed (test_bed.h: network namespaces with their own address
// and /dev/shm, so every byte between hosts goes over TCP: gRPC, and the dense links
// beside it) run the mlp job of the
// single-host tests (MlpJobTest) while the test cuts hosts off, loses them, moves a
// pserver to another host and shapes a link; the master's JobStatus, the pservers'
// Stats and the processes' logs say what happened.
//
// Each test makes its event happen at a known point: it waits until a trainer has
// logged a step (the job is provably running) before the fault, and its assertion
// messages name the event they rely on. Every wait is bounded. The bed and the
// processes are removed after each test, also when it fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/mlp_job_test.h"
#include "tests/netbed/bed_job_test.h"
#include "paddle_like/testing/bed_placement.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {
namespace {

using ::pl::netbed::LinkShape;
using ::pl::netbed::TestBed;
using ::testing::HasSubstr;
using ::testing::Not;
using Role = ProcessPlacement::Role;

class MultiHostTest : public BedJobTest {
 protected:

  void TearDown() override {
    MlpJobTest::TearDown();
    cluster_.reset();  // before the bed: its processes first
  }

  // Builds a bed of `hosts` hosts and starts the job on it as `layout` says.
  void StartOnBed(int hosts, ClusterOptions o, int trainers, int master_host, std::vector<int> pserver_hosts,
                  std::vector<int> trainer_hosts) {
    auto bed = TestBed::Create(hosts);
    ASSERT_TRUE(bed.ok()) << bed.status();
    bed_ = std::move(*bed);
    placement_ = std::make_unique<BedPlacement>(bed_.get());
    placement_->master_host = master_host;
    placement_->pserver_hosts = std::move(pserver_hosts);
    placement_->trainer_hosts = std::move(trainer_hosts);
    o.placement = placement_.get();
    ASSERT_NO_FATAL_FAILURE(StartCluster(std::move(o), trainers));
  }

  // Every chunk trained exactly once per pass, every task done, none failed.
  void ExpectEveryChunkTrainedOncePerPass(const proto::JobStatusResponse& done, int passes, int per_task) {
    EXPECT_EQ(done.chunks_trained(), passes * kChunks) << done.ShortDebugString();
    EXPECT_EQ(done.samples_done(), passes * kSamples) << done.ShortDebugString();
    EXPECT_EQ(done.done(), kChunks / per_task);
    EXPECT_EQ(done.failed(), 0);
    EXPECT_EQ(done.failed_task_ids_size(), 0);
  }

  // Every byte between hosts went over TCP: each trainer's dense blocks went over a dense
  // link to each pserver (it says so), and no pserver opened a trainer's shared memory.
  void ExpectDenseLinks(int trainers) {
    for (int r = 0; r < trainers; ++r) {
      for (int i = 0; i < 2; ++i) {
        // At connect, or ("now over") once a pserver busy then took the link later.
        EXPECT_THAT(cluster_->TrainerLog(r),
                    ::testing::ContainsRegex(absl::StrCat("pserver ", i, ": dense traffic (now )?over dense link")))
            << "trainer " << r << " on host " << placement_->HostOf(Role::kTrainer, r) << ", pserver " << i
            << " on host " << placement_->HostOf(Role::kPserver, i);
      }
      EXPECT_THAT(cluster_->TrainerLog(r), Not(HasSubstr("over shared memory")));
    }
  }

  // The job is running: trainer `rank` logged its step `step`; the job is not done.
  // Returns the task that step was in.
  int64_t WaitUntilRunning(int rank, int step) {
    const int64_t task = WaitForStep(rank, step, seconds(60));
    EXPECT_GT(task, 0) << "trainer " << rank << " logged no step " << step << "\n" << cluster_->AllLogs();
    auto status = cluster_->JobStatus();
    EXPECT_TRUE(status.ok() && !status->job_done())
        << "the job must still be running when the fault starts: make it longer\n"
        << (status.ok() ? status->ShortDebugString() : status.status().ToString());
    return task;
  }

  std::unique_ptr<TestBed> bed_;
  std::unique_ptr<BedPlacement> placement_;
};

// Hosts: A = master + pserver 0, B = pserver 1, C = both trainers.
constexpr int kA = 0, kB = 1, kC = 2;

// Master and pserver 0 on one host, pserver 1 on a second, two trainers on a third: the
// job finishes, every chunk is trained once per pass, the model learns as on one host,
// and the dense blocks go over dense links (the pservers cannot open the trainers' shared
// memory on another host).
TEST_F(MultiHostTest, MasterPserversAndTrainersOnThreeHostsTrainEveryChunkOnceOverDenseLinks) {
  constexpr int kPasses = 2, kPerTask = 2;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(3, Options(kPasses, kPerTask, 10000), 2, kA, {kA, kB}, {kC}));
  const auto started = Clock::now();
  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  std::cout << "[measured] 2 trainers x 2 pservers on 3 hosts: job done in " << SecondsBetween(started, Clock::now())
            << " s" << std::endl;
  ExpectEveryChunkTrainedOncePerPass(*done, kPasses, kPerTask);
  int64_t tasks = 0;
  for (int r = 0; r < 2; ++r) {
    // The single-host run reaches 0.76-0.79 after 2 passes (fault_test.cc).
    EXPECT_GE(ExpectFinishedWithAccuracy(r), 0.74) << cluster_->TrainerLog(r);
    tasks += TasksTrained(r);
  }
  EXPECT_EQ(tasks, kPasses * (kChunks / kPerTask)) << "a task was trained twice or lost\n" << cluster_->AllLogs();
  ExpectDenseLinks(2);
  for (int i = 0; i < 2; ++i) {
    auto stats = cluster_->PserverStats(i);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->shm_regions(), 0) << "pserver " << i << " attached a trainer's memory across hosts";
    EXPECT_EQ(stats->dense_links(), 2) << "pserver " << i << ": one link per trainer";
  }
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr("expired")));
}

// Pserver 1's host cut off for 10 s mid-job: the trainers stall on it (every step
// pushes to both pservers) and go on once it is back; the job finishes with every chunk
// trained once per pass.
TEST_F(MultiHostTest, PserverHostCutOffForTenSecondsAndTheJobStillFinishes) {
  constexpr int kPasses = 2, kPerTask = 2;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(3, Options(kPasses, kPerTask, 3000), 2, kA, {kA, kB}, {kC}));
  ASSERT_GT(WaitUntilRunning(0, 2), 0);
  auto before = cluster_->JobStatus();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(bed_->CutOff(kB).ok());
  std::this_thread::sleep_for(seconds(10));
  auto during = cluster_->JobStatus();  // the master's host is not cut off
  ASSERT_TRUE(during.ok()) << during.status();
  ASSERT_TRUE(bed_->Heal(kB).ok());
  const auto healed = Clock::now();
  // The event this test relies on: the cut stalled the job. At most the tasks the two
  // trainers were finishing can have completed while pserver 1 was unreachable.
  EXPECT_FALSE(during->job_done());
  EXPECT_LE(during->chunks_trained() - before->chunks_trained(), 2 * kPerTask)
      << "tasks completed while pserver 1 was cut off: was it?\nbefore: " << before->ShortDebugString()
      << "\nduring: " << during->ShortDebugString();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(cluster_->trainer(r).running()) << "trainer " << r << " gave up";

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  std::cout << "[measured] job done " << SecondsBetween(healed, Clock::now()) << " s after pserver 1's host healed"
            << std::endl;
  ExpectEveryChunkTrainedOncePerPass(*done, kPasses, kPerTask);
  for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
  ExpectDenseLinks(2);
}

// A trainer's host lost mid-task (its processes SIGKILLed behind a dead link, so the
// master hears nothing): its task goes back to todo when its lease expires, the trainer
// on the other host trains it, and no chunk is lost or trained twice.
TEST_F(MultiHostTest, LostTrainerHostsTaskIsLeasedAgainAfterItsLeaseExpires) {
  constexpr int64_t kLeaseMs = 1500;
  constexpr int kPerTask = 10;  // ~16 steps per task
  constexpr int kD = 3;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(4, Options(1, kPerTask, kLeaseMs), 2, kA, {kA, kB}, {kC, kD}));
  const int64_t task = WaitUntilRunning(0, 2);
  ASSERT_GT(task, 0);
  const int64_t victim = TrainerId(0);
  ASSERT_GT(victim, 0);
  ASSERT_TRUE(bed_->Lose(kC).ok());
  const auto lost = Clock::now();
  auto exit = testing::WaitForExit(cluster_->trainer(0), seconds(5));
  ASSERT_TRUE(exit.ok() && exit->signal == SIGKILL) << "trainer 0 did not die with its host";

  // The event: the master drops the silent trainer through its lease, not at once.
  const std::string dropped = absl::StrCat("trainer ", victim, " dropped: its lease expired; 1 task(s) back to todo");
  auto seen = WaitForText(dir_.path() + "/master-0.log", dropped, milliseconds(kLeaseMs + 5000));
  ASSERT_TRUE(seen.has_value()) << "the master never dropped trainer " << victim << " of the lost host\n"
                                << cluster_->AllLogs();
  const double released_after_s = SecondsBetween(lost, *seen);
  std::cout << "[measured] lost host's task back to todo after " << released_after_s << " s (lease " << kLeaseMs
            << " ms)" << std::endl;
  EXPECT_GE(released_after_s, 0.5 * kLeaseMs / 1000.0);

  auto done = cluster_->WaitForJobDone(seconds(90));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  ExpectEveryChunkTrainedOncePerPass(*done, 1, kPerTask);
  // The survivor, on the other host, trained the lost trainer's task.
  EXPECT_THAT(cluster_->TrainerLog(1), HasSubstr(absl::StrCat("task ", task, "  step ")));
  EXPECT_GE(ExpectFinishedWithAccuracy(1), 0.65);
}

// The master's host cut off for 10 s mid-job, longer than the lease: the trainers keep
// training the task they hold, the pservers keep serving, both retry the master; the
// master drops the silent trainers (their leases expire) and they register again once
// it is back; the job finishes and the master counts every chunk once per pass.
TEST_F(MultiHostTest, MasterHostCutOffForTenSecondsAndNothingIsCountedTwice) {
  constexpr int kPasses = 2, kPerTask = 10;  // ~16 steps a task: a trainer holds one through the cut's start
  constexpr int64_t kLeaseMs = 3000;
  // The master alone on host 0, so that only the master is cut off.
  constexpr int kM = 0, kP0 = 1, kP1 = 2, kT = 3;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(4, Options(kPasses, kPerTask, kLeaseMs), 2, kM, {kP0, kP1}, {kT}));
  ASSERT_GT(WaitUntilRunning(0, 2), 0);
  // Both trainers registered and training before the cut (the counts below rely on it;
  // on a loaded machine the second can still be starting).
  ASSERT_GT(WaitForStep(1, 1, seconds(60)), 0) << "trainer 1 never trained before the cut\n" << cluster_->AllLogs();
  // The task trainer 0 is in now, at its step `next`, with room for 3 more steps in it
  // (a task is 16 steps: 1000 samples, batch 64); else the next task's turn.
  int next = 0;
  int64_t held = -1;
  for (const auto give_up = Clock::now() + seconds(30); held <= 0 && Clock::now() < give_up;) {
    next = CountOf(cluster_->TrainerLog(0), "  loss ") + 1;
    const int64_t task = WaitForStep(0, next, seconds(10));
    if (task <= 0) break;
    if (CountOf(cluster_->TrainerLog(0), absl::StrCat("task ", task, "  step ")) <= 12) held = task;
  }
  ASSERT_GT(held, 0) << "trainer 0 was never early enough in a task\n" << cluster_->TrainerLog(0);
  ASSERT_TRUE(bed_->CutOff(kM).ok());
  const auto cut = Clock::now();
  // The trainer goes on with the task it holds: the pservers are still reachable.
  EXPECT_EQ(WaitForStep(0, next + 3, seconds(5)), held)
      << "trainer 0 stopped training its task when the master went away\n" << cluster_->TrainerLog(0);
  // The test cannot reach the master either (a 3 s deadline, within the cut).
  auto during = cluster_->JobStatus();
  EXPECT_FALSE(during.ok()) << "the master answered while its host was cut off";
  std::this_thread::sleep_until(cut + seconds(10));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(cluster_->trainer(r).running()) << "trainer " << r << " gave up";
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(cluster_->pserver(i).running()) << "pserver " << i << " gave up";
  ASSERT_TRUE(bed_->Heal(kM).ok());
  const auto healed = Clock::now();
  std::cout << "[measured] master cut off for " << SecondsBetween(cut, healed) << " s" << std::endl;

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  std::cout << "[measured] job done " << SecondsBetween(healed, Clock::now()) << " s after the master's host healed"
            << std::endl;
  ExpectEveryChunkTrainedOncePerPass(*done, kPasses, kPerTask);
  // The events: the cut outlasted the lease, so the master dropped both trainers and
  // put their tasks back; both registered again after the heal.
  EXPECT_EQ(CountOf(cluster_->MasterLog(), "dropped: its lease expired"), 2) << cluster_->MasterLog();
  EXPECT_EQ(CountOf(cluster_->MasterLog(), ") registered"), 4) << cluster_->MasterLog();
  int64_t tasks = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
    tasks += TasksTrained(r);
  }
  // The tasks held through the cut were leased again and trained by someone: the
  // trainers may have trained more tasks than the job has, never fewer.
  std::cout << "[measured] the trainers finished " << tasks << " tasks for the " << kPasses * (kChunks / kPerTask)
            << " the master counted" << std::endl;
  EXPECT_GE(tasks, kPasses * (kChunks / kPerTask));
}

// Pserver 1's host lost after a checkpoint, and pserver 1 restarted on another host
// (a new address) from the same checkpoint directory (a shared volume): the trainers
// find it through the master and resume within seconds, and the job finishes with
// every chunk trained.
//
// A lost host sends no FIN or RST. Before keepalive pings (rpc::MakeChannel) a trainer's
// call to the old address hung until its 30 s deadline and the retry went to the stale
// address once more: steps stopped for 30-60 s and in 4 of ~17 runs the job hung past
// 120 s. Now the pings fail the call within kKeepalivePingEveryMs + kKeepaliveTimeoutMs
// and the retry starts from the master's current address (ParameterClient::ExchangeShard).
TEST_F(MultiHostTest, PserverRestartedOnAnotherHostIsFoundThroughTheMaster) {
  constexpr int kPasses = 3, kPerTask = 2;
  constexpr int kD = 3;  // where pserver 1 comes back
  ClusterOptions o = Options(kPasses, kPerTask, 5000);
  o.checkpoint_every_s = 1;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(4, o, 2, kA, {kA, kB}, {kC}));
  ASSERT_TRUE(WaitForCheckpoint(1)) << cluster_->AllLogs();
  ASSERT_GT(WaitUntilRunning(0, 2), 0);
  ASSERT_TRUE(bed_->Lose(kB).ok());
  std::this_thread::sleep_for(milliseconds(1000));  // the trainers are stuck on the old address meanwhile
  placement_->pserver_hosts[1] = kD;
  std::vector<int> steps_before(2);
  for (int r = 0; r < 2; ++r) steps_before[r] = CountOf(cluster_->TrainerLog(r), "  step ");
  ASSERT_TRUE(cluster_->StartPserver(1).ok()) << cluster_->AllLogs();
  const auto restarted = Clock::now();
  auto restored = cluster_->PserverStats(1);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->restored_from(), HasSubstr("ckpt"));
  // The event: the master now gives pserver 1's new address.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto m = cluster_->Membership();
        if (!m.ok()) return false;
        for (const auto& p : m->pservers()) {
          if (p.index() == 1 && p.address().rfind(bed_->host(kD).address() + ":", 0) == 0) return true;
        }
        return false;
      },
      seconds(10)))
      << "the master does not give pserver 1's address on host " << kD << "\n"
      << cluster_->AllLogs();
  // Every step needs both pservers: a new step line means the trainer reached pserver 1
  // at its new address. Within 15 s of the restart: the pings need 5 s, a call timeout
  // (30 s) would be the defect above.
  for (int r = 0; r < 2; ++r) {
    const bool resumed =
        testing::WaitUntil([&] { return CountOf(cluster_->TrainerLog(r), "  step ") > steps_before[r]; },
                           std::chrono::duration_cast<milliseconds>(restarted + seconds(15) - Clock::now()));
    std::cout << "[measured] trainer " << r << (resumed ? " resumed " : " had not resumed ")
              << SecondsBetween(restarted, Clock::now()) << " s after pserver 1 restarted on another host" << std::endl;
    EXPECT_TRUE(resumed) << "trainer " << r << " trained no step within 15 s of pserver 1's restart on another host";
  }

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  ExpectEveryChunkTrainedOncePerPass(*done, kPasses, kPerTask);
  for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
  auto stats = cluster_->PserverStats(1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->pushes_applied(), 0) << "the trainers never reached pserver 1 at its new address";
}

// The trainers' link with 2 ms latency and 1% loss (each direction): the job finishes
// with every chunk trained once per pass.
TEST_F(MultiHostTest, TwoMsLatencyAndOnePercentLossOnTheTrainersLink) {
  constexpr int kPasses = 2, kPerTask = 2;
  ASSERT_NO_FATAL_FAILURE(StartOnBed(3, Options(kPasses, kPerTask, 10000), 0, kA, {kA, kB}, {kC}));
  ASSERT_TRUE(bed_->Shape(kC, LinkShape{2, 1, 0}).ok());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(cluster_->StartTrainer().ok());
  const auto started = Clock::now();
  auto done = cluster_->WaitForJobDone(seconds(150));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  const auto relay = bed_->RelayCounters(kC);
  std::cout << "[measured] job done in " << SecondsBetween(started, Clock::now())
            << " s over 2 ms + 1% loss; relay: " << relay.relayed << " frames relayed, " << relay.lost << " lost"
            << std::endl;
  // The event: the link really dropped frames of this job.
  EXPECT_GT(relay.lost, 0);
  ExpectEveryChunkTrainedOncePerPass(*done, kPasses, kPerTask);
  for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
  ExpectDenseLinks(2);
}

}  // namespace
}  // namespace pl::dist_testing
