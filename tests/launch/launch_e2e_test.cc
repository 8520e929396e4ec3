// pl-launch end to end with the real pl-master, pl-pserver and pl-trainer. Each test
// SKIPs, naming what is missing, while those binaries are not in PL_BIN_DIR.
#include <fstream>
#include <filesystem>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

class LaunchE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The supervision tests use `sleep` as the trainer; only the training test needs pl-trainer.
    for (const char* name : {"pl-launch", "pl-master", "pl-pserver", "pl-gen-clicks"}) {
      auto path = testing::BinaryPath(name);
      if (!path.ok()) GTEST_SKIP() << "needs the real binaries: " << path.status().message();
      bin_[name] = *path;
    }
    ASSERT_FALSE(dir_.path().empty());
  }

  // A click dataset of `records` training records in chunks of `per_chunk`, under data/.
  void MakeData(int records, int per_chunk) {
    auto gen = testing::Spawn({bin_["pl-gen-clicks"], "--out", dir_.path() + "/data", "--train",
                               std::to_string(records), "--test", "200", "--records_per_chunk",
                               std::to_string(per_chunk)},
                              dir_.path() + "/gen.log");
    ASSERT_TRUE(gen.ok()) << gen.status();
    auto exit = testing::WaitForExit(**gen, seconds(60));
    ASSERT_TRUE(exit.ok() && exit->success()) << testing::ReadFileOrEmpty(dir_.path() + "/gen.log");
  }

  // Starts pl-launch with `flags` and `trainer` after "--"; its output goes to log().
  void Launch(std::vector<std::string> flags, const std::vector<std::string>& trainer) {
    std::vector<std::string> argv = {bin_["pl-launch"], "--workdir", dir_.path() + "/work", "--data",
                                     dir_.path() + "/data/train.plrec", "--progress_every_s", "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), trainer.begin(), trainer.end());
    auto child = testing::Spawn(argv, log());
    ASSERT_TRUE(child.ok()) << child.status();
    launch_ = std::move(*child);
  }

  std::string log() const { return dir_.path() + "/launch.log"; }
  std::string Output() const { return testing::ReadFileOrEmpty(log()); }

  bool WaitForOutput(const std::string& needle, milliseconds timeout) {
    return testing::WaitUntil([&] { return Output().find(needle) != std::string::npos; }, timeout);
  }

  // Every pid pl-launch reported starting ("started X (pid N)", "restarted (pid N").
  std::vector<pid_t> ChildPids() const {
    std::vector<pid_t> pids;
    const std::string text = Output();
    static const std::regex re(R"(\(pid (\d+))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      pids.push_back(std::stoi((*it)[1]));
    }
    return pids;
  }

  void ExpectAllDead(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      EXPECT_TRUE(testing::WaitUntil([&] { return !testing::PidAlive(pid); }, seconds(5)))
          << "pid " << pid << " outlived pl-launch\n" << Output();
      testing::KillPid(pid, SIGKILL).IgnoreError();  // never leave one behind
    }
  }

  std::map<std::string, std::string> bin_;
  testing::TempDir dir_{"pl-launch-test"};
  std::unique_ptr<ChildProcess> launch_;
};

TEST_F(LaunchE2ETest, SigintStopsEveryProcessAndExits130) {
  ASSERT_NO_FATAL_FAILURE(MakeData(2000, 100));
  Launch({"--pservers", "2", "--trainers", "2"}, {"/bin/sleep", "60"});
  ASSERT_TRUE(WaitForOutput("started trainer-1", seconds(30))) << Output();
  std::vector<pid_t> pids = ChildPids();
  ASSERT_EQ(pids.size(), 5u) << Output();
  ASSERT_TRUE(testing::KillPid(launch_->pid(), SIGINT).ok());
  auto exit = testing::WaitForExit(*launch_, seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
  EXPECT_EQ(exit->code, 130);
  EXPECT_THAT(Output(), HasSubstr("interrupted by SIGINT"));
  ExpectAllDead(pids);
}

TEST_F(LaunchE2ETest, SigkilledLauncherLeavesNoOrphans) {
  ASSERT_NO_FATAL_FAILURE(MakeData(2000, 100));
  Launch({"--pservers", "1", "--trainers", "2"}, {"/bin/sleep", "60"});
  ASSERT_TRUE(WaitForOutput("started trainer-1", seconds(30))) << Output();
  std::vector<pid_t> pids = ChildPids();
  ASSERT_EQ(pids.size(), 4u) << Output();
  ASSERT_TRUE(testing::KillPid(launch_->pid(), SIGKILL).ok());
  ExpectAllDead(pids);
}

TEST_F(LaunchE2ETest, KilledPserverIsRestartedAtItsIndex) {
  ASSERT_NO_FATAL_FAILURE(MakeData(2000, 100));
  const std::string fifo = dir_.path() + "/control";
  Launch({"--pservers", "2", "--trainers", "1", "--control", fifo}, {"/bin/sleep", "60"});
  ASSERT_TRUE(WaitForOutput("started trainer-0", seconds(30))) << Output();
  int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << fifo;
  const std::string line = "kill-pserver 1\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  ::close(fd);
  ASSERT_TRUE(WaitForOutput("pserver-1 restarted", seconds(30))) << Output();
  EXPECT_THAT(Output(), HasSubstr("INFO launch: pserver-1 exited (signal 9); restarting at index 1"));
  std::vector<pid_t> pids = ChildPids();
  ASSERT_TRUE(testing::KillPid(launch_->pid(), SIGTERM).ok());
  auto exit = testing::WaitForExit(*launch_, seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 143);
  ExpectAllDead(pids);
}

// The control FIFO's `scale N` sets the job's trainer target on its master, and the
// launcher follows it: --trainers 0 starts none, `scale 2` starts two, `scale 1` asks
// the newest to leave after its task (SIGUSR1) and, as this trainer ignores that, stops
// it with SIGTERM after --leave_grace_ms (never SIGKILL).
TEST_F(LaunchE2ETest, ScaleOnTheControlFifoSetsATargetTheLauncherFollows) {
  ASSERT_NO_FATAL_FAILURE(MakeData(2000, 100));
  const std::string fifo = dir_.path() + "/control";
  Launch({"--pservers", "1", "--trainers", "0", "--control", fifo, "--leave_grace_ms", "300"},
         {"/bin/sh", "-c", "trap '' USR1; echo ignoring SIGUSR1; exec sleep 60"});
  ASSERT_TRUE(WaitForOutput("waiting for a trainer target", seconds(30))) << Output();
  auto send = [&](const std::string& line) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    ASSERT_GE(fd, 0) << fifo;
    ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    ::close(fd);
  };
  send("scale two\n");
  ASSERT_TRUE(WaitForOutput("'two' is not a trainer count", seconds(10))) << Output();
  send("scale 2\n");
  ASSERT_TRUE(WaitForOutput("started trainer-1", seconds(30))) << Output();
  // The master's line: it may come after the launcher's (a CI run under load read the
  // output between the two).
  EXPECT_TRUE(WaitForOutput("trainer target unset -> 2 (pl-launch control)", seconds(30))) << Output();
  // Not before the shell ignores SIGUSR1: a signal that came first would end it (its
  // default action), which once happened under load 1 ms after the start.
  ASSERT_TRUE(WaitForOutput("[trainer-1] ignoring SIGUSR1", seconds(30))) << Output();
  send("scale 1\n");
  ASSERT_TRUE(WaitForOutput("SIGUSR1 trainer-1", seconds(30))) << Output();
  ASSERT_TRUE(WaitForOutput("its task did not end within --leave_grace_ms 300", seconds(30))) << Output();
  ASSERT_TRUE(WaitForOutput("trainer-1 exited", seconds(30))) << Output();
  EXPECT_THAT(Output(), HasSubstr("SIGTERM trainer-1"));
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("SIGUSR1 trainer-0")));
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("SIGTERM trainer-0")));
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("SIGKILL")));
  std::vector<pid_t> pids = ChildPids();
  ASSERT_TRUE(testing::KillPid(launch_->pid(), SIGTERM).ok());
  auto exit = testing::WaitForExit(*launch_, seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 143);
  ExpectAllDead(pids);
}

// Issue 38: a shrink trains nothing twice. `scale 1` in the middle of a real job sends
// the newest pl-trainer SIGUSR1; it finishes the task in hand, reports it and leaves
// (the grace is long so that no SIGTERM can follow, however loaded the machine); the
// job ends with no task returned and so no sample trained twice.
TEST_F(LaunchE2ETest, AShrinkLetsTheTrainerFinishItsTaskAndTrainsNothingTwice) {
  if (!testing::BinaryPath("pl-trainer").ok()) GTEST_SKIP() << testing::BinaryPath("pl-trainer").status();
  // 10 passes of 15,000 records: several seconds, so the shrink comes mid-job.
  ASSERT_NO_FATAL_FAILURE(MakeData(15000, 250));
  const std::string fifo = dir_.path() + "/control";
  Launch({"--pservers", "1", "--trainers", "0", "--control", fifo, "--passes", "10", "--leave_grace_ms", "60000"},
         {"pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32"});
  ASSERT_TRUE(WaitForOutput("waiting for a trainer target", seconds(30))) << Output();
  int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << fifo;
  ASSERT_EQ(::write(fd, "scale 2\n", 8), 8);
  // trainer-1 trains from its connection on (a task of 250 records is 8 steps; a task
  // is in hand nearly all the time); the job is still far from done.
  ASSERT_TRUE(WaitForOutput("trainer-1: connected to", seconds(60))) << Output();
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_EQ(Output().find("reports the job done"), std::string::npos) << "the job ended too soon:\n" << Output();
  ASSERT_EQ(::write(fd, "scale 1\n", 8), 8);
  ::close(fd);
  ASSERT_TRUE(WaitForOutput("SIGUSR1 trainer-1", seconds(30))) << Output();
  ASSERT_TRUE(WaitForOutput("trainer-1 exited", seconds(60))) << Output();
  auto exit = testing::WaitForExit(*launch_, seconds(180));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
  EXPECT_EQ(exit->code, 0) << Output();
  const std::string out = Output();
  EXPECT_THAT(out, HasSubstr("leaving as asked"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("SIGTERM trainer-1")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("samples trained twice")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("returned task")));
  EXPECT_THAT(out, HasSubstr("INFO launch: job done"));
  ExpectAllDead(ChildPids());
}

TEST_F(LaunchE2ETest, TrainsToCompletionWithAKilledAndAnAddedTrainer) {
  if (!testing::BinaryPath("pl-trainer").ok()) GTEST_SKIP() << testing::BinaryPath("pl-trainer").status();
  // Large enough (60000 samples over 2 passes, several seconds) that the kill at 0.5 s
  // and the addition at 1 s happen while the job runs.
  ASSERT_NO_FATAL_FAILURE(MakeData(30000, 250));
  Launch({"--pservers", "2", "--trainers", "2", "--passes", "2", "--chunks_per_task", "2", "--lease_ms", "1000",
          "--kill_trainer_after_s", "0.5", "--add_trainer_after_s", "1"},
         {"pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32"});
  auto exit = testing::WaitForExit(*launch_, seconds(120));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
  EXPECT_EQ(exit->code, 0) << Output();
  const std::string out = Output();
  EXPECT_THAT(out, HasSubstr("--kill_trainer_after_s 0.5: SIGKILL trainer-"));
  EXPECT_THAT(out, HasSubstr("started trainer-2 (pid"));
  EXPECT_THAT(out, HasSubstr("is not restarted (elastic: the job goes on)"));
  EXPECT_THAT(out, HasSubstr("INFO launch: job done"));
  EXPECT_THAT(out, HasSubstr("failed 0"));
  ExpectAllDead(ChildPids());
}

// Issue 40: a job that sets a task aside as failed tells it in its exit status (3, a
// one-line cause naming the task), unless --allow_losses accepts the loss. The data
// has 16 bytes damaged across two chunks, so their tasks fail in every pass they are
// tried.
TEST_F(LaunchE2ETest, AJobThatLostATaskExitsThreeUnlessLossesAreAllowed) {
  if (!testing::BinaryPath("pl-trainer").ok()) GTEST_SKIP() << testing::BinaryPath("pl-trainer").status();
  ASSERT_NO_FATAL_FAILURE(MakeData(800, 100));
  {
    // The middle of the file, where the fourth chunk ends and the fifth begins: records
    // of both then fail their checksums.
    const std::string path = dir_.path() + "/data/train.plrec";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    f.seekp(size / 2);
    const char junk[16] = {'\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a',
                           '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a'};
    f.write(junk, sizeof(junk));
  }
  for (const bool allow : {false, true}) {
    std::vector<std::string> flags = {"--pservers", "1", "--trainers", "1", "--passes", "2", "--lease_ms", "1000"};
    if (allow) flags.push_back("--allow_losses");
    std::filesystem::remove_all(dir_.path() + "/work");
    std::filesystem::remove(log());
    Launch(flags, {"pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32"});
    auto exit = testing::WaitForExit(*launch_, seconds(120));
    ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
    const std::string out = Output();
    if (allow) {
      EXPECT_EQ(exit->code, 0) << out;
      EXPECT_THAT(out, HasSubstr("the job lost work, allowed by --allow_losses: 2 task(s) set aside"));
      EXPECT_THAT(out, ::testing::Not(HasSubstr("finished with losses")));
    } else {
      EXPECT_EQ(exit->code, 3) << out;
      EXPECT_THAT(out, HasSubstr("the job finished with losses: 2 task(s) set aside as failed in some pass (ids "));
    }
    ExpectAllDead(ChildPids());
  }
}

// Issue 40: a pserver killed before its first checkpoint comes back with nothing to
// restore and starts its shard over from the seed; the job still finishes (the trainers
// initialise the shard again), and its exit status says what was lost.
TEST_F(LaunchE2ETest, AShardRestartedFromItsSeedIsALossInTheExitStatus) {
  if (!testing::BinaryPath("pl-trainer").ok()) GTEST_SKIP() << testing::BinaryPath("pl-trainer").status();
  ASSERT_NO_FATAL_FAILURE(MakeData(30000, 250));
  const std::string fifo = dir_.path() + "/control";
  Launch({"--pservers", "1", "--trainers", "1", "--passes", "2", "--checkpoint_every_s", "0", "--control", fifo},
         {"pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32", "--log_every_s", "0.2"});
  // Training is under way (a step logged) before the pserver is killed.
  ASSERT_TRUE(WaitForOutput("samples/s", seconds(60))) << Output();
  int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << fifo;
  const std::string line = "kill-pserver 0\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  ::close(fd);
  auto exit = testing::WaitForExit(*launch_, seconds(180));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
  const std::string out = Output();
  ASSERT_THAT(out, HasSubstr("pserver-0 restarted")) << out;
  EXPECT_EQ(exit->code, 3) << out;
  EXPECT_THAT(out, HasSubstr("the job finished with losses: pserver 0 restarted without its state"));
  EXPECT_THAT(out, HasSubstr("INFO master: loss: pserver 0 restarted without its state"));
  ExpectAllDead(ChildPids());
}

// docs/consistent-training.md: a job of virtual trainers ends with the same parameter
// bits whether one trainer trains it alone, or three come and go: one SIGKILLed mid-job
// (its tasks wait out its lease), one stopped with SIGTERM (it hands its tasks on), one
// joining. Every sample is trained once per pass, none twice.
TEST_F(LaunchE2ETest, VirtualTrainersGiveTheSameParametersWhoeverComesAndGoes) {
  if (!testing::BinaryPath("pl-trainer").ok()) GTEST_SKIP() << testing::BinaryPath("pl-trainer").status();
  ASSERT_NO_FATAL_FAILURE(MakeData(6000, 250));  // 24 chunks: 6 tasks of 4
  const std::vector<std::string> job = {"--pservers", "2", "--passes", "12", "--virtual_trainers", "6",
                                        "--lease_ms", "1000"};
  auto trainer = [&](const std::string& save) {
    return std::vector<std::string>{"pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32",
                                    "--optimizer", "adagrad", "--lr", "0.05", "--log_every_s", "0.1", "--save", save};
  };
  auto read = [](const std::string& path) { return testing::ReadFileOrEmpty(path); };
  const std::string alone = dir_.path() + "/alone.safetensors", churned = dir_.path() + "/churned.safetensors";
  {
    std::vector<std::string> flags = job;
    flags.insert(flags.end(), {"--trainers", "1"});
    Launch(flags, trainer(alone));
    auto exit = testing::WaitForExit(*launch_, seconds(180));
    ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
    ASSERT_EQ(exit->code, 0) << Output();
    ExpectAllDead(ChildPids());
  }
  const std::string samples_line = "job done: 12 passes, 288 chunks trained, 72000 samples";
  ASSERT_THAT(Output(), HasSubstr(samples_line));
  std::filesystem::remove_all(dir_.path() + "/work");
  std::filesystem::remove(log());

  const std::string fifo = dir_.path() + "/control";
  std::vector<std::string> flags = job;
  flags.insert(flags.end(), {"--trainers", "2", "--control", fifo});
  Launch(flags, trainer(churned));
  auto send = [&](const std::string& line) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    ASSERT_GE(fd, 0) << fifo;
    ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    ::close(fd);
  };
  // Both trainers are taking steps (each logs them) before trainer-1 is killed.
  ASSERT_TRUE(WaitForOutput("trainer-1: step ", seconds(60))) << Output();
  ASSERT_TRUE(WaitForOutput("trainer-0: step ", seconds(60))) << Output();
  ASSERT_EQ(Output().find("reports the job done"), std::string::npos) << "the job ended too soon:\n" << Output();
  ASSERT_NO_FATAL_FAILURE(send("kill-trainer 1\n"));
  ASSERT_TRUE(WaitForOutput("SIGKILL trainer-1", seconds(10))) << Output();
  ASSERT_NO_FATAL_FAILURE(send("add-trainer\n"));
  ASSERT_TRUE(WaitForOutput("trainer-2: step ", seconds(60))) << Output();
  ASSERT_EQ(Output().find("reports the job done"), std::string::npos) << "the job ended too soon:\n" << Output();
  ASSERT_NO_FATAL_FAILURE(send("stop-trainer 0\n"));
  auto exit = testing::WaitForExit(*launch_, seconds(180));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
  const std::string out = Output();
  EXPECT_EQ(exit->code, 0) << out;
  EXPECT_THAT(out, HasSubstr("trainer-0: stop requested: handed task(s) "));
  EXPECT_THAT(out, HasSubstr(samples_line));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("trained again with it")));
  ExpectAllDead(ChildPids());
  const std::string a = read(alone), b = read(churned);
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "the parameters differ (" << a.size() << " and " << b.size() << " bytes)\n" << out;
}

}  // namespace
}  // namespace pl
