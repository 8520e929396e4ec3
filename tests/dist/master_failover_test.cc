// A job whose masters keep its state in a real etcd (pl-master --etcd_endpoints): the
// leader SIGKILLed mid-job, or cut off from etcd while the trainers still reach it, and
// the standby leads; the trainers and pservers find it by themselves (they were given
// both addresses), and the job finishes with every chunk trained exactly once a pass.
#include <signal.h>

#include <iostream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/etcd_server.h"
#include "tests/dist/mlp_job_test.h"
#include "tests/testing/tcp_relay.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MasterFailoverTest : public MlpJobTest {
 protected:
  void SetUp() override {
    MlpJobTest::SetUp();
    if (IsSkipped()) return;
    auto etcd = testing::EtcdServer::Start(dir_.path());
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(etcd).value();
  }

  ClusterOptions FailoverOptions() const {
    constexpr int kPasses = 2, kPerTask = 2;
    // The task lease outlasts the takeover on a loaded machine: no trainer is dropped.
    ClusterOptions o = Options(kPasses, kPerTask, 15000);
    o.etcd_endpoints = etcd_->endpoint();
    o.masters = 2;
    return o;
  }

  // Starts the job with master 0 leading and master 1 standing by, then waits until
  // both trainers are registered and some tasks are done.
  void StartWithStandby(ClusterOptions o) {
    ASSERT_NO_FATAL_FAILURE(StartCluster(std::move(o), 2));
    Status standby = cluster_->StartStandbyMaster(1);
    ASSERT_TRUE(standby.ok()) << standby;
    ASSERT_TRUE(WaitForText(dir_.path() + "/master1-0.log", "standing by: the leader is", seconds(20)))
        << cluster_->AllLogs();
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          auto s = cluster_->JobStatus();
          return s.ok() && s->done() >= 3 && s->live_trainers() == 2;
        },
        seconds(60)))
        << cluster_->AllLogs();
  }

  // The job finished on the standby, every chunk trained exactly once a pass.
  void ExpectFinishedOnTheStandbyExactlyOnce() {
    auto done = cluster_->WaitForJobDone(seconds(180));
    ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster_->AllLogs();
    const int tasks = kChunks / 2;
    EXPECT_EQ(done->done(), tasks);
    EXPECT_EQ(done->failed(), 0);
    EXPECT_EQ(done->chunks_trained(), 2 * kChunks) << "a chunk was lost or trained twice";
    for (int r = 0; r < 2; ++r) EXPECT_GE(ExpectFinishedWithAccuracy(r), kLearnedAccuracy);
    const std::string standby = cluster_->StandbyMasterLog(1);
    EXPECT_THAT(standby, HasSubstr("leading: "));
    EXPECT_THAT(standby, HasSubstr("resumed: pass "));
    // Leases got a full term: no trainer was dropped or had to register again, and no
    // trainer's task was taken from it.
    EXPECT_THAT(standby, Not(HasSubstr("dropped")));
    EXPECT_THAT(standby, Not(HasSubstr(") registered")));
    for (int r = 0; r < 2; ++r) EXPECT_THAT(cluster_->TrainerLog(r), Not(HasSubstr("no longer ours")));
  }

  std::unique_ptr<testing::EtcdServer> etcd_;
};

TEST_F(MasterFailoverTest, ASigkilledLeaderIsReplacedByTheStandbyAndNoChunkIsLostOrTrainedTwice) {
  ASSERT_NO_FATAL_FAILURE(StartWithStandby(FailoverOptions()));
  auto before = cluster_->JobStatus();
  ASSERT_TRUE(before.ok());
  const auto killed_at = Clock::now();
  ASSERT_TRUE(cluster_->KillMaster().ok());
  auto serving = WaitForText(dir_.path() + "/master1-0.log", "serving on", seconds(20));
  ASSERT_TRUE(serving.has_value()) << cluster_->AllLogs();
  // The trainers reach the standby by themselves and report work to it.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto s = cluster_->JobStatus();
        return s.ok() && s->chunks_trained() > before->chunks_trained();
      },
      seconds(60)))
      << cluster_->AllLogs();
  std::cout << "[measured] SIGKILL -> standby serving " << SecondsBetween(killed_at, *serving)
            << " s (lease 1 s); -> a task finished on it " << SecondsBetween(killed_at, Clock::now()) << " s"
            << std::endl;
  ExpectFinishedOnTheStandbyExactlyOnce();
}

// The leader loses etcd (a relay that stops moving bytes, as a partition does) while
// the trainers and pservers still reach it: it must stop leading, and exit, before the
// standby leads; anything it would still write is refused by the fence.
TEST_F(MasterFailoverTest, ALeaderCutOffFromEtcdExitsAndTheStandbyFinishesTheJob) {
  auto relay = testing::TcpRelay::Start(etcd_->client_port());
  ASSERT_TRUE(relay.ok()) << relay.status();
  ClusterOptions o = FailoverOptions();
  o.etcd_endpoints_of_master = {"127.0.0.1:" + std::to_string((*relay)->port())};
  ASSERT_NO_FATAL_FAILURE(StartWithStandby(std::move(o)));
  (*relay)->Cut();
  auto exit = testing::WaitForExit(cluster_->master(), seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << cluster_->AllLogs();
  EXPECT_FALSE(exit->success());
  EXPECT_THAT(cluster_->MasterLog(), HasSubstr("no longer the leader, exiting so that a standby takes over"));
  ASSERT_TRUE(WaitForText(dir_.path() + "/master1-0.log", "serving on", seconds(20))) << cluster_->AllLogs();
  // The old leader said it was done before the standby led (both logs' timestamps are
  // this machine's clock).
  const std::string old_log = cluster_->MasterLog(), new_log = cluster_->StandbyMasterLog(1);
  const size_t lost = old_log.find("no longer the leader");
  const size_t led = new_log.find("leading: ");
  ASSERT_NE(lost, std::string::npos);
  ASSERT_NE(led, std::string::npos);
  const std::string lost_ts = old_log.substr(old_log.rfind('\n', lost) + 1, 24);
  const std::string led_ts = new_log.substr(new_log.rfind('\n', led) + 1, 24);
  EXPECT_LT(lost_ts, led_ts) << "the standby led while the old leader still served";
  ExpectFinishedOnTheStandbyExactlyOnce();
}

}  // namespace
}  // namespace pl::dist_testing
