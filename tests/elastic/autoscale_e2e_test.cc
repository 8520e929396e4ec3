// pl-autoscale driving a real pl-launch job (master, pserver, pl-trainer processes on
// 127.0.0.1, mutual TLS as the launcher sets it up): the job starts with no trainer,
// is admitted at its minimum, grows when the cluster file frees slots, shrinks with
// SIGTERM when they are reclaimed, and finishes with every sample trained exactly once.
// Skips while the binaries are not built.
#include <fstream>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/io/atomic_file.h"
#include "paddle_like/metrics/http_server.h"
#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class AutoscaleE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"pl-launch", "pl-master", "pl-pserver", "pl-trainer", "pl-gen-clicks", "pl-autoscale"}) {
      auto path = testing::BinaryPath(name);
      if (!path.ok()) GTEST_SKIP() << "needs the real binaries: " << path.status().message();
      bin_[name] = *path;
    }
  }
  void TearDown() override {
    for (auto* child : {&autoscale_, &launch_}) {
      if (*child) testing::KillPid((*child)->pid(), SIGKILL).IgnoreError();
    }
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string Read(const std::string& name) const { return testing::ReadFileOrEmpty(Path(name)); }
  bool WaitFor(const std::string& file, const std::string& needle, seconds timeout) {
    return testing::WaitUntil([&] { return Read(file).find(needle) != std::string::npos; }, timeout);
  }
  int Count(const std::string& file, const std::string& needle) const {
    const std::string text = Read(file);
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }
  void WriteCluster(int reserved) {
    ASSERT_TRUE(WriteFileAtomically(Path("cluster.txt"),
                                    "slots: 3\nreserved_slots: " + std::to_string(reserved) +
                                        "\njob { name: \"ctr\" master: \"" + master_ +
                                        "\" min_trainers: 1 max_trainers: 3 }\n")
                    .ok());
  }

  std::map<std::string, std::string> bin_;
  testing::TempDir dir_{"pl-autoscale-test"};
  std::unique_ptr<ChildProcess> launch_;
  std::unique_ptr<ChildProcess> autoscale_;
  std::string master_;
};

TEST_F(AutoscaleE2ETest, AJobGrowsIntoFreedSlotsShrinksOnReclaimAndTrainsEverySampleOnce) {
  constexpr int kRecords = 60000, kPasses = 8;
  auto gen = testing::Spawn({bin_["pl-gen-clicks"], "--out", Path("data"), "--train", std::to_string(kRecords),
                             "--test", "200", "--records_per_chunk", "250"},
                            Path("gen.log"));
  ASSERT_TRUE(gen.ok()) << gen.status();
  auto gen_exit = testing::WaitForExit(**gen, seconds(60));
  ASSERT_TRUE(gen_exit.ok() && gen_exit->success()) << Read("gen.log");

  auto launch = testing::Spawn({bin_["pl-launch"], "--workdir", Path("work"), "--data", Path("data/train.plrec"),
                                "--pservers", "1", "--trainers", "0", "--passes", std::to_string(kPasses),
                                "--chunks_per_task", "2", "--lease_ms", "1000", "--progress_every_s", "1", "--",
                                "pl-trainer", "--model", "ctr", "--threads", "1", "--batch_size", "32"},
                               Path("launch.log"));
  ASSERT_TRUE(launch.ok()) << launch.status();
  launch_ = std::move(*launch);
  ASSERT_TRUE(WaitFor("launch.log", "waiting for a trainer target", seconds(60))) << Read("launch.log");
  std::smatch m;
  const std::string out = Read("launch.log");
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(master serving on (127\.0\.0\.1:\d+))"))) << out;
  master_ = m[1];

  // One slot free: the job is admitted at its minimum.
  WriteCluster(2);
  auto autoscale = testing::Spawn({bin_["pl-autoscale"], "--cluster", Path("cluster.txt"), "--tls_dir",
                                   Path("work/tls/launch"), "--period_ms", "100", "--cooldown_ms", "500",
                                   "--settle_ms", "300"},
                                  Path("autoscale.log"));
  ASSERT_TRUE(autoscale.ok()) << autoscale.status();
  autoscale_ = std::move(*autoscale);
  ASSERT_TRUE(WaitFor("launch.log", "started trainer-0", seconds(30))) << Read("autoscale.log") << Read("launch.log");
  EXPECT_THAT(Read("autoscale.log"), HasSubstr("ctr 0->1 (admitted"));

  // The online services give two slots back: the job grows to its maximum.
  WriteCluster(0);
  ASSERT_TRUE(WaitFor("launch.log", "started trainer-2", seconds(30))) << Read("autoscale.log") << Read("launch.log");
  EXPECT_THAT(Read("autoscale.log"), HasSubstr("ctr 1->3 (grow"));
  ASSERT_FALSE(Read("launch.log").find("job done") != std::string::npos) << "the job ended before it shrank";

  // They take them again: reclaimed at once, the newest trainers asked to leave after
  // their tasks (SIGUSR1; SIGTERM after --leave_grace_ms if one is still there).
  WriteCluster(2);
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("launch.log", "SIGUSR1 trainer-") >= 2; }, seconds(30)))
      << Read("autoscale.log") << Read("launch.log");
  EXPECT_THAT(Read("autoscale.log"), HasSubstr("ctr 3->1 (reclaim"));
  EXPECT_EQ(Count("launch.log", "SIGKILL"), 0);

  auto exit = testing::WaitForExit(*launch_, seconds(240));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << Read("launch.log");
  EXPECT_EQ(exit->code, 0) << Read("launch.log");
  // Every sample of every pass once: stopped trainers gave their tasks back, none lost.
  EXPECT_THAT(Read("launch.log"), HasSubstr(absl::StrCat("failed 0 (any pass 0) | trainers 0 | samples ",
                                                         kRecords * kPasses)));
  ASSERT_TRUE(WaitFor("autoscale.log", "job 'ctr' is done", seconds(10))) << Read("autoscale.log");
  ASSERT_TRUE(testing::KillPid(autoscale_->pid(), SIGTERM).ok());
  auto as_exit = testing::WaitForExit(*autoscale_, seconds(10));
  ASSERT_TRUE(as_exit.ok());
  EXPECT_EQ(as_exit->code, 0) << Read("autoscale.log");
}

TEST_F(AutoscaleE2ETest, ABadClusterFileIsOneLineAndExitTwoAndABadEditKeepsTheLastGoodOne) {
  master_ = "127.0.0.1:1";
  ASSERT_TRUE(WriteFileAtomically(Path("bad.txt"), "slots: 2\njob { name: \"a\" master: \"127.0.0.1:1\" "
                                                   "min_trainers: 3 max_trainers: 2 }\n")
                  .ok());
  auto bad = testing::Spawn({bin_["pl-autoscale"], "--cluster", Path("bad.txt"), "--insecure"}, Path("bad.log"));
  ASSERT_TRUE(bad.ok());
  auto exit = testing::WaitForExit(**bad, seconds(10));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT(Read("bad.log"), HasSubstr("job 'a': min_trainers 3 is above max_trainers 2"));

  WriteCluster(1);
  auto good = testing::Spawn({bin_["pl-autoscale"], "--cluster", Path("cluster.txt"), "--insecure", "--period_ms",
                              "50", "--http_port", "0", "--http_port_file", Path("port")},
                             Path("good.log"));
  ASSERT_TRUE(good.ok());
  autoscale_ = std::move(*good);
  ASSERT_TRUE(WaitFor("good.log", "capacity 2 slot(s)", seconds(10))) << Read("good.log");
  ASSERT_TRUE(WriteFileAtomically(Path("cluster.txt"), "slots: 3\nreserved_slots: 9\n").ok());
  ASSERT_TRUE(WaitFor("good.log", "reserved_slots: 9 is outside 0 .. slots (3)", seconds(10))) << Read("good.log");
  EXPECT_THAT(Read("good.log"), HasSubstr("the last good cluster file stays in force"));
  // The job of the good file is still there (unreachable: its master is port 1).
  ASSERT_TRUE(WaitFor("port", "\n", seconds(10)));
  const int port = std::stoi(Read("port"));
  std::string json;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto body = metrics::HttpGet("127.0.0.1", port, "/status.json", absl::Seconds(2));
        json = body.ok() ? *body : "";
        return json.find("reserved_slots: 9") != std::string::npos;
      },
      seconds(10)))
      << json;
  EXPECT_THAT(json, HasSubstr("\"name\":\"ctr\""));
  EXPECT_THAT(json, HasSubstr("\"capacity\":2"));
}

}  // namespace
}  // namespace pl
