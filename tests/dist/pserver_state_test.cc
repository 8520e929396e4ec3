// What a job keeps of its parameters when a pserver loses them, and what it hands back
// at its end: a pserver SIGKILLed before any checkpoint could exist comes back empty and
// the trainers initialise it again instead of dying; `pl-trainer --save` in a job writes
// the parameters the pservers hold at its end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/mlp_job_test.h"
#include "trainer/batching.h"
#include "trainer/example_data.h"
#include "trainer/models.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;

using PserverStateTest = MlpJobTest;

// No checkpoints (no --checkpoint_dir): pserver 1 SIGKILLed mid-job comes back knowing
// nothing. The trainers' next call gets NOT_FOUND; the one whose Init creates it again
// gives it that trainer's copy of its values (the optimizer's state is lost, and
// said so), and the job finishes with every task done.
TEST_F(PserverStateTest, PserverKilledBeforeAnyCheckpointGetsATrainersCopyAndTheJobFinishes) {
  constexpr int kPasses = 3, kPerTask = 2, kTasks = kChunks / kPerTask;
  ClusterOptions o = Options(kPasses, kPerTask, 5000);
  o.checkpoint_every_s = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(o, 2));
  // The events: pserver 1 held trained parameters when it died, and both trainers had
  // connected (a trainer connecting later initialises the empty pserver at its start,
  // which is not the recovery under test).
  ASSERT_GT(WaitForStep(0, 3, seconds(60)), 0) << cluster_->AllLogs();
  ASSERT_GT(WaitForStep(1, 1, seconds(60)), 0) << cluster_->AllLogs();
  ASSERT_TRUE(cluster_->KillPserver(1).ok());
  auto mid = cluster_->JobStatus();
  ASSERT_TRUE(mid.ok()) << mid.status();
  ASSERT_FALSE(mid->job_done()) << "the job ended before the pserver was killed: make it longer";
  std::this_thread::sleep_for(milliseconds(1000));  // the trainers retry meanwhile
  ASSERT_TRUE(cluster_->StartPserver(1).ok()) << cluster_->AllLogs();

  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  EXPECT_EQ(done->done(), kTasks);
  EXPECT_EQ(done->failed(), 0);
  // The loss is still counted, and its line says what came back.
  ASSERT_EQ(done->losses_size(), 1) << cluster_->AllLogs();
  EXPECT_THAT(done->losses(0), HasSubstr("pserver 1 restarted without its state"));
  EXPECT_THAT(done->losses(0), HasSubstr("a trainer then gave it its copy of the dense values"));
  // Pserver 1 lost what it had learned; the passes after it make most of it up.
  for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), 0.60);
  const std::string logs = cluster_->TrainerLog(0) + cluster_->TrainerLog(1);
  EXPECT_THAT(logs, HasSubstr("pserver 1 ("))
      << "no trainer found pserver 1 empty: did it come back with its parameters?\n" << cluster_->AllLogs();
  EXPECT_THAT(logs, HasSubstr("had lost its parameters: gave it this trainer's copy of them"));
  EXPECT_THAT(cluster_->PserverLog(1), HasSubstr("dense blocks from a trainer's copy"));
}

// Both trainers evaluate and --save at the job's end; the file holds the parameters the
// pservers ended with: loaded into a fresh model, it scores exactly what the trainers did.
TEST_F(PserverStateTest, SaveWritesTheJobsFinalParametersPulledFromThePservers) {
  const std::string path = dir_.path() + "/final.safetensors";
  ClusterOptions o = Options(1, 2, 10000);
  o.trainer_args.push_back("--save");
  o.trainer_args.push_back(path);
  ASSERT_NO_FATAL_FAILURE(StartCluster(o, 2));
  auto done = cluster_->WaitForJobDone(seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
  double reported = 0;
  for (int r = 0; r < 2; ++r) {
    reported = ExpectFinishedWithAccuracy(r);
    EXPECT_THAT(cluster_->TrainerLog(r), HasSubstr("saved the job's final parameters to " + path));
  }

  auto model = MakeExampleModel("mlp", ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(LoadModule(path, (*model)->module()).ok());
  auto test = LoadExampleSet(test_src_, TaskKind::kClassification, 2000);  // the trainers' --test_limit
  ASSERT_TRUE(test.ok()) << test.status();
  auto eval = Evaluate(**model, *test, 500);
  ASSERT_TRUE(eval.ok()) << eval.status();
  // The trainers print 4 decimals.
  EXPECT_NEAR(eval->metric, reported, 0.00051) << "the file is not what the trainers evaluated";
}

}  // namespace
}  // namespace pl::dist_testing
