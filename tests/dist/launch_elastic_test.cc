// pl-launch end to end on a Fashion-MNIST subset with its elasticity timers: one
// trainer is SIGKILLed and another added while the job runs; the job still completes,
// pl-launch exits 0 and a trainer prints the final accuracy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "tests/dist/cluster.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DistLaunchTest, KillAndAddTrainerTimersAndTheJobStillCompletes) {
  const std::string train_src = FashionMnistFile("train.plrec");
  const std::string test_src = FashionMnistFile("test.plrec");
  if (train_src.empty() || test_src.empty()) {
    GTEST_SKIP() << "needs $PL_DATA_DIR/fashion-mnist/{train,test}.plrec (pl-convert idx ...)";
  }
  testing::TempDir dir("pl-dist-launch");
  ASSERT_FALSE(dir.path().empty());
  auto chunks = WriteSubset(train_src, dir.path() + "/train.plrec", 12000, 100);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  auto launch = testing::BinaryPath("pl-launch");
  ASSERT_TRUE(launch.ok()) << launch.status();
  auto trainer = testing::BinaryPath("pl-trainer");
  ASSERT_TRUE(trainer.ok()) << trainer.status();

  const std::string log = dir.path() + "/launch.log";
  auto child = testing::Spawn(
      {*launch, "--pservers", "2", "--trainers", "2", "--data", dir.path() + "/train.plrec", "--passes", "2",
       "--chunks_per_task", "2", "--lease_ms", "1500", "--workdir", dir.path() + "/work", "--progress_every_s", "1",
       "--kill_trainer_after_s", "1", "--add_trainer_after_s", "1.5", "--", *trainer, "--model", "mlp",
       "--threads", "1", "--test_data", test_src, "--test_limit", "2000"},
      log);
  ASSERT_TRUE(child.ok()) << child.status();
  auto exit = testing::WaitForExit(**child, seconds(150));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << testing::ReadFileOrEmpty(log);
  const std::string out = testing::ReadFileOrEmpty(log);
  EXPECT_TRUE(exit->success()) << exit->Describe() << "\n" << out;
  EXPECT_THAT(out, HasSubstr("--kill_trainer_after_s 1: SIGKILL trainer-"));
  EXPECT_THAT(out, HasSubstr("started trainer-2 (pid "));
  EXPECT_THAT(out, HasSubstr("(--add_trainer_after_s 1.5)"));
  // The killed trainer's task came back through its lease.
  EXPECT_THAT(out, HasSubstr("dropped: its lease expired"));
  // The added trainer joined the job (it registered with the master and trained).
  EXPECT_THAT(out, HasSubstr("[trainer-2] trainer-2: registered as trainer"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\[trainer-2\] trainer-2: job done after (\d+) tasks)"))) << out;
  EXPECT_GE(std::stoi(m[1]), 1) << out;
  EXPECT_THAT(out, HasSubstr("job done"));
  auto acc = LastNumberAfter(out, "final test accuracy: ");
  ASSERT_TRUE(acc.has_value()) << out;
  EXPECT_GE(*acc, 0.70) << out;
  EXPECT_THAT(out, Not(HasSubstr("job failed")));
}

}  // namespace
}  // namespace pl::dist_testing
