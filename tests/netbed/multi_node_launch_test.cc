// pl-launch on several machines (--nnodes): one pl-launch per host of a test bed
// (test_bed.h: network namespaces with their own address), node 0 running the master,
// every node its pservers and trainers, on the mlp job of MlpJobTest. Also the two
// ways a node is started wrong: a master address nothing answers at, and a --nnodes
// that differs from node 0's (these two need no Fashion-MNIST data: a tiny click
// dataset stands in). Every wait is bounded; the bed and the processes are
// removed after each test, also when it fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/mlp_job_test.h"
#include "tests/netbed/bed_job_test.h"
#include "paddle_like/testing/node_bed.h"
#include "tests/netbed/node_bed_job_test.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {
namespace {

using ::pl::netbed::TestBed;
using ::testing::HasSubstr;
using ::testing::Not;

// The job of MlpJobTest (12,000 Fashion-MNIST samples, skipped without the data), run
// by one pl-launch per host.
class MultiNodeLaunchTest : public NodeBedJobTest {
 protected:
  static constexpr int kMasterNodes = 3, kMasterNodePasses = 6;

  // Three nodes, each running a master and an etcd member (--master_addr A,B,C), until
  // one master leads (node 0's, unless the machine is so loaded that its one-second head
  // start per rank is not enough: leader_ says which), every shard has its two copies
  // in sync, and the job is into its second pass; the JobStatus then.
  proto::JobStatusResponse StartThreeMasterNodes() {
    proto::JobStatusResponse status;
    MakeBed(kMasterNodes);
    if (HasFatalFailure() || IsSkipped()) return status;
    nodes_->UseMasters(kMasterNodes);
    const std::vector<std::string> job = {"--passes", std::to_string(kMasterNodePasses), "--chunks_per_task", "2",
                                          "--lease_ms", "3000", "--replicas", "2", "--master_wait_s", "30"};
    for (int r = 0; r < kMasterNodes; ++r) {
      StartNode(r, kMasterNodes, job);
      if (HasFatalFailure()) return status;
    }
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          for (int r = 0; r < kMasterNodes; ++r) {
            if (LeadCount(r) > 0) leader_ = r;
          }
          return leader_ >= 0;
        },
        seconds(90)))
        << "no master led\n" << nodes_->AllOutput();
    if (leader_ != 0) std::cout << "[note] node " << leader_ << "'s master led first, not node 0's" << std::endl;
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          status = nodes_->JobStatus();
          return status.pass() >= 2 && status.shards_below_copies() == 0 && status.live_trainers() == kMasterNodes;
        },
        seconds(120)))
        << status.ShortDebugString() << "\n" << nodes_->AllOutput();
    return status;
  }

  // How many times node r's masters logged that they lead.
  int LeadCount(int r) const { return CountOf(nodes_->Output(r), "master: leading: "); }

  // The node whose master led anew (a lead line more than `before` counted) within 30 s,
  // other than `except`; -1 when none did.
  int NewLeaderOtherThan(int except, const std::vector<int>& before) {
    int found = -1;
    testing::WaitUntil(
        [&] {
          for (int r = 0; r < kMasterNodes; ++r) {
            if (r != except && LeadCount(r) > before[r]) found = r;
          }
          return found >= 0;
        },
        seconds(30));
    return found;
  }
  std::vector<int> LeadCounts() const {
    std::vector<int> n;
    for (int r = 0; r < kMasterNodes; ++r) n.push_back(LeadCount(r));
    return n;
  }

  int leader_ = -1;  // the node whose master led first
};

// Nodes started wrong: these need no training data (a tiny click dataset for the master).
class MultiNodeLaunchBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status supported = TestBed::CheckSupported();
    if (!supported.ok()) GTEST_SKIP() << supported;
    ASSERT_FALSE(dir_.path().empty());
  }

  void MakeBed(int hosts) {
    auto nodes = NodeBed::Create(hosts, dir_.path());
    if (absl::IsNotFound(nodes.status()) || absl::IsFailedPrecondition(nodes.status())) {
      GTEST_SKIP() << "needs the real binaries: " << nodes.status();
    }
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    nodes_ = std::move(*nodes);
  }

  // Node `rank` of `nnodes` on a 200-record click dataset, training nothing in practice.
  void StartNode(int rank, int nnodes, std::vector<std::string> flags) {
    const std::string data = dir_.path() + "/clicks";
    if (rank == 0) {
      auto gen = testing::Spawn({nodes_->bin("pl-gen-clicks"), "--out", data, "--train", "200", "--test", "50",
                                 "--records_per_chunk", "100"},
                                dir_.path() + "/gen.log");
      ASSERT_TRUE(gen.ok()) << gen.status();
      auto exit = testing::WaitForExit(**gen, seconds(60));
      ASSERT_TRUE(exit.ok() && exit->success()) << testing::ReadFileOrEmpty(dir_.path() + "/gen.log");
      flags.insert(flags.end(), {"--data", data + "/train.plrec"});
    }
    Status s = nodes_->StartNode(rank, nnodes, flags, {nodes_->bin("pl-trainer"), "--model", "ctr", "--threads", "1"});
    ASSERT_TRUE(s.ok()) << s;
  }

  testing::TempDir dir_{"pl-netbed-launch"};
  std::unique_ptr<NodeBed> nodes_;  // declared after dir_: removed before it
};

// Three machines, each running pl-launch with one pserver (one copy: --replicas 1; two
// copies on different machines are multi_node_replicas_test.cc) and one trainer: every
// node exits 0, the master counts every chunk trained once per pass, and every node's
// trainer trained tasks against all three pservers.
TEST_F(MultiNodeLaunchTest, ThreeNodesTrainEveryChunkOncePerPassAndAllExitZero) {
  constexpr int kNodes = 3, kPasses = 2, kPerTask = 2;
  ASSERT_NO_FATAL_FAILURE(MakeBed(kNodes));
  const std::vector<std::string> job = {"--passes", std::to_string(kPasses), "--chunks_per_task",
                                        std::to_string(kPerTask), "--lease_ms", "10000", "--replicas", "1"};
  const auto started = Clock::now();
  for (int r = 0; r < kNodes; ++r) ASSERT_NO_FATAL_FAILURE(StartNode(r, kNodes, job));

  // The test reaches the hosts: it reads the master's JobStatus until the nodes exit.
  const NodeBed::Ending end = nodes_->FollowToTheEnd(seconds(240));
  const proto::JobStatusResponse& last = end.last;
  ASSERT_TRUE(end.all_exited) << "the nodes did not all exit within 240 s\n" << nodes_->AllOutput();
  std::cout << "[measured] 3 nodes x (1 pserver + 1 trainer): every node exited "
            << SecondsBetween(started, Clock::now()) << " s after the start" << std::endl;
  for (int r = 0; r < kNodes; ++r) {
    EXPECT_TRUE(nodes_->node(r).exit_info().success())
        << "node " << r << ": " << nodes_->node(r).exit_info().Describe() << "\n" << nodes_->AllOutput();
  }

  ASSERT_TRUE(end.saw_done) << "never read a done JobStatus; last: " << last.ShortDebugString() << "\n"
                        << nodes_->AllOutput();
  EXPECT_EQ(last.num_nodes(), kNodes);
  EXPECT_EQ(last.chunks_trained(), kPasses * kChunks) << last.ShortDebugString();
  EXPECT_EQ(last.samples_done(), kPasses * kSamples) << last.ShortDebugString();
  EXPECT_EQ(last.done(), kChunks / kPerTask);
  EXPECT_EQ(last.failed(), 0) << nodes_->AllOutput();
  // Node 0's closing line says the same.
  EXPECT_THAT(nodes_->Output(0), HasSubstr(absl::StrCat("pass ", kPasses, "/", kPasses,
                                                        " | tasks todo 0 pending 0 done ", kChunks / kPerTask,
                                                        " failed 0")));
  EXPECT_THAT(nodes_->Output(0), HasSubstr(absl::StrCat("| samples ", kPasses * kSamples)));

  int64_t tasks = 0;
  for (int r = 0; r < kNodes; ++r) {
    const std::string out = nodes_->Output(r);
    // Node r runs pserver r, advertised at its own address, and trainer r.
    // Every failure below prints the node's output: a run that failed once under load
    // (`ctest -j2` beside the replication tests) left nothing to tell why.
    EXPECT_THAT(out, HasSubstr(absl::StrCat("pserver-", r, " serving on ", nodes_->bed().host(r).address(), ":")))
        << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("started trainer-", r, " "))) << out;
    // Shared memory with the pserver of its own machine, dense links (on the job's TLS)
    // with the others.
    EXPECT_THAT(out, HasSubstr(absl::StrCat("pserver ", r, ": dense traffic over shared memory"))) << out;
    for (int other = 0; other < kNodes; ++other) {
      if (other == r) continue;
      EXPECT_THAT(out, ::testing::ContainsRegex(
                           absl::StrCat("pserver ", other, ": dense traffic (now )?over dense link \\(4 lanes each way")))
          << "trainer " << r << "\n" << out;
    }
    const int64_t node_tasks = static_cast<int64_t>(LastNumberAfter(out, "job done after ").value_or(0));
    EXPECT_GT(node_tasks, 0) << "node " << r << "'s trainer trained no task\n" << out;
    tasks += node_tasks;
    const double acc = LastNumberAfter(out, "final test accuracy: ").value_or(0);
    std::cout << "[measured] node " << r << ": " << node_tasks << " tasks, final test accuracy " << acc << std::endl;
    EXPECT_GE(acc, kLearnedAccuracy) << out;
  }
  EXPECT_EQ(tasks, kPasses * (kChunks / kPerTask)) << "a task was trained twice or lost\n" << nodes_->AllOutput();
}

// Node 0's machine lost mid-job (no FIN, no RST): node 1 stops its trainer and its
// pservers (copy 0 of pserver 1, copy 1 of pserver 0: two copies by default) and exits
// 1 naming the master once it has been unreachable for --master_wait_s.
TEST_F(MultiNodeLaunchTest, NodeZeroLostMidJobOtherNodeExitsOneWithinTheBound) {
  ASSERT_NO_FATAL_FAILURE(MakeBed(2));
  // Long enough to be running when node 0 goes: 50 passes of about a second.
  const std::vector<std::string> job = {"--passes", "50", "--master_wait_s", "5"};
  ASSERT_NO_FATAL_FAILURE(StartNode(0, 2, job));
  ASSERT_NO_FATAL_FAILURE(StartNode(1, 2, job));
  ASSERT_TRUE(WaitForText(nodes_->Log(1), "  step 5  loss", seconds(60)).has_value())
      << "node 1's trainer never trained\n" << nodes_->AllOutput();
  ASSERT_TRUE(nodes_->bed().Lose(0).ok());
  const auto lost = Clock::now();
  auto exit = testing::WaitForExit(nodes_->node(1), seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << nodes_->Output(1);
  const double took = SecondsBetween(lost, Clock::now());
  std::cout << "[measured] node 0 lost: node 1 exited " << took << " s later (--master_wait_s 5)" << std::endl;
  EXPECT_EQ(exit->code, 1) << exit->Describe() << "\n" << nodes_->Output(1);
  EXPECT_GE(took, 4.0);   // the last good poll was at most a poll period before the loss
  EXPECT_LT(took, 30.0);  // the wait + one call + the stop grace
  const std::string out = nodes_->Output(1);
  EXPECT_THAT(LastLine(out), HasSubstr(absl::StrCat("the job's master at ", nodes_->master_addr(),
                                                    " has been unreachable for ")))
      << out;
  EXPECT_THAT(LastLine(out), HasSubstr("is node 0 gone?")) << out;
  EXPECT_THAT(out, HasSubstr("pserver-1.0 exited")) << "node 1 left a pserver running\n" << out;
  EXPECT_THAT(out, HasSubstr("pserver-0.1 exited")) << "node 1 left a pserver running\n" << out;
}

// Three master nodes (--master_addr A,B,C): each runs a master and an etcd member, node
// 0's master leads (on a machine loaded enough, another may: then node 0's loss takes no
// master with it, and the test says so). Node 0's machine is lost mid-job (no FIN, no
// RST): the etcd of nodes 1 and 2 keeps its majority, one of their masters leads within
// its lease, the pservers' backups on the other nodes take over node 0's shard, node
// 0's task goes back to todo when its lease runs out, and the job finishes on nodes 1
// and 2, every chunk trained exactly once a pass, both exiting 0.
TEST_F(MultiNodeLaunchTest, NodeZeroLostWithStandbyMastersTheOtherNodesFinishTheJob) {
  constexpr int kNodes = kMasterNodes, kPasses = kMasterNodePasses;
  const proto::JobStatusResponse before = StartThreeMasterNodes();
  if (HasFailure() || IsSkipped()) return;
  const std::vector<int> leads = LeadCounts();
  ASSERT_TRUE(nodes_->bed().Lose(0).ok());
  const auto lost = Clock::now();
  if (leader_ == 0) {
    ASSERT_GE(NewLeaderOtherThan(0, leads), 1) << "no standby led after node 0 was lost\n" << nodes_->AllOutput();
    std::cout << "[measured] node 0 lost at pass " << before.pass() << ": a standby led "
              << SecondsBetween(lost, Clock::now()) << " s later (leader lease 2 s)" << std::endl;
  }

  const NodeBed::Ending end = nodes_->FollowToTheEnd(seconds(240));
  ASSERT_TRUE(end.all_exited) << "the nodes did not all exit within 240 s\n" << nodes_->AllOutput();
  for (int r = 1; r < kNodes; ++r) {
    EXPECT_TRUE(nodes_->node(r).exit_info().success())
        << "node " << r << ": " << nodes_->node(r).exit_info().Describe() << "\n" << nodes_->AllOutput();
  }
  ASSERT_TRUE(end.saw_done) << "never read a done JobStatus; last: " << end.last.ShortDebugString() << "\n"
                            << nodes_->AllOutput();
  EXPECT_EQ(end.last.chunks_trained(), kPasses * kChunks) << "a chunk was lost or trained twice\n"
                                                          << end.last.ShortDebugString();
  EXPECT_EQ(end.last.failed(), 0) << nodes_->AllOutput();
  EXPECT_EQ(end.last.failed_task_ids_size(), 0) << end.last.ShortDebugString();
  EXPECT_EQ(end.last.losses_size(), 0) << end.last.ShortDebugString();
  for (int r = 1; r < kNodes; ++r) {
    const double acc = LastNumberAfter(nodes_->Output(r), "final test accuracy: ").value_or(0);
    std::cout << "[measured] node " << r << ": final test accuracy " << acc << std::endl;
    EXPECT_GE(acc, kLearnedAccuracy) << nodes_->Output(r);
  }
}

// The split-brain case on the bed: the leading master's node (node 0's, as a rule; also
// an etcd member, pserver copies and a trainer) cut off for 10 s, its processes alive but
// unreachable, as in a partition. Its etcd member is in the minority, so its master
// cannot renew its lease: it says it no longer leads and exits before a master on the
// other side leads (one clock: the hosts share this machine's), and that one finishes
// the job's work. Healed, the cut node's master comes back as a standby, its shard
// copies rejoin, and the job ends with every chunk trained once a pass and nothing
// lost; every node exits 0.
TEST_F(MultiNodeLaunchTest, TheLeadersNodeCutOffStepsDownBeforeAnotherLeads) {
  constexpr int kNodes = kMasterNodes, kPasses = kMasterNodePasses;
  StartThreeMasterNodes();
  if (HasFailure() || IsSkipped()) return;
  const int cut_node = leader_;
  const std::vector<int> leads = LeadCounts();
  ASSERT_TRUE(nodes_->bed().CutOff(cut_node).ok());
  const auto cut = Clock::now();
  const int next = NewLeaderOtherThan(cut_node, leads);
  ASSERT_GE(next, 0) << "no master on the other side led\n" << nodes_->AllOutput();
  std::cout << "[measured] node " << cut_node << " (the leader's) cut off: node " << next << "'s master led "
            << SecondsBetween(cut, Clock::now()) << " s later" << std::endl;
  std::this_thread::sleep_until(cut + seconds(10));
  ASSERT_TRUE(nodes_->bed().Heal(cut_node).ok());

  // The cut-off master stopped leading before the other side's led.
  const std::string old_out = nodes_->Output(cut_node), new_out = nodes_->Output(next);
  const size_t lost = old_out.find("no longer the leader");
  ASSERT_NE(lost, std::string::npos) << "node " << cut_node << "'s master never stepped down\n" << old_out;
  auto timestamp = [](const std::string& text, size_t at) {
    const size_t start = text.find("] ", text.rfind('\n', at) + 1);  // "[master] <timestamp> ..."
    return text.substr(start + 2, 24);
  };
  const size_t led = new_out.rfind("master: leading: ");
  ASSERT_NE(led, std::string::npos);
  EXPECT_LT(timestamp(old_out, lost), timestamp(new_out, led))
      << "node " << next << "'s master led while node " << cut_node << "'s still did";

  const NodeBed::Ending end = nodes_->FollowToTheEnd(seconds(240));
  ASSERT_TRUE(end.all_exited) << "the nodes did not all exit within 240 s\n" << nodes_->AllOutput();
  for (int r = 0; r < kNodes; ++r) {
    EXPECT_TRUE(nodes_->node(r).exit_info().success())
        << "node " << r << ": " << nodes_->node(r).exit_info().Describe() << "\n" << nodes_->AllOutput();
  }
  ASSERT_TRUE(end.saw_done) << end.last.ShortDebugString() << "\n" << nodes_->AllOutput();
  EXPECT_EQ(end.last.chunks_trained(), kPasses * kChunks) << end.last.ShortDebugString();
  EXPECT_EQ(end.last.failed(), 0);
  EXPECT_EQ(end.last.losses_size(), 0) << end.last.ShortDebugString();
}

// A node whose --master_addr nothing answers at gives up after --master_wait_s with one
// line naming the address, exits 1 and starts nothing.
TEST_F(MultiNodeLaunchBadInputTest, UnreachableMasterAddrIsAOneLineErrorWithinTheWait) {
  ASSERT_NO_FATAL_FAILURE(MakeBed(2));
  const auto started = Clock::now();
  ASSERT_NO_FATAL_FAILURE(StartNode(1, 2, {"--master_wait_s", "3"}));  // no node 0
  auto exit = testing::WaitForExit(nodes_->node(1), seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << nodes_->Output(1);
  const double took = SecondsBetween(started, Clock::now());
  std::cout << "[measured] unreachable master: node 1 exited after " << took << " s (--master_wait_s 3)" << std::endl;
  EXPECT_EQ(exit->code, 1) << exit->Describe();
  EXPECT_GE(took, 3.0);
  EXPECT_LT(took, 10.0);
  const std::string out = nodes_->Output(1);
  EXPECT_THAT(LastLine(out), HasSubstr(absl::StrCat("the job's master at ", nodes_->master_addr(),
                                                    " did not answer within 3 s (--master_wait_s)")))
      << out;
  EXPECT_THAT(out, Not(HasSubstr("started pserver"))) << out;
}

// A node started with --nnodes 3 for a job whose node 0 said --nnodes 2, then one with
// --replicas 1 where node 0 has two copies of every shard: each an error naming both
// values, exit 2, and nothing started on that node.
TEST_F(MultiNodeLaunchBadInputTest, MismatchedNnodesNamesBothValues) {
  ASSERT_NO_FATAL_FAILURE(MakeBed(2));
  ASSERT_NO_FATAL_FAILURE(StartNode(0, 2, {}));
  ASSERT_TRUE(WaitForText(nodes_->Log(0), "master serving on", seconds(30)).has_value()) << nodes_->Output(0);
  ASSERT_NO_FATAL_FAILURE(StartNode(1, 3, {"--master_wait_s", "20"}));
  auto exit = testing::WaitForExit(nodes_->node(1), seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << nodes_->Output(1);
  EXPECT_EQ(exit->code, 2) << exit->Describe() << "\n" << nodes_->Output(1);
  const std::string out = nodes_->Output(1);
  EXPECT_THAT(LastLine(out),
              HasSubstr("--nnodes 3 on this node, but the job's master (node 0) was started with --nnodes 2"))
      << out;
  EXPECT_THAT(out, Not(HasSubstr("started pserver"))) << out;

  ASSERT_NO_FATAL_FAILURE(StartNode(1, 2, {"--master_wait_s", "20", "--replicas", "1"}));
  exit = testing::WaitForExit(nodes_->node(1), seconds(30));
  ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << nodes_->Output(1);
  EXPECT_EQ(exit->code, 2) << exit->Describe() << "\n" << nodes_->Output(1);
  EXPECT_THAT(LastLine(nodes_->Output(1)),
              HasSubstr("--replicas 1 on this node, but the job's master (node 0) was started with --replicas 2"))
      << nodes_->Output(1);
  // Node 0 is still waiting for node 1's pservers; SIGTERM stops it cleanly.
  ASSERT_TRUE(nodes_->node(0).running()) << nodes_->Output(0);
  ASSERT_TRUE(nodes_->node(0).Signal(SIGTERM).ok());
  auto stopped = testing::WaitForExit(nodes_->node(0), seconds(30));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->code, 128 + SIGTERM) << stopped->Describe() << "\n" << nodes_->Output(0);
}

}  // namespace
}  // namespace pl::dist_testing
