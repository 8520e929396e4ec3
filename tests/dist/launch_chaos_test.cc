// Chaos under pl-launch with replicated shards: a seeded schedule of SIGKILLs of
// trainers, of shards' current primaries and of the master, and added trainers, sent
// through the control FIFO while an async job trains. Each kill is made to count: a
// primary is killed only once its shard has a backup in sync again (so it is a
// failover, never a loss of both copies), the master only once it serves again, and a
// trainer only while another one trains. The job must finish with every chunk trained
// once per pass, no shard restored from a checkpoint, no trainer leaving on its own (the
// failure issue 11 was filed for) and the accuracy of a job that learned everything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/cluster.h"
#include "trainer/launcher/launch_options.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::regex& re) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// What a chaos job needs: `samples` of Fashion-MNIST's training set in DIR/train.plrec
// (100 a chunk), the test set, and the binaries. Skips the test without the data.
struct ChaosFiles {
  std::string test_src, launch, trainer;
};
void PrepareChaosJob(const std::string& dir, int samples, ChaosFiles* out) {
  const std::string train_src = FashionMnistFile("train.plrec");
  out->test_src = FashionMnistFile("test.plrec");
  if (train_src.empty() || out->test_src.empty()) {
    GTEST_SKIP() << "needs $PL_DATA_DIR/fashion-mnist/{train,test}.plrec (pl-convert idx ...)";
  }
  ASSERT_FALSE(dir.empty());
  ASSERT_TRUE(WriteSubset(train_src, dir + "/train.plrec", samples, 100).ok());
  auto launch = testing::BinaryPath("pl-launch");
  ASSERT_TRUE(launch.ok()) << launch.status();
  auto trainer = testing::BinaryPath("pl-trainer");
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  out->launch = *launch;
  out->trainer = *trainer;
}

TEST(DistChaosTest, KillsOfTrainersPrimariesAndTheMasterLoseNoChunkNoUpdateAndNoTrainer) {
  testing::TempDir dir("pl-dist-chaos");
  constexpr int kSamples = 12000, kPasses = 30;
  ChaosFiles files;
  PrepareChaosJob(dir.path(), kSamples, &files);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string test_src = files.test_src;
  const std::string* launch = &files.launch;
  const std::string* trainer = &files.trainer;

  const std::string log = dir.path() + "/launch.log";
  const std::string fifo = dir.path() + "/control";
  // No checkpoints: a shard that lost both copies could not hide it behind a restore.
  auto child = testing::Spawn(
      {*launch, "--pservers", "2", "--replicas", "2", "--trainers", "3", "--data", dir.path() + "/train.plrec",
       "--passes", std::to_string(kPasses), "--lease_ms", "1500", "--checkpoint_every_s", "0", "--workdir",
       dir.path() + "/work", "--progress_every_s", "1", "--control", fifo, "--", *trainer, "--model", "mlp",
       "--threads", "1", "--test_data", test_src, "--test_limit", "2000", "--log_every_s", "0"},
      log);
  ASSERT_TRUE(child.ok()) << child.status();
  auto output = [&] { return testing::ReadFileOrEmpty(log); };
  auto wait_for = [&](const std::regex& re, int at_least, const std::string& what) {
    ASSERT_TRUE(testing::WaitUntil([&] { return Count(output(), re) >= at_least; }, seconds(60)))
        << "waited for " << what << "\n" << output();
  };
  const std::regex in_sync[2] = {std::regex(R"(master: shard 0: replica \S+ \(\S+\) caught up .*now a backup in sync)"),
                                 std::regex(R"(master: shard 1: replica \S+ \(\S+\) caught up .*now a backup in sync)")};
  const std::regex master_serving(R"(master: serving on )");
  const std::regex trained(R"(INFO trainer-\d+: pass \d+ task \d+ )");
  wait_for(in_sync[0], 1, "shard 0's first backup");
  wait_for(in_sync[1], 1, "shard 1's first backup");

  std::mt19937 rng(20261126);
  int running_trainers = 3, trainer_kills = 0, primary_kills = 0, master_kills = 0, added = 0;
  int shard_kills[2] = {0, 0};
  for (int step = 0; step < 10; ++step) {
    std::string command;
    switch (rng() % 4) {
      case 0:
        command = running_trainers >= 2 ? "kill-trainer" : "add-trainer";
        break;
      case 1: {
        const int shard = static_cast<int>(rng() % 2);
        // Its last failover's replacement has caught up: the primary has a backup in sync;
        // and a master serves, which promotes that backup at once.
        wait_for(in_sync[shard], shard_kills[shard] + 1, absl::StrCat("a backup in sync for shard ", shard));
        wait_for(master_serving, master_kills + 1, "the master serving");
        command = absl::StrCat("kill-pserver ", shard);
        ++shard_kills[shard];
        ++primary_kills;
        break;
      }
      case 2:
        wait_for(master_serving, master_kills + 1, "the master serving");
        command = "kill-master";
        ++master_kills;
        break;
      default:
        command = "add-trainer";
        break;
    }
    if (command == "kill-trainer") {
      --running_trainers;
      ++trainer_kills;
    } else if (command == "add-trainer") {
      ++running_trainers;
      ++added;
    }
    // Between commands the job trains on (a trainer logs a task), so none lands on
    // the one before it still unsettled.
    const int tasks_before = Count(output(), trained);
    ASSERT_THAT(output(), Not(HasSubstr("launch: job done"))) << "the job ended before command " << step;
    std::cout << "chaos command " << step << ": " << command << std::endl;
    ASSERT_TRUE(SendControl(fifo, command).ok()) << output();
    wait_for(trained, tasks_before + 2, "training after '" + command + "'");
  }
  ASSERT_GE(trainer_kills + primary_kills + master_kills, 5) << "the seed's schedule kills too little";
  ASSERT_GE(primary_kills, 2);

  auto exit = testing::WaitForExit(**child, seconds(400));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << output();
  const std::string out = output();
  EXPECT_TRUE(exit->success()) << exit->Describe() << "\n" << out;
  // Every chunk trained once per pass, as the master counts it.
  EXPECT_THAT(out, HasSubstr(absl::StrCat("master: job done: ", kPasses, " passes, ", kPasses * kSamples / 100,
                                          " chunks trained, ", kPasses * kSamples, " samples")))
      << out;
  // Each killed primary was a failover, not a loss of the shard.
  EXPECT_EQ(Count(out, std::regex(R"(master: shard \d: its primary is gone .* promoted to primary)")), primary_kills)
      << out;
  EXPECT_THAT(out, Not(HasSubstr("no backup in sync is left")));
  EXPECT_THAT(out, Not(HasSubstr("is not initialised")));
  // Trainers end killed (by this test) or done, never on their own.
  EXPECT_EQ(Count(out, std::regex(R"(launch: trainer-\d+ exited \(signal 9\))")), trainer_kills) << out;
  EXPECT_EQ(Count(out, std::regex(R"(launch: trainer-\d+ exited \(status 0\))")), 3 + added - trainer_kills) << out;
  auto acc = LastNumberAfter(out, "final test accuracy: ");
  ASSERT_TRUE(acc.has_value()) << out;
  EXPECT_GE(*acc, 0.80) << out;
}

// Issue 40: faults that do not wait for the job to heal, as preemptions do not. A seeded
// schedule sends 12 faults 0.4-1.6 s apart, whatever state the job is in: SIGKILLs of
// trainers (each replaced 0.2 s later), of a shard's primary, of another of its copies
// (a backup, or one still joining), and of the master (twice within seconds, as the
// schedule falls). In sync mode and in async mode the job must finish, train every
// chunk once per pass, learn, and exit 0 — or 3 naming a shard that lost both copies
// (the schedule may kill a copy and then the other before the first is back; with no
// checkpoint that shard starts over, a loss the exit status must tell).
class FastChaosTest : public ::testing::TestWithParam<bool> {};

TEST_P(FastChaosTest, FaultsThatDoNotWaitForHealingStillFinishTheJobWithEveryChunkOncePerPass) {
  const bool sync = GetParam();
  testing::TempDir dir("pl-dist-fast-chaos");
  constexpr int kSamples = 12000, kPasses = 12;
  ChaosFiles files;
  PrepareChaosJob(dir.path(), kSamples, &files);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string test_src = files.test_src;
  const std::string* launch = &files.launch;
  const std::string* trainer = &files.trainer;
  const std::string log = dir.path() + "/launch.log";
  const std::string fifo = dir.path() + "/control";
  std::vector<std::string> args = {*launch, "--pservers", "2", "--replicas", "2", "--trainers", "3", "--data",
                                   dir.path() + "/train.plrec", "--passes", std::to_string(kPasses), "--lease_ms",
                                   "1500", "--checkpoint_every_s", "0", "--workdir", dir.path() + "/work",
                                   "--control", fifo, "--insecure"};
  if (sync) args.push_back("--sync");
  for (const std::string& a : std::vector<std::string>{"--", *trainer, "--model", "mlp", "--threads", "1",
                                                       "--test_data", test_src, "--test_limit", "2000",
                                                       "--log_every_s", "0"}) {
    args.push_back(a);
  }
  auto child = testing::Spawn(args, log);
  ASSERT_TRUE(child.ok()) << child.status();
  auto output = [&] { return testing::ReadFileOrEmpty(log); };
  const std::regex trained(R"(INFO trainer-\d+: pass \d+ task \d+ )");
  ASSERT_TRUE(testing::WaitUntil([&] { return Count(output(), trained) >= 3; }, seconds(60))) << output();

  std::mt19937 rng(sync ? 40 : 41);
  int running = 3, faults = 0;
  for (int step = 0; step < 12; ++step) {
    std::this_thread::sleep_for(milliseconds(400 + static_cast<int>(rng() % 1200)));
    if (output().find("launch: job done") != std::string::npos) break;
    std::string command;
    switch (rng() % 5) {
      case 0: command = running >= 2 ? "kill-trainer" : "add-trainer"; break;
      case 1: command = absl::StrCat("kill-pserver ", rng() % 2); break;
      case 2: command = absl::StrCat("kill-pserver ", rng() % 2, " backup"); break;
      case 3: command = "kill-master"; break;
      default: command = absl::StrCat("kill-pserver ", rng() % 2); break;
    }
    std::cout << "fast chaos " << step << ": " << command << std::endl;
    ASSERT_TRUE(SendControl(fifo, command).ok()) << output();
    ++faults;
    if (command == "kill-trainer") {
      std::this_thread::sleep_for(milliseconds(200));
      ASSERT_TRUE(SendControl(fifo, "add-trainer").ok()) << output();
    }
  }
  ASSERT_GE(faults, 6) << "the job ended before the schedule made its faults\n" << output();

  auto exit = testing::WaitForExit(**child, seconds(300));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << output();
  const std::string out = output();
  EXPECT_THAT(out, HasSubstr(absl::StrCat("master: job done: ", kPasses, " passes, ", kPasses * kSamples / 100,
                                          " chunks trained, ", kPasses * kSamples, " samples")))
      << out;
  // Losses are allowed only where the schedule took both copies of a shard, and then
  // the exit status says so.
  const int both_lost = Count(out, std::regex(R"(master: loss: shard \d lost every replica)"));
  if (both_lost == 0) {
    EXPECT_TRUE(exit->success()) << exit->Describe() << "\n" << out;
  } else {
    EXPECT_EQ(exit->code, kLaunchLossExitCode) << exit->Describe() << "\n" << out;
  }
  EXPECT_EQ(Count(out, std::regex(R"(master: loss: )")), both_lost) << out;
  auto acc = LastNumberAfter(out, "final test accuracy: ");
  ASSERT_TRUE(acc.has_value()) << out;
  std::cout << "[measured] " << (sync ? "sync" : "async") << " job under " << faults
            << " faults not waiting for healing: final test accuracy " << *acc << ", shards that lost both copies "
            << both_lost << std::endl;
  EXPECT_GE(*acc, 0.78) << out;
}

INSTANTIATE_TEST_SUITE_P(Modes, FastChaosTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Sync") : std::string("Async");
                         });

}  // namespace
}  // namespace pl::dist_testing
