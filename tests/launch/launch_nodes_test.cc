// pl-launch on several machines: the --nnodes flags, the node layout (node_role.h) and
// a node that cannot reach its master. The real multi-machine job runs in
// tests/netbed/multi_node_launch_test.cc.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/reflection.h"
#include "paddle_like/testing/process.h"
#include "trainer/launcher/launch_options.h"
#include "trainer/launcher/launcher.h"
#include "trainer/launcher/node_role.h"

namespace pl {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

std::vector<std::string> Args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--pservers", "1", "--trainers", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "t"});
  return args;
}

void ExpectInvalid(const std::vector<std::string>& extra, const std::string& fragment) {
  absl::FlagSaver saver;
  auto o = ParseLaunchFlags(Args(extra));
  ASSERT_FALSE(o.ok()) << "accepted: " << ::testing::PrintToString(extra);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(), HasSubstr(fragment));
}

TEST(LaunchNodeOptionsTest, ParsesTheNodeFlags) {
  absl::FlagSaver saver;
  auto o = ParseLaunchFlags(Args({"--nnodes", "3", "--node_rank=2", "--master_addr", "node0.example:7000",
                                  "--node_addr", "10.1.2.3", "--master_wait_s", "2.5", "--tls_ca", "/ca"}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_nodes, 3);
  EXPECT_EQ(o->node_rank, 2);
  EXPECT_EQ(o->master_addr, "node0.example:7000");
  EXPECT_EQ(o->node_addr, "10.1.2.3");
  EXPECT_DOUBLE_EQ(o->master_wait_s, 2.5);
}

// Each node would make a CA of its own, and no node would trust another's processes.
TEST(LaunchNodeOptionsTest, SeveralMachinesNeedTheJobsCaOrInsecure) {
  ExpectInvalid({"--nnodes", "2", "--master_addr", "h:1"}, "--tls_ca DIR");
  absl::FlagSaver saver;
  auto o = ParseLaunchFlags(Args({"--nnodes", "2", "--master_addr", "h:1", "--tls_ca", "/job/ca"}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tls_ca, "/job/ca");
  EXPECT_FALSE(o->insecure);
}

TEST(LaunchNodeOptionsTest, OneMachineByDefault) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ParseLaunchFlags(Args({"--nnodes", "2", "--node_rank", "1", "--master_addr", "h:1", "--insecure"})).ok());
  auto o = ParseLaunchFlags(Args({}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_nodes, 1);
  EXPECT_EQ(o->node_rank, 0);
  EXPECT_TRUE(o->master_addr.empty());
  EXPECT_TRUE(o->node_addr.empty());
  EXPECT_DOUBLE_EQ(o->master_wait_s, 60);
  EXPECT_EQ(o->replicas, 1);  // copies on one machine would share its fate
  // --node_rank 0 of one node is the default spelled out.
  EXPECT_TRUE(ParseLaunchFlags(Args({"--nnodes", "1", "--node_rank", "0"})).ok());
}

// On several machines a shard has two copies by default, one on each of two of them;
// --replicas says otherwise, on one machine or several.
TEST(LaunchNodeOptionsTest, TwoCopiesOfEveryShardOnSeveralMachinesByDefault) {
  absl::FlagSaver saver;
  const std::vector<std::string> two_nodes = {"--nnodes", "2", "--master_addr", "h:1", "--insecure"};
  auto o = ParseLaunchFlags(Args(two_nodes));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->replicas, 2);
  std::vector<std::string> one_copy = two_nodes;
  one_copy.insert(one_copy.end(), {"--replicas", "1"});
  o = ParseLaunchFlags(Args(one_copy));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->replicas, 1);
  o = ParseLaunchFlags(Args({"--replicas", "3"}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->replicas, 3);
  ExpectInvalid({"--replicas", "-1"}, "--replicas: -1 is below the minimum 0");
}

TEST(LaunchNodeOptionsTest, RejectsBadNodeFlagsNamingThem) {
  ExpectInvalid({"--nnodes", "0"}, "--nnodes: 0 is below the minimum 1");
  ExpectInvalid({"--nnodes", "2", "--node_rank", "2", "--master_addr", "h:7000"},
                "--node_rank: 2 is not in [0, 2) (--nnodes 2)");
  ExpectInvalid({"--nnodes", "2", "--node_rank", "-1", "--master_addr", "h:7000"}, "--node_rank: -1 is not in [0, 2)");
  ExpectInvalid({"--node_rank", "1"}, "--node_rank: 1 is not in [0, 1) (--nnodes 1)");
  ExpectInvalid({"--nnodes", "2"}, "--master_addr HOST:PORT is required with --nnodes 2");
  for (const char* bad : {"node0", "node0:0", ":7000", "node0:65536", "node0:port", "a:b:7000"}) {
    ExpectInvalid({"--nnodes", "2", "--master_addr", bad},
                  absl::StrCat("--master_addr: '", bad, "' is not HOST:PORT with a port in [1, 65535]"));
  }
  ExpectInvalid({"--nnodes", "2", "--master_addr", "h:1", "--master_wait_s", "0"}, "--master_wait_s: 0 is not > 0");
  // A one-machine job takes none of the multi-machine flags rather than ignoring them.
  ExpectInvalid({"--master_addr", "h:7000"}, "--master_addr is for a job on several machines (--nnodes > 1)");
  ExpectInvalid({"--node_addr", "10.0.0.2"}, "--node_addr is for a job on several machines");
  ExpectInvalid({"--master_wait_s", "5"}, "--master_wait_s is for a job on several machines");
  ExpectInvalid({"--etcd_port", "2400"}, "--etcd_port is for a job on several machines");
  // Several masters: 3 or more on distinct nodes, no more than the job has.
  ExpectInvalid({"--nnodes", "3", "--master_addr", "a:1,b:1"}, "2 masters survive the loss of neither");
  ExpectInvalid({"--nnodes", "2", "--master_addr", "a:1,b:1,c:1"}, "names 3 masters but the job has 2 nodes");
  ExpectInvalid({"--nnodes", "3", "--master_addr", "a:1,b:1,a:2"}, "host a appears twice");
  ExpectInvalid({"--nnodes", "3", "--master_addr", "a:1,b,c:1"}, "--master_addr: 'b' is not HOST:PORT");
  ExpectInvalid({"--nnodes", "3", "--master_addr", "a:1,b:1,c:1", "--etcd_port", "65535"}, "--etcd_port");
}

TEST(NodeRoleTest, ParsesSeveralMastersInOrder) {
  auto masters = ParseMasterAddrs("10.0.0.1:7000, 10.0.0.2:7001,10.0.0.3:7000", 3);
  ASSERT_TRUE(masters.ok()) << masters.status();
  ASSERT_EQ(masters->size(), 3u);
  EXPECT_EQ((*masters)[1].host, "10.0.0.2");
  EXPECT_EQ((*masters)[1].port, 7001);
  auto one = ParseMasterAddrs("10.0.0.1:7000", 4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST(NodeRoleTest, ParsesHostPort) {
  auto hp = ParseHostPort("master_addr", "10.0.0.1:7000");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "10.0.0.1");
  EXPECT_EQ(hp->port, 7000);
}

TEST(NodeRoleTest, OneNodeRanksAreTheOneMachineRanks) {
  for (int k = 0; k < 10; ++k) EXPECT_EQ(TrainerRank(1, 0, 3, k), k);
}

TEST(NodeRoleTest, RanksAreBlocksPerNodeThenInterleavedAndNeverCollide) {
  constexpr int kNodes = 3, kPerNode = 2;
  EXPECT_EQ(TrainerRank(kNodes, 0, kPerNode, 0), 0);
  EXPECT_EQ(TrainerRank(kNodes, 1, kPerNode, 1), 3);
  EXPECT_EQ(TrainerRank(kNodes, 2, kPerNode, 0), 4);
  // Added trainers continue after the N*T started ones, one node after another.
  EXPECT_EQ(TrainerRank(kNodes, 0, kPerNode, 2), 6);
  EXPECT_EQ(TrainerRank(kNodes, 1, kPerNode, 2), 7);
  EXPECT_EQ(TrainerRank(kNodes, 2, kPerNode, 3), 11);
  std::set<int> seen;
  for (int node = 0; node < kNodes; ++node) {
    for (int k = 0; k < 50; ++k) EXPECT_TRUE(seen.insert(TrainerRank(kNodes, node, kPerNode, k)).second);
  }
  EXPECT_EQ(*seen.rbegin(), kNodes * 50 - 1);  // dense: no rank skipped
}

TEST(NodeRoleTest, NamesBothNodeCountsWhenTheyDiffer) {
  proto::JobStatusResponse status;
  status.set_num_nodes(2);
  EXPECT_TRUE(CheckJobNodes({2, 1, 1}, status).ok());
  Status s = CheckJobNodes({3, 1, 1}, status);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "--nnodes 3 on this node, but the job's master (node 0) was started with --nnodes 2");
  status.clear_num_nodes();  // a master that does not say: one node
  EXPECT_TRUE(CheckJobNodes({1, 1, 1}, status).ok());
  EXPECT_FALSE(CheckJobNodes({2, 1, 1}, status).ok());
}

// Nodes that disagree on the pservers per node or the copies of a shard would leave
// shards without their pserver or copies on no machine: refused, naming both values.
TEST(NodeRoleTest, NamesBothPserverAndReplicaCountsWhenTheyDiffer) {
  proto::JobStatusResponse status;
  status.set_num_nodes(3);
  status.set_num_pservers(6);
  status.set_replicas(2);
  EXPECT_TRUE(CheckJobNodes({3, 2, 2}, status).ok());
  Status s = CheckJobNodes({3, 1, 2}, status);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "--pservers 1 on this node, but the job's master (node 0) was started for 6 pservers in "
                         "all (--pservers 2 on each of the 3 nodes)");
  s = CheckJobNodes({3, 2, 1}, status);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "--replicas 1 on this node, but the job's master (node 0) was started with --replicas 2");
  status.clear_num_pservers();  // an older master: not checked
  status.clear_replicas();
  EXPECT_TRUE(CheckJobNodes({3, 1, 1}, status).ok());
}

// With --replicas K the copies of each shard are on K different nodes (while K <= N),
// every node runs P*K copies, and one node runs everything of a one-node job.
TEST(NodeRoleTest, CopiesOfAShardAreOnDifferentNodes) {
  for (int nodes : {1, 2, 3, 4}) {
    for (int per_node : {1, 2, 3}) {
      for (int replicas = 1; replicas <= nodes; ++replicas) {
        std::map<int, std::set<int>> nodes_of_shard;  // pserver index -> nodes with a copy
        for (int node = 0; node < nodes; ++node) {
          const std::vector<ShardCopy> copies = ShardCopiesOnNode(nodes, node, per_node, replicas);
          EXPECT_EQ(static_cast<int>(copies.size()), per_node * replicas) << nodes << " " << per_node;
          for (const ShardCopy& c : copies) {
            EXPECT_EQ(NodeOfShardCopy(nodes, per_node, c.index, c.replica), node);
            EXPECT_TRUE(nodes_of_shard[c.index].insert(node).second)
                << "two copies of pserver " << c.index << " on node " << node;
          }
        }
        ASSERT_EQ(static_cast<int>(nodes_of_shard.size()), nodes * per_node);
        for (const auto& [index, on] : nodes_of_shard) {
          EXPECT_EQ(static_cast<int>(on.size()), replicas);
          EXPECT_TRUE(on.count(index / per_node)) << "copy 0 of pserver " << index << " is not on its home node";
        }
      }
    }
  }
  // The shape of docs/several-machines.md's example: 3 nodes, 1 pserver each, 2 copies.
  std::vector<ShardCopy> node1 = ShardCopiesOnNode(3, 1, 1, 2);
  ASSERT_EQ(node1.size(), 2u);
  EXPECT_EQ(node1[0].index, 0);  // pserver 0's second copy
  EXPECT_EQ(node1[0].replica, 1);
  EXPECT_EQ(node1[1].index, 1);  // its own pserver's first
  EXPECT_EQ(node1[1].replica, 0);
}

TEST(NodeRoleTest, LocalAddressTowardsLoopbackIsLoopback) {
  auto a = LocalAddressTowards("127.0.0.1", 7000);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_TRUE(IsLoopbackAddress(*a));
  EXPECT_TRUE(IsLoopbackAddress("127.3.4.5"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("not an address"));
  auto none = LocalAddressTowards("no-such-host.invalid", 7000);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("'no-such-host.invalid'"));
}

// Fake pl-master, pl-pserver and pl-trainer in `dir` (Validate only looks for them).
void FakeBinaries(const std::string& dir) {
  for (const char* name : {"pl-master", "pl-pserver", "pl-trainer"}) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << "#!/bin/sh\nexit 0\n";
    ::chmod(path.c_str(), 0755);
  }
}

// Options made in code (not from flags) are checked too.
TEST(LauncherNodeTest, ValidateChecksTheNodeRankAndMasterAddress) {
  testing::TempDir dir;
  FakeBinaries(dir.path());
  LaunchOptions o;
  o.num_pservers = o.num_trainers = 1;
  o.num_nodes = 2;
  o.bin_dir = dir.path();
  o.trainer_command = {"pl-trainer"};
  auto sink = [](const std::string&) {};
  o.node_rank = 2;
  o.master_addr = "h:7000";
  EXPECT_EQ(Launcher(o, sink).Validate().code(), absl::StatusCode::kInvalidArgument);
  o.node_rank = 1;
  o.master_addr = "h";
  EXPECT_EQ(Launcher(o, sink).Validate().code(), absl::StatusCode::kInvalidArgument);
  o.master_addr = "h:7000";
  EXPECT_TRUE(Launcher(o, sink).Validate().ok());
}

// A node other than 0 whose master never answers gives up after --master_wait_s, with
// one line naming the address, and starts nothing.
TEST(LauncherNodeTest, UnreachableMasterFailsAfterTheWait) {
  testing::TempDir dir;
  FakeBinaries(dir.path());
  LaunchOptions o;
  o.num_pservers = 1;
  o.num_trainers = 1;
  o.num_nodes = 2;
  o.node_rank = 1;
  o.master_addr = "127.0.0.1:1";  // nothing listens on port 1
  o.master_wait_s = 1;
  o.bin_dir = dir.path();
  o.workdir = dir.path() + "/work";
  o.trainer_command = {"pl-trainer"};
  std::vector<std::string> lines;
  Launcher launcher(o, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(launcher.Validate().ok());
  const auto start = std::chrono::steady_clock::now();
  Status s = launcher.Run();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("the job's master at 127.0.0.1:1 did not answer within 1 s (--master_wait_s)"));
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  EXPECT_GE(took, milliseconds(900));
  EXPECT_LT(took, milliseconds(5000));
  for (const std::string& line : lines) EXPECT_THAT(line, ::testing::Not(HasSubstr("started ")));
}

// The real binary: --node_rank out of range is a usage error (exit 2, one line).
TEST(LaunchNodeBinaryTest, NodeRankOutOfRangeExitsTwo) {
  auto launch = testing::BinaryPath("pl-launch");
  if (!launch.ok()) GTEST_SKIP() << launch.status();
  testing::TempDir dir;
  auto child = testing::Spawn({*launch, "--nnodes", "2", "--node_rank", "5", "--master_addr", "h:7000", "--pservers",
                               "1", "--trainers", "1", "--", "true"},
                              dir.path() + "/out");
  ASSERT_TRUE(child.ok()) << child.status();
  auto exit = testing::WaitForExit(**child, milliseconds(10000));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 2);
  const std::string text = testing::ReadFileOrEmpty(dir.path() + "/out");
  EXPECT_THAT(text, HasSubstr("--node_rank: 5 is not in [0, 2)"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

}  // namespace
}  // namespace pl
