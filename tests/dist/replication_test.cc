// Replicated shards with real processes (pl-launch --replicas 2, pl-master,
// pl-pserver, pl-trainer on 127.0.0.1): a primary SIGKILLed at any moment costs no
// acknowledged update, and nothing is applied twice.
//
//  - sync, one trainer: a job whose primaries are killed (one before any checkpoint,
//    one after) ends with the parameters of the fault-free job, bit for bit;
//  - async, two trainers: a primary dies between the backups' acknowledgement and its
//    answer to the trainer (a test hook), then its replacement's primary is killed
//    too: every shard applied exactly as many pushes as the trainers sent;
//  - the master stopped for three pserver leases: no replica is dropped for it;
//  - both replicas of a shard lost: the copy with the newest checkpoint (each copy
//    writes its own) restores it, whichever came back first; the log says how many
//    versions were lost, and the job finishes.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/process.h"
#include "trainer/models.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;

constexpr int kSamples = 4000, kPerChunk = 250;

// The first of `n` consecutive ports on 127.0.0.1 that could all be bound just now
// (0 if none found): a base for pl-launch --metrics_port.
int FreePortRun(int n) {
  std::mt19937 pick(std::random_device{}());
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int base = std::uniform_int_distribution<int>(20000, 60000)(pick);
    bool free = true;
    for (int p = base; p < base + n && free; ++p) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(p));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      if (fd >= 0) ::close(fd);
    }
    if (free) return base;
  }
  return 0;
}

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"pl-launch", "pl-master", "pl-pserver", "pl-trainer"}) {
      auto path = testing::BinaryPath(name);
      if (!path.ok()) GTEST_SKIP() << "needs the real binaries: " << path.status().message();
      bin_[name] = *path;
    }
    const std::string train = FashionMnistFile("train.plrec");
    test_ = FashionMnistFile("test.plrec");
    if (train.empty() || test_.empty()) GTEST_SKIP() << "needs $PL_DATA_DIR/fashion-mnist (make data)";
    auto chunks = WriteSubset(train, dir_.path() + "/train.plrec", kSamples, kPerChunk);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
  }

  void TearDown() override {
    if (launch_ && launch_->running()) launch_->Stop(std::chrono::seconds(5));
  }

  // pl-launch of a job with 2 pservers of 2 replicas each, `name` naming its workdir,
  // control FIFO and log.
  void Launch(const std::string& name, std::vector<std::string> flags, std::vector<std::string> trainer_flags,
              const testing::EnvVars& env = {}) {
    name_ = name;
    std::vector<std::string> argv = {bin_["pl-launch"], "--workdir", Path("work"), "--data", dir_.path() + "/train.plrec",
                                     "--pservers", "2", "--replicas", "2", "--control", Path("control"),
                                     "--progress_every_s", "1", "--lease_ms", "2000"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", bin_["pl-trainer"], "--model", "mlp", "--threads", "1", "--lr", "0.001",
                             "--test_data", test_, "--test_limit", "500", "--log_every_s", "0.2"});
    argv.insert(argv.end(), trainer_flags.begin(), trainer_flags.end());
    if (!env.empty()) {
      ASSERT_NO_FATAL_FAILURE(argv[0] = FaultyLauncher());
    }
    auto child = testing::Spawn(argv, Path("launch.log"), env);
    ASSERT_TRUE(child.ok()) << child.status();
    launch_ = std::move(*child);
  }

  // A job whose pservers take faults (PL_TEST_* variables): pl-launch starts the
  // pl-pserver of its own directory, so a copy of it goes into one where pl-pserver is
  // the test's build with faults (tests/pserver/faulty_pserver_main.cc).
  std::string FaultyLauncher() {
    namespace fs = std::filesystem;
    auto faulty = testing::BinaryPath("pl-pserver-faulty");
    EXPECT_TRUE(faulty.ok()) << faulty.status();
    const fs::path dir = dir_.path() + "/faulty-bin";
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::copy_file(bin_["pl-launch"], dir / "pl-launch", fs::copy_options::overwrite_existing, ec);
    EXPECT_FALSE(ec) << "copying pl-launch: " << ec.message();
    for (auto [name, target] : {std::pair<const char*, std::string>{"pl-master", bin_["pl-master"]},
                                {"pl-pserver", faulty.value_or("")}}) {
      fs::remove(dir / name, ec);
      fs::create_symlink(target, dir / name, ec);
      EXPECT_FALSE(ec) << "linking " << name << ": " << ec.message();
    }
    return (dir / "pl-launch").string();
  }

  std::string Path(const std::string& what) const { return absl::StrCat(dir_.path(), "/", name_, ".", what); }
  std::string Output() const { return testing::ReadFileOrEmpty(Path("launch.log")); }
  bool WaitForOutput(const std::string& needle, std::chrono::milliseconds timeout, int count = 1) const {
    return testing::WaitUntil([&] { return CountOf(Output(), needle) >= count; }, timeout);
  }

  void Control(const std::string& command) {
    const Status sent = SendControl(Path("control"), command);
    ASSERT_TRUE(sent.ok()) << sent << "\n" << Output();
  }

  // Waits for pl-launch to end; it must report the job done with every trainer at 0.
  void ExpectJobDone() {
    auto exit = testing::WaitForExit(*launch_, std::chrono::seconds(240));
    ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Output();
    EXPECT_TRUE(exit->success()) << exit->Describe() << "\n" << Output();
    EXPECT_THAT(Output(), HasSubstr("tasks todo 0 pending 0 done 16 failed 0")) << Output();
  }

  // The version each shard's last checkpoint line reports (its final checkpoint).
  std::map<int, int64_t> FinalVersions() const {
    std::map<int, int64_t> out;
    static const std::regex re(R"(\[pserver-(\d+)\.\d\] .* written \(version (\d+))");
    const std::string text = Output();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      out[std::stoi((*it)[1])] = std::stoll((*it)[2]);
    }
    return out;
  }

  // Snapshots of a trained shard (not the empty ones of the job's start) that a joiner
  // installed `how`: "through shared memory" (the stream's region, to a joiner on the
  // primary's host), "over sockets" (paddle_like/dist/snapshot_lanes.h, one or more) or
  // "in pieces".
  int TrainedSnapshots(const std::string& how) const {
    static const std::regex re(
        R"(installed the primary's snapshot \(([\d.]+) MB (through shared memory|over (?:a socket|\d+ sockets)|in pieces))");
    const std::string text = Output();
    int n = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      const std::string way = (*it)[2];
      const std::string kind = way.rfind("over ", 0) == 0 ? "over sockets" : way;
      n += std::stod((*it)[1]) > 0.1 && kind == how;
    }
    return n;
  }

  // Pushes the trainers sent, from their closing traffic lines (each went to every shard).
  int64_t PushesSent() const {
    int64_t total = 0;
    static const std::regex re(R"(traffic: \d+ pulls, (\d+) pushes)");
    const std::string text = Output();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      total += std::stoll((*it)[1]);
    }
    return total;
  }

  std::map<std::string, std::string> bin_;
  std::string test_;
  std::string name_;
  testing::TempDir dir_;
  std::unique_ptr<ChildProcess> launch_;
};

// One trainer in sync mode trains deterministically. Killing the primary of shard 0
// before any checkpoint exists, and the primary of shard 1 once one does, must change
// nothing: the backups had every acknowledged step, and retried pushes count once.
// Checkpoints are written only when the test asks (checkpoint-pserver), so "before any
// checkpoint" holds however slowly the machine runs.
TEST_F(ReplicationTest, SyncJobWithKilledPrimariesEndsWithTheFaultFreeParameters) {
  const std::vector<std::string> job = {"--sync", "--trainers", "1", "--passes", "6", "--checkpoint_every_s", "0"};
  Launch("clean", job, {"--save", dir_.path() + "/clean.safetensors"});
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());

  Launch("faulty", job, {"--save", dir_.path() + "/faulty.safetensors"});
  // Both shards replicated (each backup caught up) and training under way.
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  ASSERT_TRUE(WaitForOutput("pass 1 task", std::chrono::seconds(60))) << Output();
  ASSERT_EQ(CountOf(Output(), "written (version"), 0) << "a checkpoint existed before the first kill";
  ASSERT_NO_FATAL_FAILURE(Control("kill-pserver 0"));
  ASSERT_TRUE(WaitForOutput("promoted to primary", std::chrono::seconds(30))) << Output();
  // pl-launch reaped it and told the master, which promoted the backup without waiting
  // out the lease.
  EXPECT_THAT(Output(), HasSubstr("told the master that pserver-0.")) << Output();
  EXPECT_THAT(Output(), HasSubstr("shard 0: its primary is gone (pl-launch: pserver-0.")) << Output();
  // Shard 1 once a checkpoint of it exists and the replacement of shard 0 caught up.
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 3)) << Output();
  ASSERT_NO_FATAL_FAILURE(Control("checkpoint-pserver 1"));
  ASSERT_TRUE(testing::WaitUntil([&] { return FinalVersions().count(1) > 0; }, std::chrono::seconds(60))) << Output();
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "the job ended before the second kill";
  ASSERT_NO_FATAL_FAILURE(Control("kill-pserver 1"));
  ASSERT_TRUE(WaitForOutput("promoted to primary", std::chrono::seconds(30), 2)) << Output();
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  // The copies leave the finished job quietly: no failover is logged at its end.
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("no backup in sync is left"))) << Output();
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("(it is shutting down)"))) << Output();
  // The replacement of shard 0, on the primary's host, copied it through the shared
  // memory of the primary's stream to it.
  EXPECT_GE(TrainedSnapshots("through shared memory"), 1) << Output();

  auto clean = MakeExampleModel("mlp", ModelOptions{});
  auto faulty = MakeExampleModel("mlp", ModelOptions{});
  ASSERT_TRUE(clean.ok() && faulty.ok());
  ASSERT_TRUE(LoadModule(dir_.path() + "/clean.safetensors", (*clean)->module()).ok());
  ASSERT_TRUE(LoadModule(dir_.path() + "/faulty.safetensors", (*faulty)->module()).ok());
  auto a = (*clean)->module().NamedParameters(), b = (*faulty)->module().NamedParameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].param->var.value();
    const Tensor& y = b[i].param->var.value();
    ASSERT_EQ(x.numel(), y.numel());
    double worst = 0;
    for (int64_t k = 0; k < x.numel(); ++k) worst = std::max(worst, std::abs(double(x.f32()[k]) - y.f32()[k]));
    EXPECT_LE(worst, 1e-6) << a[i].name << " differs from the fault-free run";
  }
}

// Async: a primary dies after its backup acknowledged a push but before it answered
// the trainer (which then retries it on the new primary), and later the new primary is
// killed too. Each shard's final version (pushes applied) equals the pushes sent.
TEST_F(ReplicationTest, AsyncPushesAreAppliedExactlyOnceAcrossTwoFailovers) {
  const std::string died = dir_.path() + "/died";
  Launch("async", {"--trainers", "2", "--passes", "6", "--checkpoint_every_s", "0"}, {},
         {{"PL_TEST_DIE_AFTER_ACKED_UPDATES", "40"}, {"PL_TEST_DIE_ONCE_FILE", died},
          // Snapshots in 64 KB pieces, several in flight: they arrive out of order.
          {"PL_TEST_SNAPSHOT_PIECE_BYTES", "65536"}});
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  ASSERT_TRUE(WaitForOutput("test hook: dying after acknowledged update", std::chrono::seconds(90))) << Output();
  std::smatch m;
  const std::string text = Output();
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(\[pserver-(\d)\.\d\] .*test hook: dying)")));
  const std::string shard = m[1];
  ASSERT_TRUE(WaitForOutput("promoted to primary", std::chrono::seconds(30))) << Output();
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 3)) << Output();
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "the job ended before the second kill";
  ASSERT_NO_FATAL_FAILURE(Control("kill-pserver " + shard));
  ASSERT_TRUE(WaitForOutput("promoted to primary", std::chrono::seconds(30), 2)) << Output();
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  EXPECT_GE(TrainedSnapshots("in pieces"), 1) << Output();
  EXPECT_EQ(TrainedSnapshots("over sockets"), 0) << Output();
  EXPECT_EQ(TrainedSnapshots("through shared memory"), 0) << Output();

  const int64_t sent = PushesSent();
  ASSERT_GT(sent, 0) << Output();
  const std::map<int, int64_t> versions = FinalVersions();
  ASSERT_EQ(versions.size(), 2u) << Output();
  for (const auto& [index, version] : versions) {
    EXPECT_EQ(version, sent) << "shard " << index << " applied " << version << " pushes of " << sent << " sent";
  }
  EXPECT_GE(LastNumberAfter(Output(), "final test accuracy: ").value_or(0), 0.70);
}

// A replacement slower than the trainers (a test hook makes it take 25 ms over every
// update it receives) still catches up while they train: once its snapshot is in,
// updates wait for it too, so it cannot fall further behind. (A joiner used to count as
// caught up only when level with the primary at a heartbeat, which one slower than the
// trainers never was, while its stream queued every update for it without bound: a
// 206 MB shard's primary ran out of memory that way.)
TEST_F(ReplicationTest, AReplacementSlowerThanTheTrainersStillCatchesUp) {
  Launch("slow", {"--trainers", "1", "--passes", "12", "--checkpoint_every_s", "0"}, {},
         {{"PL_TEST_SLOW_JOINER_MS", "25"}});
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  ASSERT_TRUE(WaitForOutput("pass 1 task", std::chrono::seconds(60))) << Output();
  ASSERT_NO_FATAL_FAILURE(Control("kill-pserver 0"));
  ASSERT_TRUE(WaitForOutput("promoted to primary", std::chrono::seconds(30))) << Output();
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(90), 3)) << Output();
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "it caught up only because the job had ended";
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
}

// A joiner is in the master's map a moment before its startup has its (empty) shard
// ready; the primary may call it in between. A test hook stretches that moment to 0.5 s,
// five of the primary's heartbeats, so its first call always comes first: the joiner
// holds the call until it is ready instead of refusing it, which ended the stream and
// dropped the joiner (seen once under load, after a SIGTERMed primary's handover).
// The trainer is stopped while the replacement joins, so the job cannot end first
// however fast it trains (an idle machine trains its 16,000 samples in under a second),
// and a new one finishes it.
TEST_F(ReplicationTest, AJoinerCalledBeforeItsShardIsReadyStillJoins) {
  Launch("slowstart", {"--trainers", "1", "--passes", "12", "--checkpoint_every_s", "0"}, {},
         {{"PL_TEST_ATTACH_DELAY_MS", "500"}});
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  // Its first progress line (pass 1's, or pass 2's when pass 1 took under 0.2 s).
  ASSERT_TRUE(WaitForOutput("trainer-0: pass ", std::chrono::seconds(60))) << Output();
  ASSERT_NO_FATAL_FAILURE(Control("stop-trainer"));
  ASSERT_TRUE(WaitForOutput("no trainer is running and the job is not done", std::chrono::seconds(60))) << Output();
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "the job ended before the pserver was killed";
  ASSERT_NO_FATAL_FAILURE(Control("kill-pserver 0"));
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 3)) << Output();
  ASSERT_NO_FATAL_FAILURE(Control("add-trainer"));
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("failed to follow the stream")));
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("replica starting")));
}

// The master stopped (SIGSTOP) for 2.5 s, three pserver leases: nobody could renew a
// lease meanwhile, so when it runs again it must not drop every replica (which would
// leave each shard with no backup and lose it to its checkpoint). It gives every lease a
// full term instead, the primaries renew theirs, and no push is lost or applied twice.
TEST_F(ReplicationTest, AMasterThatStoppedRunningDropsNoReplica) {
  Launch("pause", {"--trainers", "1", "--passes", "10", "--checkpoint_every_s", "0"}, {});
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  std::smatch m;
  std::string text = Output();
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(started master \(pid (\d+))"))) << text;
  const pid_t master = std::stoi(m[1]);
  ASSERT_TRUE(testing::KillPid(master, SIGSTOP).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "the job ended before the pause";
  ASSERT_TRUE(testing::KillPid(master, SIGCONT).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  text = Output();
  EXPECT_THAT(text, HasSubstr("the master did not run for"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("lost its lease")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("versions of updates are lost")));
  const int64_t sent = PushesSent();
  const std::map<int, int64_t> versions = FinalVersions();
  ASSERT_EQ(versions.size(), 2u) << text;
  for (const auto& [index, version] : versions) {
    EXPECT_EQ(version, sent) << "shard " << index << " applied " << version << " pushes of " << sent << " sent";
  }
}

// With --metrics_port P every replica serves /metrics on a port of its own (they used
// to be given their shard's, and the second could not listen), announced by its name.
TEST_F(ReplicationTest, EveryReplicaServesMetricsOnAPortOfItsOwn) {
  const int base = FreePortRun(6);  // the master, 2 shards of 2 replicas, a trainer
  ASSERT_GT(base, 0) << "no 6 free ports in a row";
  Launch("metrics", {"--trainers", "1", "--passes", "1", "--checkpoint_every_s", "0", "--metrics_port",
                     std::to_string(base)},
         {});
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  const std::string text = Output();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("metrics: http://127.0.0.1:", base, "/metrics (master)")));
  for (int i = 0; i < 2; ++i) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_THAT(text, HasSubstr(absl::StrCat("metrics: http://127.0.0.1:", base + 1 + 2 * i + r, "/metrics (pserver-",
                                               i, ".", r, ")")));
    }
  }
  EXPECT_THAT(text, HasSubstr(absl::StrCat("metrics: http://127.0.0.1:", base + 5, "/metrics (trainer-0)")));
}

// Both processes of shard 1 SIGKILLed at once: no replica is left to take over, so the
// shard comes back from its newest checkpoint, says how many versions that lost, and
// the job still finishes every task.
TEST_F(ReplicationTest, BothReplicasLostRestoreTheCheckpointAndSayWhatWasLost) {
  // The updates after the newest checkpoint are lost (what the test is about), so the job
  // exits 3 unless losses are allowed; whether any were is timing (a checkpoint may land
  // right after the last push), so they are allowed and the loss checked in the output.
  Launch("both", {"--trainers", "1", "--passes", "8", "--checkpoint_every_s", "1", "--allow_losses"}, {});
  ASSERT_TRUE(WaitForOutput("now a backup in sync", std::chrono::seconds(60), 2)) << Output();
  ASSERT_TRUE(testing::WaitUntil([&] { return FinalVersions().count(1) > 0; }, std::chrono::seconds(60))) << Output();
  ASSERT_THAT(Output(), ::testing::Not(HasSubstr("job done"))) << "the job ended before the kill";
  std::vector<pid_t> pids;
  for (const char* name : {"pserver-1.0", "pserver-1.1"}) {
    std::smatch m;
    const std::string text = Output();
    ASSERT_TRUE(std::regex_search(text, m, std::regex(std::string("started ") + name + R"( \(pid (\d+))")));
    pids.push_back(std::stoi(m[1]));
  }
  // Each copy checkpoints into its own directory (as on its own machine); the newest
  // of them, before the kill, is the least the shard may come back with.
  int64_t newest = 0;
  {
    static const std::regex re(R"(\[pserver-1\.\d\] .* written \(version (\d+))");
    const std::string text = Output();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      newest = std::max<int64_t>(newest, std::stoll((*it)[1]));
    }
  }
  for (pid_t pid : pids) ASSERT_TRUE(testing::KillPid(pid, SIGKILL).ok());
  ASSERT_TRUE(WaitForOutput("versions of updates are lost", std::chrono::seconds(60))) << Output();
  ASSERT_NO_FATAL_FAILURE(ExpectJobDone());
  EXPECT_THAT(Output(), HasSubstr("no backup in sync is left"));
  // Whichever copy came back first, the master made the one with the newest checkpoint
  // primary.
  std::smatch m;
  const std::string text = Output();
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(shard 1: replica \w+ \(\S+\) restores its checkpoint of version (\d+))")))
      << text;
  EXPECT_GE(std::stoll(m[1]), newest) << text;
}

}  // namespace
}  // namespace pl::dist_testing
