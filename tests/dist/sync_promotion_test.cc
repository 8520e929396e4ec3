// A replica the master promotes before it heard that it was a backup (it still counts
// itself a joiner) must act as a sync shard's primary all the same: finish the open
// step and every step after. It used to stay a follower whose barrier never ends a step,
// so every sync step waited out the trainers' 30 s call deadline (issue 40's "one step
// every 30 s"). The replicas heartbeat every 2 s, so the kill lands, and the launcher's
// ReplicaExited report promotes the replica, before it hears it is a backup.
#include <signal.h>


#include <gtest/gtest.h>

#include "tests/dist/one_replicated_shard.h"

namespace pl::dist_testing {
namespace {

class SyncPromotionTest : public OneReplicatedShardTest {
 protected:
  static proto::InitRequest SyncInit() {
    proto::InitRequest req;
    proto::ParamSpec* p = req.add_params();
    p->set_name("w");
    p->set_kind(proto::ParamSpec::DENSE);
    p->add_shape(8);
    p->set_block_size(8);
    req.mutable_optimizer()->set_name("sgd");
    req.mutable_optimizer()->set_learning_rate(0.5f);
    req.set_seed(5);
    req.set_sync(true);
    return req;
  }
  static proto::PushRequest Step(int64_t step) {
    proto::PushRequest req;
    req.set_trainer_id(1);
    req.set_step(step);
    req.set_client_id(42);
    req.set_push_id(step + 1);
    proto::DenseBlock* b = req.add_dense();
    b->set_param("w");
    b->set_block(0);
    const std::vector<float> g(8, 1.0f);
    b->set_values(std::string(reinterpret_cast<const char*>(g.data()), g.size() * 4));
    return req;
  }
};

TEST_F(SyncPromotionTest, AJoinerPromotedBeforeItHeardItWasABackupFinishesSyncSteps) {
  ASSERT_TRUE(StartMaster(/*pserver_lease_ms=*/5000).ok());
  pserver_flags_ = {"--heartbeat_ms", "2000", "--replica_id_file", Path("ps-a.id")};
  auto primary = StartPserver("ps-a", master_address_);
  ASSERT_TRUE(primary.ok()) << primary.status();
  primary_ = *std::move(primary);
  ASSERT_TRUE(MasterLogSays("is the primary", std::chrono::seconds(20)));
  auto a = proto::ParameterServer::NewStub(rpc::MakeChannel(PrimaryAddress()));
  proto::InitResponse init;
  ASSERT_TRUE(a->Init(rpc::MakeContext(std::chrono::seconds(10), true).get(), SyncInit(), &init).ok());
  proto::PushResponse pushed;
  ASSERT_TRUE(a->Push(rpc::MakeContext(std::chrono::seconds(10), true).get(), Step(0), &pushed).ok());

  pserver_flags_ = {"--heartbeat_ms", "2000"};
  auto joiner = StartPserver("ps-b", master_address_);
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  backup_ = *std::move(joiner);
  // A sync primary snapshots a joiner at the end of a step: step on until it is in sync.
  int64_t step = 1;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (testing::ReadFileOrEmpty(Path("master.log")).find("now a backup in sync") == std::string::npos) {
    ASSERT_LT(absl::Now(), give_up) << testing::ReadFileOrEmpty(Path("master.log"));
    ASSERT_TRUE(a->Push(rpc::MakeContext(std::chrono::seconds(10), true).get(), Step(step++), &pushed).ok());
    absl::SleepFor(absl::Milliseconds(20));
  }
  // At once, as pl-launch does when it reaps a primary: the master promotes ps-b now.
  ASSERT_TRUE(primary_->Signal(SIGKILL).ok());
  proto::ReplicaExitedRequest exited;
  exited.set_index(0);
  exited.set_replica_id(ReplicaId("ps-a"));
  exited.set_why("killed by the test");
  proto::ReplicaExitedResponse known;
  auto master = proto::Master::NewStub(rpc::MakeChannel(master_address_));
  ASSERT_TRUE(master->ReplicaExited(rpc::MakeContext(std::chrono::seconds(5)).get(), exited, &known).ok());
  ASSERT_TRUE(known.known());
  ASSERT_TRUE(MasterLogSays("promoted to primary", std::chrono::seconds(10)));

  // Two more steps on the new primary: each push answered, each step finished in time.
  auto b = proto::ParameterServer::NewStub(rpc::MakeChannel(PrimaryAddress()));
  for (const int64_t last = step + 2; step < last; ++step) {
    grpc::Status st;
    for (int attempt = 0; attempt < 100; ++attempt) {  // until it has heard it leads
      st = b->Push(rpc::MakeContext(std::chrono::seconds(5), true).get(), Step(step), &pushed);
      if (st.ok() || st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(st.ok()) << st.error_message();
    proto::PullRequest pull;
    pull.add_dense()->set_param("w");
    pull.set_min_version(step + 1);
    proto::PullResponse got;
    st = b->Pull(rpc::MakeContext(std::chrono::seconds(10), true).get(), pull, &got);
    ASSERT_TRUE(st.ok()) << "step " << step << " did not finish: " << st.error_message() << "\n"
                         << testing::ReadFileOrEmpty(Path("ps-b.log"));
    EXPECT_EQ(got.version(), step + 1);
  }
}

}  // namespace
}  // namespace pl::dist_testing
