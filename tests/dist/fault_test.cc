// The distributed runtime with real processes on 127.0.0.1: pl-master, pl-pservers and
// pl-trainers (mlp on a 12000-sample subset of Fashion-MNIST) run a job while the test
// kills, stops, adds and restarts individual processes, and checks what the master's
// JobStatus, the pservers' Stats and the processes' logs say happened.
//
// Trainers log every step (--log_every_s 0): "... INFO trainer-R: pass P task T  step S  loss L",
// so the test knows when a trainer is in the middle of a task and which task it holds.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/mlp_job_test.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DistFaultTest : public MlpJobTest {};

// Fault-free async run: the job completes, every chunk is trained exactly once per pass
// (the sum of the trainers' finished tasks equals passes x tasks), and the model learns.
TEST_F(DistFaultTest, AsyncJobTrainsEveryChunkOncePerPassAndLearns) {
  constexpr int kPasses = 3, kPerTask = 2, kTasks = kChunks / kPerTask;
  // A long lease: nothing in this run may expire, even on a loaded machine.
  ASSERT_NO_FATAL_FAILURE(StartCluster(Options(kPasses, kPerTask, 10000), 3));
  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->chunks_trained(), kPasses * kChunks);
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  EXPECT_EQ(done->failed_task_ids_size(), 0);
  EXPECT_EQ(done->samples_done(), kPasses * kSamples);
  EXPECT_EQ(done->pass(), kPasses);

  int64_t tasks_by_trainers = 0;
  for (int r = 0; r < 3; ++r) {
    const double acc = ExpectFinishedWithAccuracy(r);
    // Calibrated on the 2-core machine: 12000 samples x 3 passes reach 0.785-0.80 on
    // the first 2000 test images (x 2 passes: 0.76-0.79); the interleaving of three
    // async trainers moves it by a few points from run to run.
    EXPECT_GE(acc, 0.74) << cluster_->TrainerLog(r);
    // Trainers and pservers share this host: dense tensors go through shared memory.
    for (int i = 0; i < 2; ++i) {
      EXPECT_THAT(cluster_->TrainerLog(r), HasSubstr(absl::StrCat("pserver ", i, ": dense traffic over shared memory")));
    }
    EXPECT_THAT(cluster_->TrainerLog(r), HasSubstr("dense parameters live in shared memory"));
    tasks_by_trainers += static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(r), "job done after ").value_or(0));
  }
  EXPECT_EQ(tasks_by_trainers, kPasses * kTasks) << "a task was trained twice or lost\n" << cluster_->AllLogs();
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr("expired")));
  EXPECT_THAT(cluster_->MasterLog(), HasSubstr(absl::StrCat("job done: ", kPasses, " passes, ", kPasses * kChunks,
                                                                " chunks trained, ", kPasses * kSamples, " samples")));
}

// The same with every trainer overlapping its traffic with its computation and the
// pservers applying pushes after acknowledging them, and no shared memory (the dense
// blocks over dense links, as across hosts): nothing is lost or trained twice.
TEST_F(DistFaultTest, PipelinedTrainersWithDeferredPushesTrainEveryChunkOnceAndLearn) {
  constexpr int kPasses = 3, kPerTask = 2, kTasks = kChunks / kPerTask;
  ClusterOptions o = Options(kPasses, kPerTask, 10000);
  o.trainer_args.push_back("--pipeline");
  o.trainer_args.push_back("--defer_apply");
  o.trainer_args.push_back("--shm=false");
  ASSERT_NO_FATAL_FAILURE(StartCluster(o, 2));
  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->chunks_trained(), kPasses * kChunks);
  EXPECT_EQ(done->failed(), 0);
  int64_t tasks_by_trainers = 0, steps = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(cluster_->TrainerLog(r), HasSubstr("(traffic overlapped with computation)"));
    EXPECT_THAT(cluster_->TrainerLog(r), ::testing::ContainsRegex("pserver 1: dense traffic (now )?over dense link"));
    const double acc = ExpectFinishedWithAccuracy(r);
    // About two steps of staleness per trainer, more when the machine is loaded: measured
    // 0.72-0.78 (8 runs, 4 beside a CPU hog) and once 0.658 in a full suite beside the hog.
    // The bound says the model learned (chance is 0.10), not how well async training does.
    EXPECT_GE(acc, 0.62) << cluster_->TrainerLog(r);
    tasks_by_trainers += static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(r), "job done after ").value_or(0));
    steps += static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(r), " tasks, ").value_or(0));
  }
  EXPECT_EQ(tasks_by_trainers, kPasses * kTasks) << cluster_->AllLogs();
  // Every step's push reached both pservers and was applied (the final checkpoint on
  // SIGTERM is written after the queue is drained).
  EXPECT_GT(steps, 0);
  for (int i = 0; i < 2; ++i) {
    int64_t applied = -1;
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          auto stats = cluster_->PserverStats(i);
          applied = stats.ok() ? stats->pushes_applied() : -1;
          return applied == steps;
        },
        seconds(10)))
        << "pserver " << i << " applied " << applied << " of " << steps << " pushes";
  }
}

// A trainer SIGKILLed mid-task: its task is leased again once its lease expires, the
// other trainer trains it, every chunk is still trained and the job completes.
TEST_F(DistFaultTest, SigkilledTrainersTaskIsLeasedAgainAfterItsLeaseExpires) {
  constexpr int64_t kLeaseMs = 1500;
  constexpr int kPerTask = 10, kTasks = kChunks / kPerTask;  // ~16 steps per task
  ASSERT_NO_FATAL_FAILURE(StartCluster(Options(1, kPerTask, kLeaseMs), 2));
  const int64_t task = WaitForStep(0, 2, seconds(30));
  ASSERT_GT(task, 0) << cluster_->AllLogs();
  const int64_t victim = TrainerId(0);
  ASSERT_GT(victim, 0);
  const pid_t victim_pid = cluster_->trainer(0).pid();
  ASSERT_TRUE(cluster_->trainer(0).Signal(SIGKILL).ok());
  const auto killed = Clock::now();
  auto before = cluster_->JobStatus();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GE(before->pending(), 1);  // the dead trainer's task stays leased until its lease runs out

  // The master notices through the lease, not at once.
  const std::string dropped = absl::StrCat("trainer ", victim, " dropped: its lease expired; 1 task(s) back to todo");
  auto seen = WaitForText(dir_.path() + "/master-0.log", dropped, milliseconds(kLeaseMs + 5000));
  ASSERT_TRUE(seen.has_value()) << cluster_->AllLogs();
  const double released_after_s = SecondsBetween(killed, *seen);
  std::cout << "[measured] SIGKILLed trainer's task back to todo after " << released_after_s << " s (lease "
            << kLeaseMs << " ms)" << std::endl;
  RecordProperty("task_released_after_ms", static_cast<int>(released_after_s * 1000));
  // The last heartbeat was at most lease/3 before the kill.
  EXPECT_GE(released_after_s, 0.5 * kLeaseMs / 1000.0);
  // Upper bound: the lease plus the master's expiry scan, with room for a loaded machine.
  EXPECT_LE(released_after_s, kLeaseMs / 1000.0 + 5.0);

  auto done = cluster_->WaitForJobDone(seconds(90));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_GE(done->chunks_trained(), kChunks);
  EXPECT_EQ(done->done(), kTasks);
  // Its shared-memory regions lost their names once attached: nothing is left behind.
  const std::string prefix = absl::StrCat("pl-shm-", victim_pid, "-");
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_NE(entry.path().filename().string().rfind(prefix, 0), 0u) << entry.path() << " outlived its trainer";
  }
  EXPECT_EQ(done->failed(), 0);
  // The survivor trained the dead trainer's task after the lease expired.
  EXPECT_THAT(cluster_->TrainerLog(1), HasSubstr(absl::StrCat("task ", task, "  step ")));
  EXPECT_GE(ExpectFinishedWithAccuracy(1), 0.65);
}

// SIGTERM: the trainer gives its task back at once (no lease timeout) and exits 0; a
// trainer started afterwards finishes the job with nothing counted as failed.
TEST_F(DistFaultTest, SigtermedTrainerReturnsItsTaskAtOnceAndExitsZero) {
  // A lease far longer than a loaded machine needs to stop a trainer, so a task back in
  // todo within half of it can only have been returned, not expired.
  constexpr int64_t kLeaseMs = 30000;
  constexpr int kPerTask = 10, kTasks = kChunks / kPerTask;
  ASSERT_NO_FATAL_FAILURE(StartCluster(Options(1, kPerTask, kLeaseMs), 1));
  const int64_t task = WaitForStep(0, 2, seconds(30));
  ASSERT_GT(task, 0) << cluster_->AllLogs();
  const int64_t id = TrainerId(0);
  ASSERT_TRUE(cluster_->trainer(0).Signal(SIGTERM).ok());
  const auto stopped = Clock::now();

  auto exit = testing::WaitForExit(cluster_->trainer(0), seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << cluster_->AllLogs();
  EXPECT_TRUE(exit->success()) << exit->Describe();
  const double exit_s = SecondsBetween(stopped, Clock::now());
  EXPECT_THAT(cluster_->TrainerLog(0), HasSubstr(absl::StrCat("returned task ", task, " to the master")));

  auto returned = WaitForText(dir_.path() + "/master-0.log", absl::StrCat("trainer ", id, " returned task ", task),
                              seconds(10));
  ASSERT_TRUE(returned.has_value()) << cluster_->AllLogs();
  auto status = cluster_->JobStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  const double checked_s = SecondsBetween(stopped, Clock::now());
  std::cout << "[measured] SIGTERMed trainer exited after " << exit_s << " s; task back in todo within "
            << checked_s << " s (lease " << kLeaseMs << " ms)" << std::endl;
  ASSERT_LT(checked_s * 1000, kLeaseMs / 2) << "too slow to tell a return from a lease expiry";
  EXPECT_EQ(status->pending(), 0);
  EXPECT_EQ(status->todo(), kTasks - status->done());
  EXPECT_EQ(status->failed(), 0);
  EXPECT_THAT(cluster_->MasterLog(), HasSubstr(absl::StrCat("trainer ", id, " left")));

  // Someone else finishes; the returned task was not a failure.
  auto rank = cluster_->StartTrainer();
  ASSERT_TRUE(rank.ok()) << rank.status();
  auto done = cluster_->WaitForJobDone(seconds(90));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  EXPECT_EQ(done->chunks_trained(), kChunks);
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr("expired")));
  EXPECT_THAT(cluster_->TrainerLog(*rank), HasSubstr(absl::StrCat("task ", task, "  step ")));
  ExpectFinishedWithAccuracy(*rank);
}

// A trainer added mid-job gets a task and its pushes are applied: every step sends one
// push to every pserver, so each pserver's pushes_applied equals the steps of both
// trainers together. Trainer 0 is paused (SIGSTOP) while the new one starts, so tasks
// are certainly left for it however slowly it starts (alone, trainer 0 can finish the
// whole job in a few seconds); its lease outlasts the pause.
TEST_F(DistFaultTest, TrainerAddedMidJobGetsATaskAndItsPushesAreApplied) {
  constexpr int kPerTask = 2, kTasks = kChunks / kPerTask;
  ASSERT_NO_FATAL_FAILURE(StartCluster(Options(1, kPerTask, 120000), 1));
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->JobStatus();
        return s.ok() && s->done() >= 2;
      },
      seconds(30)))
      << cluster_->AllLogs();
  ASSERT_TRUE(cluster_->trainer(0).Signal(SIGSTOP).ok());
  const auto spawned = Clock::now();
  auto rank = cluster_->StartTrainer();
  const std::string log = rank.ok() ? cluster_->TrainerLogPath(*rank) : "";
  auto registered = WaitForText(log, "registered as trainer", seconds(60));
  auto first_step = WaitForText(log, "  step 1  loss", seconds(60));
  auto paused = cluster_->JobStatus();
  ASSERT_TRUE(cluster_->trainer(0).Signal(SIGCONT).ok());
  ASSERT_TRUE(rank.ok()) << rank.status();
  ASSERT_TRUE(registered.has_value()) << cluster_->AllLogs();
  ASSERT_TRUE(first_step.has_value()) << "the new trainer trained no step while trainer 0 was paused\n"
                                      << cluster_->AllLogs();
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_LT(paused->done(), kTasks) << "the job must still be running while trainer 0 is paused";
  const double to_register = SecondsBetween(spawned, *registered);
  const double to_first_push = SecondsBetween(spawned, *first_step);
  std::cout << "[measured] new trainer: registered " << to_register << " s after spawn; first task trained and "
            << "pushed " << to_first_push << " s after spawn (" << to_first_push - to_register
            << " s after registering)" << std::endl;
  RecordProperty("first_push_after_spawn_ms", static_cast<int>(to_first_push * 1000));

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->done(), kTasks);
  ExpectFinishedWithAccuracy(0);
  ExpectFinishedWithAccuracy(*rank);
  const std::string closing = "job done after ";
  const int64_t tasks0 = static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(0), closing).value_or(0));
  const int64_t tasks1 = static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(*rank), closing).value_or(0));
  EXPECT_GE(tasks1, 1) << "the new trainer finished no task";
  EXPECT_EQ(tasks0 + tasks1, kTasks) << "a task was trained twice or lost\n" << cluster_->AllLogs();
  const int64_t steps0 = static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(0), " tasks, ").value_or(-1));
  const int64_t steps1 = static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(*rank), " tasks, ").value_or(-1));
  EXPECT_GE(steps1, 1);
  for (int i = 0; i < 2; ++i) {
    auto stats = cluster_->PserverStats(i);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->pushes_applied(), steps0 + steps1) << "pserver " << i;
    EXPECT_EQ(stats->pushes_rejected(), 0);
  }
}

// A pserver SIGKILLed and restarted (on a new port) with the same checkpoint directory
// restores its latest checkpoint; the trainers retry, re-resolve it through the master,
// and finish the job; the restarted pserver checkpoints again.
TEST_F(DistFaultTest, KilledPserverRestoresItsCheckpointAndTheJobCompletes) {
  constexpr int kPasses = 3, kPerTask = 2, kTasks = kChunks / kPerTask;
  ClusterOptions o = Options(kPasses, kPerTask, 5000);
  o.checkpoint_every_s = 1;
  ASSERT_NO_FATAL_FAILURE(StartCluster(o, 2));
  ASSERT_TRUE(WaitForCheckpoint(1)) << cluster_->AllLogs();
  auto before = cluster_->Membership();
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(cluster_->KillPserver(1).ok());
  auto mid = cluster_->JobStatus();
  ASSERT_TRUE(mid.ok());
  ASSERT_FALSE(mid->job_done()) << "the job ended before the pserver was killed: make it longer";
  std::this_thread::sleep_for(milliseconds(1500));  // the trainers retry meanwhile
  ASSERT_TRUE(cluster_->StartPserver(1).ok()) << cluster_->AllLogs();

  auto restored = cluster_->PserverStats(1);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->restored_from(), HasSubstr("ckpt"));
  EXPECT_GT(restored->version(), 0);
  EXPECT_THAT(cluster_->PserverLog(1), HasSubstr("INFO pserver-1: restored "));
  // The pserver registered again under a new generation (and, here, a new port).
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto m = cluster_->Membership();
        if (!m.ok()) return false;
        for (const auto& p : m->pservers()) {
          for (const auto& q : before->pservers()) {
            if (p.index() == 1 && q.index() == 1 && p.generation() > q.generation()) return true;
          }
        }
        return false;
      },
      seconds(10)))
      << cluster_->AllLogs();

  // The trainers' shared-memory regions died with the old process: they offer new ones.
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->PserverStats(1);
        return s.ok() && s->shm_regions() == 2;
      },
      seconds(20)))
      << cluster_->AllLogs();
  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  EXPECT_GE(done->chunks_trained(), kPasses * kChunks);
  int64_t retries = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
    retries += std::max<int64_t>(TrainerRetries(r), 0);
  }
  EXPECT_GT(retries, 0) << "the trainers never noticed the pserver was gone\n" << cluster_->AllLogs();
  // The restarted pserver writes checkpoints again (its counter starts at 0).
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->PserverStats(1);
        return s.ok() && s->checkpoints_written() >= 1;
      },
      seconds(10)))
      << cluster_->PserverLog(1);
}

// The master SIGKILLed and restarted on the same port with the same state directory:
// queues and membership come back, the trainers reconnect by themselves, no task is lost.
TEST_F(DistFaultTest, KilledMasterResumesFromItsStateAndNoTaskIsLost) {
  constexpr int kPasses = 2, kPerTask = 2, kTasks = kChunks / kPerTask;
  // The lease (the master restarts it in full) outlasts a reconnect on a loaded machine.
  ASSERT_NO_FATAL_FAILURE(StartCluster(Options(kPasses, kPerTask, 15000), 2));
  // The events the checks below rely on: both trainers registered with the first
  // incarnation (on a loaded machine one can still be starting) and tasks were done.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->JobStatus();
        return s.ok() && s->done() >= 3 && s->live_trainers() == 2;
      },
      seconds(30)))
      << cluster_->AllLogs();
  const int port = cluster_->master_port();
  ASSERT_TRUE(cluster_->KillMaster().ok());
  std::this_thread::sleep_for(milliseconds(1000));  // trainers and pservers retry meanwhile
  Status restarted = cluster_->StartMaster(port);
  ASSERT_TRUE(restarted.ok()) << restarted << "\n" << cluster_->AllLogs();
  EXPECT_THAT(cluster_->MasterLog(), HasSubstr("resumed: pass "));
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr("new job")));
  // Membership came back from the stored state, before any pserver re-registered.
  auto m = cluster_->Membership();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->pservers_size(), 2);
  auto resumed = cluster_->JobStatus();
  ASSERT_TRUE(resumed.ok());
  const int64_t progress = resumed->chunks_trained();
  EXPECT_GE(progress, 3 * kPerTask) << resumed->ShortDebugString();
  // The trainers reconnect by themselves and report work to the new incarnation.
  const auto restarted_at = Clock::now();
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->JobStatus();
        return s.ok() && s->chunks_trained() > progress;
      },
      seconds(30)))
      << cluster_->AllLogs();
  std::cout << "[measured] first task finished on the restarted master "
            << SecondsBetween(restarted_at, Clock::now()) << " s after it served" << std::endl;

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  EXPECT_GE(done->chunks_trained(), kPasses * kChunks);
  for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
  // Leases got a full term on restart and the trainers were back well within it: no
  // trainer was dropped, none registered again, and no task was trained twice.
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr("dropped")));
  EXPECT_THAT(cluster_->MasterLog(), Not(HasSubstr(") registered")));  // "trainer N (name) registered"
  EXPECT_EQ(done->chunks_trained(), kPasses * kChunks);
  for (int r = 0; r < 2; ++r) EXPECT_THAT(cluster_->TrainerLog(r), Not(HasSubstr("no longer ours")));
}

// Sync mode: a trainer SIGKILLed mid-step does not deadlock the barrier; the others go
// on once its lease expires, through a pass boundary (where live trainers may idle
// waiting for the pass's last task), and the job completes within a bound.
TEST_F(DistFaultTest, SyncModeSurvivesAKilledTrainer) {
  constexpr int64_t kLeaseMs = 1500;
  constexpr int kPasses = 2, kPerTask = 4, kTasks = kChunks / kPerTask;
  ClusterOptions o = Options(kPasses, kPerTask, kLeaseMs);
  o.trainer_env = {{"PL_SYNC", "1"}};
  ASSERT_NO_FATAL_FAILURE(StartCluster(o, 3));
  ASSERT_GT(WaitForStep(0, 3, seconds(30)), 0) << cluster_->AllLogs();
  ASSERT_TRUE(cluster_->trainer(0).Signal(SIGKILL).ok());
  const auto killed = Clock::now();
  auto done = cluster_->WaitForJobDone(seconds(150));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  std::cout << "[measured] sync job done " << SecondsBetween(killed, Clock::now())
            << " s after a trainer was killed" << std::endl;
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  EXPECT_GE(done->chunks_trained(), kPasses * kChunks);
  for (int r = 1; r < 3; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
  // The pservers really ran the sync barrier: one version per completed step, so
  // fewer versions than the survivors' pushes together.
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(cluster_->PserverLog(i), HasSubstr("(sync, seed"));
    auto stats = cluster_->PserverStats(i);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_LT(stats->version(), stats->pushes_applied()) << stats->ShortDebugString();
  }
}

}  // namespace
}  // namespace pl::dist_testing
