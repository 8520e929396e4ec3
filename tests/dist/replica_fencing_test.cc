// No split brain, and a clean hand-over. A primary cut off from the master (its only way there, a relay, stops
// moving bytes) but still reachable by a trainer stops taking pushes once its lease is
// over, and the master promotes the backup, which holds every push the old primary
// acknowledged. When the link heals, the old primary is told it was taken out and
// exits with that cause. A primary or backup that is SIGTERMed (preempted) leaves the
// shard at once instead. Real pl-master and pl-pserver processes on 127.0.0.1; the
// trainer is a plain client of the ParameterServer service.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/cluster.h"
#include "tests/dist/one_replicated_shard.h"
#include "paddle_like/testing/process.h"
#include "tests/testing/tcp_relay.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kLeaseMs = 1000;

class ReplicaFencingTest : public OneReplicatedShardTest {
 protected:
  static proto::InitRequest Init() {
    proto::InitRequest req;
    proto::ParamSpec* w = req.add_params();
    w->set_name("w");
    w->set_kind(proto::ParamSpec::DENSE);
    w->add_shape(8);
    w->set_block_size(8);
    req.mutable_optimizer()->set_name("sgd");
    req.mutable_optimizer()->set_learning_rate(0.5f);
    req.set_seed(3);
    return req;
  }

  static proto::PushRequest Push(int64_t id) {
    proto::PushRequest req;
    req.set_trainer_id(1);
    req.set_client_id(77);
    req.set_push_id(id);
    req.set_num_samples(1);
    proto::DenseBlock* b = req.add_dense();
    b->set_param("w");
    b->set_block(0);
    std::vector<float> g(8, 0.25f * id);
    b->set_values(g.data(), g.size() * 4);
    return req;
  }

  // Init and pushes 1..3 through `stub` (each acknowledged); returns w as pulled after.
  static StatusOr<std::vector<float>> InitAndPushThree(proto::ParameterServer::Stub* stub) {
    proto::InitResponse init;
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Init(rpc::MakeContext(std::chrono::seconds(5)).get(), Init(), &init)));
    for (int64_t id = 1; id <= 3; ++id) {
      proto::PushResponse resp;
      PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(id), &resp)));
    }
    return PullW(stub);
  }

  // The master (pserver lease `lease_ms`), ps-a the primary and ps-b its backup in
  // sync, then Init and pushes 1..3 acknowledged. Sets primary_address_; returns w.
  StatusOr<std::vector<float>> StartAndPushThree(int64_t lease_ms) {
    PL_RETURN_IF_ERROR(StartMaster(lease_ms));
    PL_ASSIGN_OR_RETURN(primary_address_, StartPrimaryAndBackup(master_address_));
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary_address_));
    return InitAndPushThree(stub.get());
  }

  static StatusOr<std::vector<float>> PullW(proto::ParameterServer::Stub* stub) {
    proto::PullRequest req;
    req.add_dense()->set_param("w");
    proto::PullResponse resp;
    auto ctx = rpc::MakeContext(std::chrono::seconds(3));
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Pull(ctx.get(), req, &resp)));
    if (resp.dense_size() != 1 || resp.dense(0).values().size() != 32) return absl::DataLossError("bad pull");
    std::vector<float> w(8);
    std::memcpy(w.data(), resp.dense(0).values().data(), 32);
    return w;
  }

  std::string primary_address_;
};

TEST_F(ReplicaFencingTest, PrimaryCutOffFromTheMasterRefusesPushesAndTheBackupTakesOverWithThem) {
  ASSERT_TRUE(StartMaster(kLeaseMs).ok());
  // The primary (the first to register) reaches the master only through the relay.
  auto relay = testing::TcpRelay::Start(master_port_);
  ASSERT_TRUE(relay.ok()) << relay.status();
  auto started = StartPrimaryAndBackup(absl::StrCat("127.0.0.1:", (*relay)->port()));
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));

  auto acknowledged = InitAndPushThree(stub.get());
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();

  // Cut off from the master: after its lease the primary refuses, though it is reachable.
  (*relay)->Cut();
  std::this_thread::sleep_for(std::chrono::milliseconds(kLeaseMs + 300));
  proto::PushResponse refused_resp;
  grpc::Status refused = stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(4), &refused_resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("lease ran out"));

  // The master promoted the backup, which has all three acknowledged pushes and not
  // the refused one; once the link heals the old primary learns it was taken out.
  const std::string next = NewPrimaryAddress(primary, std::chrono::seconds(20));
  ASSERT_FALSE(next.empty())
      << testing::ReadFileOrEmpty(Path("master.log"));
  (*relay)->Heal();
  auto new_stub = proto::ParameterServer::NewStub(rpc::MakeChannel(next));
  auto taken_over = PullW(new_stub.get());
  ASSERT_TRUE(taken_over.ok()) << taken_over.status();
  EXPECT_EQ(*taken_over, *acknowledged);
  auto exit = testing::WaitForExit(*primary_, std::chrono::seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_FALSE(exit->success());
  EXPECT_THAT(testing::ReadFileOrEmpty(Path("ps-a.log")), HasSubstr("the master took this replica out of shard 0"));
  // A retry of an acknowledged push is not applied again on the new primary.
  proto::PushResponse again;
  ASSERT_TRUE(new_stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(3), &again).ok());
  auto after_retry = PullW(new_stub.get());
  ASSERT_TRUE(after_retry.ok());
  EXPECT_EQ(*after_retry, *acknowledged);
}

// A backup the master has just promoted hears of it at its next heartbeat; a trainer
// that learned it first from the master is served at once, not refused until then.
// The replicas heartbeat every 2 s here, so without that the push below would be
// refused ("not the primary") all but always.
TEST_F(ReplicaFencingTest, APromotedBackupServesTheFirstPushBeforeItsNextHeartbeat) {
  pserver_flags_ = {"--heartbeat_ms", "2000"};
  auto acknowledged = StartAndPushThree(10000);
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();
  const std::string primary = primary_address_;

  ASSERT_TRUE(primary_->Signal(SIGTERM).ok());  // hands over: the master promotes at once
  const std::string next = NewPrimaryAddress(primary, std::chrono::seconds(5));
  ASSERT_FALSE(next.empty())
      << testing::ReadFileOrEmpty(Path("master.log"));
  auto new_stub = proto::ParameterServer::NewStub(rpc::MakeChannel(next));
  proto::PushResponse resp;
  grpc::Status pushed = new_stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(4), &resp);
  EXPECT_TRUE(pushed.ok()) << pushed.error_message() << "\n" << testing::ReadFileOrEmpty(Path("ps-b.log"));
  EXPECT_THAT(testing::ReadFileOrEmpty(Path("ps-b.log")), HasSubstr("this replica is now the primary"));
}

// A heartbeat period near the master's lease would lose the lease on the first late
// heartbeat, again and again: the replica refuses to start, naming both values.
TEST_F(ReplicaFencingTest, AHeartbeatTooSlowForTheLeaseIsRefusedNamingBoth) {
  pserver_flags_ = {"--heartbeat_ms", "500"};
  ASSERT_TRUE(StartMaster(800).ok());
  auto ps = StartPserver("ps-a", master_address_);
  ASSERT_TRUE(ps.ok()) << ps.status();
  auto exit = testing::WaitForExit(**ps, std::chrono::seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_FALSE(exit->success());
  const std::string log = testing::ReadFileOrEmpty(Path("ps-a.log"));
  EXPECT_THAT(log, HasSubstr("--heartbeat_ms 500 is too slow for the master's pserver lease of 800 ms")) << log;
}

// Preemption: SIGTERM, not SIGKILL. The primary hands over (its backup holds every push
// it acknowledged) and tells the master, which promotes the backup at once, long
// before the primary's lease (10 s here) could have run out; a retried push counts
// once. Then the new primary's backup is SIGTERMed: it leaves the shard at once, so the
// next push is not held waiting for its acknowledgement until its lease runs out.
TEST_F(ReplicaFencingTest, ASigtermedPrimaryHandsOverAtOnceAndALeavingBackupHoldsNoPush) {
  constexpr int64_t kLongLeaseMs = 10000;
  auto acknowledged = StartAndPushThree(kLongLeaseMs);
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();
  const std::string primary = primary_address_;

  const auto term = std::chrono::steady_clock::now();
  ASSERT_TRUE(primary_->Signal(SIGTERM).ok());
  const std::string next = NewPrimaryAddress(primary, std::chrono::seconds(5));
  ASSERT_FALSE(next.empty())
      << "no promotion within 5 s (the lease is 10 s)\n" << testing::ReadFileOrEmpty(Path("master.log"))
      << testing::ReadFileOrEmpty(Path("ps-a.log"));
  std::cout << "[measured] SIGTERM -> promotion "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - term).count() << " s (lease "
            << kLongLeaseMs / 1000 << " s)" << std::endl;
  auto exit = testing::WaitForExit(*primary_, std::chrono::seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->success()) << exit->Describe();
  EXPECT_THAT(testing::ReadFileOrEmpty(Path("ps-a.log")), HasSubstr("left the shard (primary"));
  EXPECT_THAT(testing::ReadFileOrEmpty(Path("master.log")),
              HasSubstr("its primary is gone (it is shutting down)"));
  auto new_stub = proto::ParameterServer::NewStub(rpc::MakeChannel(next));
  auto taken_over = PullW(new_stub.get());
  ASSERT_TRUE(taken_over.ok()) << taken_over.status();
  EXPECT_EQ(*taken_over, *acknowledged);
  proto::PushResponse again;
  ASSERT_TRUE(new_stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(3), &again).ok());
  auto after_retry = PullW(new_stub.get());
  ASSERT_TRUE(after_retry.ok());
  EXPECT_EQ(*after_retry, *acknowledged) << "a retried push was applied twice";

  // A new backup joins the promoted primary; then it is SIGTERMed.
  auto third = StartPserver("ps-c", master_address_);
  ASSERT_TRUE(third.ok()) << third.status();
  std::unique_ptr<ChildProcess> backup = std::move(*third);
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return CountOf(testing::ReadFileOrEmpty(Path("master.log")), "now a backup in sync") >= 2; },
      std::chrono::seconds(20)))
      << testing::ReadFileOrEmpty(Path("master.log")) << "ps-b (the new primary):\n"
      << testing::ReadFileOrEmpty(Path("ps-b.log")) << "ps-c:\n" << testing::ReadFileOrEmpty(Path("ps-c.log"));
  ASSERT_TRUE(backup->Signal(SIGTERM).ok());
  auto backup_exit = testing::WaitForExit(*backup, std::chrono::seconds(20));
  ASSERT_TRUE(backup_exit.ok()) << backup_exit.status();
  EXPECT_TRUE(backup_exit->success()) << backup_exit->Describe();
  // Acknowledged within 5 s: not held for the leaving backup's 10 s lease.
  proto::PushResponse after_backup_left;
  grpc::Status st = new_stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(4), &after_backup_left);
  EXPECT_TRUE(st.ok()) << st.error_message() << "\n" << testing::ReadFileOrEmpty(Path("master.log"));
  EXPECT_THAT(testing::ReadFileOrEmpty(Path("master.log")), HasSubstr("exited (it is shutting down)"));
}

}  // namespace
}  // namespace pl::dist_testing
