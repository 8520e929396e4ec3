// pl-launch on several machines keeps two copies of every shard by default, each on a
// machine of its own (node_role.h), so losing a whole machine loses no shard: one
// pl-launch per host of a test bed, the mlp job of MlpJobTest, and a host lost (cut
// off, every process on it SIGKILLed, its pl-launch too) or cut off for 10 s while the
// job trains. The master promotes the copies on the other hosts, the job goes on with
// one copy of that host's shards (and says so), the host comes back (a lost one with
// its pl-launch started again), its copies join from the live ones, and the job
// finishes with every chunk trained once per pass and no checkpoint restored. Every wait is bounded; the bed and
// the processes are removed after the test, also when it fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/mlp_job_test.h"
#include "tests/netbed/bed_job_test.h"
#include "paddle_like/testing/node_bed.h"
#include "tests/netbed/node_bed_job_test.h"
#include "paddle_like/testing/process.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kNodes = 3;

// How the host goes: lost (power: every process on it killed; it comes back empty and
// its pl-launch is started again), or cut off from the others for 10 s (its processes
// live on, fenced, and carry on once it is healed).
enum class HostFault { kLost, kCutOff };

class MultiNodeReplicasTest : public NodeBedJobTest, public ::testing::WithParamInterface<HostFault> {
 protected:
  void StartNode(int rank, std::vector<std::string> flags) {
    ASSERT_NO_FATAL_FAILURE(NodeBedJobTest::StartNode(rank, kNodes, std::move(flags)));
  }

  // The host whose address `address` ("IP:port") has; -1 if none.
  int HostOf(const std::string& address) const {
    for (int h = 0; h < kNodes; ++h) {
      if (absl::StartsWith(address, nodes_->bed().host(h).address() + ":")) return h;
    }
    return -1;
  }

  // Polls the membership until `done` holds for it (true) or `timeout` passes (false);
  // `last` gets the last membership read.
  bool WaitForMembership(const std::function<bool(const proto::MembershipResponse&)>& done, seconds timeout,
                         proto::MembershipResponse* last) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (std::optional<proto::MembershipResponse> m = nodes_->Membership()) {
        *last = *m;
        if (done(*m)) return true;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  }

};

// Every shard of the job has `copies` in sync and none joining.
bool EveryShardHas(const proto::MembershipResponse& m, int copies) {
  if (m.pservers_size() != kNodes) return false;
  for (const proto::PserverInfo& p : m.pservers()) {
    if (p.live_replicas() != copies || p.joining_replicas() != 0) return false;
  }
  return true;
}

TEST_P(MultiNodeReplicasTest, AMachineGoneMidJobLosesNoShardAndItsCopiesComeBackWithIt) {
  const bool lost_host = GetParam() == HostFault::kLost;
  constexpr int kPasses = 16, kPerTask = 2;
  ASSERT_NO_FATAL_FAILURE(MakeBed(kNodes));
  // No --replicas: two copies of every shard is the default on several machines.
  const std::vector<std::string> job = {"--passes", std::to_string(kPasses), "--chunks_per_task",
                                        std::to_string(kPerTask), "--lease_ms", "3000"};
  // The first copy of a shard to register is its primary. Nodes start one after the
  // other, each once the shards it runs the first copy of have their primary there:
  // then host 1 holds shard 1's primary and shard 0's backup, and host 2 only backups
  // (of shards 1 and 2). Losing host 1 loses a primary (shard 1: its backup on host 2
  // is promoted) and a backup whose primary lives on (shard 0's, on host 0: it must
  // keep streaming to nobody and serving, not lose its lease waiting on the dead host).
  const auto started = Clock::now();
  proto::MembershipResponse m;
  auto has_primary = [](const proto::MembershipResponse& m, int index) {
    for (const proto::PserverInfo& p : m.pservers()) {
      if (p.index() == index && !p.address().empty()) return true;
    }
    return false;
  };
  ASSERT_NO_FATAL_FAILURE(StartNode(0, job));
  ASSERT_TRUE(WaitForMembership([&](const auto& m) { return has_primary(m, 0) && has_primary(m, 2); }, seconds(60),
                                &m))
      << m.ShortDebugString() << "\n" << nodes_->AllOutput();
  ASSERT_NO_FATAL_FAILURE(StartNode(1, job));
  ASSERT_TRUE(WaitForMembership([&](const auto& m) { return has_primary(m, 1); }, seconds(60), &m))
      << m.ShortDebugString() << "\n" << nodes_->AllOutput();
  ASSERT_NO_FATAL_FAILURE(StartNode(2, job));

  // Both copies of every shard in sync, and every trainer training.
  ASSERT_TRUE(WaitForMembership([](const proto::MembershipResponse& m) { return EveryShardHas(m, 2); },
                                seconds(120), &m))
      << "the shards never had two copies each: " << m.ShortDebugString() << "\n" << nodes_->AllOutput();
  for (int r = 0; r < kNodes; ++r) {
    ASSERT_TRUE(WaitForText(nodes_->Log(r), "  step 5  loss", seconds(60)).has_value())
        << "node " << r << "'s trainer never trained\n" << nodes_->AllOutput();
    // Copy 0 of its own pserver and copy 1 of the previous node's.
    const std::string out = nodes_->Output(r);
    EXPECT_THAT(out, HasSubstr(absl::StrCat("pserver-", r, ".0 serving on ", nodes_->bed().host(r).address())));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("pserver-", (r + kNodes - 1) % kNodes, ".1 serving on ",
                                            nodes_->bed().host(r).address())));
  }
  ASSERT_EQ(HostOf(m.pservers(0).address()), 0) << m.ShortDebugString();
  ASSERT_EQ(HostOf(m.pservers(1).address()), 1) << m.ShortDebugString();
  ASSERT_EQ(HostOf(m.pservers(2).address()), 0) << m.ShortDebugString();

  const int victim = 1;
  std::map<int, int64_t> epoch_before;
  for (const proto::PserverInfo& p : m.pservers()) epoch_before[p.index()] = p.generation();
  const proto::JobStatusResponse before = nodes_->JobStatus();
  ASSERT_GT(before.num_passes(), 0) << "the master did not answer";
  const int64_t trained_before = before.chunks_trained();
  ASSERT_TRUE((lost_host ? nodes_->bed().Lose(victim) : nodes_->bed().CutOff(victim)).ok());
  const auto lost = Clock::now();
  const char* const gone = lost_host ? "lost" : "cut off";

  // Every primary the host held moves to another host, in a new epoch; the shards with
  // a copy there run on one copy, and the master says so.
  auto promoted = [&](const proto::MembershipResponse& m) {
    if (m.pservers_size() != kNodes) return false;
    for (const proto::PserverInfo& p : m.pservers()) {
      const int host = HostOf(p.address());
      if (host == victim || host < 0) return false;
      const bool had_copy_there = p.index() == victim || p.index() == (victim + kNodes - 1) % kNodes;
      if (had_copy_there && p.live_replicas() != 1) return false;
    }
    return m.pservers(1).generation() > epoch_before[1];
  };
  ASSERT_TRUE(WaitForMembership(promoted, seconds(30), &m))
      << "no promotion off host " << victim << ": " << m.ShortDebugString() << "\n" << nodes_->AllOutput();
  std::cout << "[measured] host " << victim << " " << gone << ": every primary off it "
            << SecondsBetween(lost, Clock::now()) << " s later" << std::endl;
  // Shards 0 and 1 run on one copy each until the host is back (the master's
  // pl_master_shards_below_copies).
  EXPECT_EQ(nodes_->JobStatus().shards_below_copies(), 2);
  // The other nodes' trainers go on: two more tasks reported (their calls to the lost
  // host fail by keepalive, and they retry at the promoted copies).
  ASSERT_TRUE(testing::WaitUntil([&] { return nodes_->JobStatus().chunks_trained() >= trained_before + 2 * kPerTask; },
                                 seconds(60)))
      << "no task finished after the loss\n" << nodes_->AllOutput();
  std::cout << "[measured] host " << victim << " " << gone << ": two more tasks done " << SecondsBetween(lost, Clock::now())
            << " s later" << std::endl;
  ASSERT_FALSE(nodes_->JobStatus().job_done()) << "the job ended before the host came back; make it longer";
  // Shard 0 lost only its backup: the same primary serves it, in the same epoch.
  std::optional<proto::MembershipResponse> now = nodes_->Membership();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->pservers(0).address(), m.pservers(0).address()) << now->ShortDebugString();
  EXPECT_EQ(now->pservers(0).generation(), epoch_before[0]) << now->ShortDebugString() << "\n" << nodes_->Output(0);

  // A lost host comes back like a fresh machine, and its pl-launch is started again; a
  // cut-off one is healed after 10 s, its copies learn they are out of their shards and
  // exit, and its pl-launch restarts them. Either way they join from the live ones
  // while the job trains.
  if (!lost_host) std::this_thread::sleep_until(lost + seconds(10));
  ASSERT_TRUE(nodes_->bed().Heal(victim).ok());
  const auto healed = Clock::now();
  if (lost_host) {
    ASSERT_NO_FATAL_FAILURE(StartNode(victim, job));
  }
  ASSERT_TRUE(WaitForMembership([](const proto::MembershipResponse& m) { return EveryShardHas(m, 2); },
                                seconds(120), &m))
      << "the lost host's copies did not come back: " << m.ShortDebugString() << "\n" << nodes_->AllOutput();
  std::cout << "[measured] host " << victim << " back: two copies of every shard again "
            << SecondsBetween(healed, Clock::now()) << " s after it " << (lost_host ? "was restarted" : "was healed")
            << std::endl;

  const NodeBed::Ending end = nodes_->FollowToTheEnd(seconds(360));
  const proto::JobStatusResponse& last = end.last;
  ASSERT_TRUE(end.all_exited) << "the nodes did not all exit within 360 s of the restart\n" << nodes_->AllOutput();
  std::cout << "[measured] 3 nodes x (2 copies + 1 trainer), one host " << gone << " and back: every node exited "
            << SecondsBetween(started, Clock::now()) << " s after the start" << std::endl;
  for (int r = 0; r < kNodes; ++r) {
    EXPECT_TRUE(nodes_->node(r).exit_info().success())
        << "node " << r << ": " << nodes_->node(r).exit_info().Describe() << "\n" << nodes_->AllOutput();
  }
  ASSERT_TRUE(end.saw_done) << "never read a done JobStatus; last: " << last.ShortDebugString();
  EXPECT_EQ(last.replicas(), 2);
  EXPECT_EQ(last.shards_below_copies(), 0) << last.ShortDebugString();
  EXPECT_EQ(last.chunks_trained(), kPasses * kChunks) << last.ShortDebugString();
  EXPECT_EQ(last.samples_done(), kPasses * kSamples) << last.ShortDebugString();
  EXPECT_EQ(last.done(), kChunks / kPerTask);
  EXPECT_EQ(last.failed(), 0) << nodes_->AllOutput();

  // A copy took over; no shard fell back to a checkpoint.
  const std::string master_out = nodes_->Output(0);
  EXPECT_THAT(master_out, HasSubstr("shard 1: ")) << master_out;
  EXPECT_THAT(master_out, HasSubstr("promoted to primary")) << master_out;
  for (int r = 0; r < kNodes; ++r) {
    const std::string out = nodes_->Output(r);
    EXPECT_THAT(out, Not(HasSubstr(" restores "))) << "node " << r << "\n" << out;
    EXPECT_THAT(out, Not(HasSubstr("not initialised"))) << "node " << r << "\n" << out;
    if (r == victim && lost_host) continue;  // its first trainer died with the host
    const double acc = LastNumberAfter(out, "final test accuracy: ").value_or(0);
    std::cout << "[measured] node " << r << ": final test accuracy " << acc << std::endl;
    EXPECT_GE(acc, kLearnedAccuracy) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, MultiNodeReplicasTest, ::testing::Values(HostFault::kLost, HostFault::kCutOff),
                         [](const ::testing::TestParamInfo<HostFault>& info) {
                           return info.param == HostFault::kLost ? std::string("HostLost") : std::string("HostCutOff");
                         });

}  // namespace
}  // namespace pl::dist_testing
