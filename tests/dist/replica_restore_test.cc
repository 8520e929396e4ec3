// A replicated shard that loses both replicas with no checkpoint comes back from the
// seed; the first trainer whose copy had learned gives it its dense values back (issue
// 40). The primary forwards them to its backup in its stream, so the backup promoted
// after the primary's next death serves those values, and the master's loss line says
// they came back.
#include <signal.h>

#include <cstring>

#include <gtest/gtest.h>

#include "tests/dist/one_replicated_shard.h"

namespace pl::dist_testing {
namespace {

class ReplicaRestoreTest : public OneReplicatedShardTest {
 protected:
  static constexpr int kFloats = 20;

  static proto::InitRequest ModelInit(int64_t learned) {
    proto::InitRequest req;
    proto::ParamSpec* p = req.add_params();
    p->set_name("w");
    p->set_kind(proto::ParamSpec::DENSE);
    p->add_shape(kFloats);
    p->set_block_size(8);
    req.mutable_optimizer()->set_name("sgd");
    req.mutable_optimizer()->set_learning_rate(0.5f);
    req.set_seed(5);
    req.set_learned_version(learned);
    return req;
  }
  static std::vector<float> Learned() {
    std::vector<float> v(kFloats);
    for (int i = 0; i < kFloats; ++i) v[i] = 0.25f * i - 2.0f;
    return v;
  }
  static proto::InitRequest Restore(uint64_t ticket) {
    proto::InitRequest req;
    req.set_restore_ticket(ticket);
    req.set_learned_version(7);
    const std::vector<float> v = Learned();
    for (int b = 0; b * 8 < kFloats; ++b) {
      proto::DenseBlock* block = req.add_restore();
      block->set_param("w");
      block->set_block(b);
      const int n = std::min(8, kFloats - b * 8);
      block->set_values(std::string(reinterpret_cast<const char*>(v.data() + b * 8), n * 4));
    }
    return req;
  }
  // Tells the master a replica died, as pl-launch does when it reaps one.
  void Exited(const std::string& name) {
    proto::ReplicaExitedRequest exited;
    exited.set_index(0);
    exited.set_replica_id(ReplicaId(name));
    exited.set_why("killed by the test");
    proto::ReplicaExitedResponse known;
    auto master = proto::Master::NewStub(rpc::MakeChannel(master_address_));
    ASSERT_TRUE(master->ReplicaExited(rpc::MakeContext(std::chrono::seconds(5)).get(), exited, &known).ok());
  }
  StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& name) {
    pserver_flags_ = {"--replica_id_file", Path(name + ".id")};
    return StartPserver(name, master_address_);
  }
  int MasterLogCount(const std::string& text) {
    const std::string log = testing::ReadFileOrEmpty(Path("master.log"));
    int n = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  }
};

TEST_F(ReplicaRestoreTest, BothReplicasLostThenATrainersCopyReachesTheBackupAndTheLossLine) {
  ASSERT_TRUE(StartMaster(/*pserver_lease_ms=*/800).ok());
  auto a = Start("ps-a");
  ASSERT_TRUE(a.ok()) << a.status();
  primary_ = *std::move(a);
  ASSERT_TRUE(MasterLogSays("is the primary", std::chrono::seconds(20)));
  auto b = Start("ps-b");
  ASSERT_TRUE(b.ok()) << b.status();
  backup_ = *std::move(b);
  ASSERT_TRUE(MasterLogSays("now a backup in sync", std::chrono::seconds(20)));
  auto first = proto::ParameterServer::NewStub(rpc::MakeChannel(PrimaryAddress()));
  proto::InitResponse init;
  ASSERT_TRUE(first->Init(rpc::MakeContext(std::chrono::seconds(10), true).get(), ModelInit(0), &init).ok());
  EXPECT_EQ(init.restore_ticket(), 0u) << "a new job's shard takes no copy";
  proto::PushRequest push;
  push.set_trainer_id(1);
  push.set_client_id(42);
  push.set_push_id(1);
  proto::DenseBlock* g = push.add_dense();
  g->set_param("w");
  g->set_block(0);
  const std::vector<float> ones(8, 1.0f);
  g->set_values(std::string(reinterpret_cast<const char*>(ones.data()), 32));
  proto::PushResponse pushed;
  ASSERT_TRUE(first->Push(rpc::MakeContext(std::chrono::seconds(10), true).get(), push, &pushed).ok());

  // Both copies go at once; two fresh processes come back, with no checkpoint.
  ASSERT_TRUE(primary_->Signal(SIGKILL).ok());
  ASSERT_TRUE(backup_->Signal(SIGKILL).ok());
  ASSERT_NO_FATAL_FAILURE(Exited("ps-a"));
  ASSERT_NO_FATAL_FAILURE(Exited("ps-b"));
  auto c = Start("ps-c");
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = Start("ps-d");
  ASSERT_TRUE(d.ok()) << d.status();
  primary_ = *std::move(c);
  backup_ = *std::move(d);
  ASSERT_TRUE(MasterLogSays("restores no checkpoint", std::chrono::seconds(20)))
      << testing::ReadFileOrEmpty(Path("master.log"));
  std::string address;
  ASSERT_TRUE(testing::WaitUntil([&] { return !(address = PrimaryAddress()).empty(); }, std::chrono::seconds(20)));
  // The other joins first (from the empty primary's snapshot), so that the Init and the
  // restore reach it through the primary's stream.
  ASSERT_TRUE(testing::WaitUntil([&] { return MasterLogCount("now a backup in sync") >= 2; }, std::chrono::seconds(20)))
      << testing::ReadFileOrEmpty(Path("master.log"));

  // The trainer whose copy had learned (version 7) gets the ticket and sends its copy.
  auto second = proto::ParameterServer::NewStub(rpc::MakeChannel(address));
  grpc::Status st;
  for (int attempt = 0; attempt < 100; ++attempt) {  // until the new primary serves
    st = second->Init(rpc::MakeContext(std::chrono::seconds(10), true).get(), ModelInit(7), &init);
    if (st.ok() || st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_NE(init.restore_ticket(), 0u);
  proto::InitResponse restored;
  st = second->Init(rpc::MakeContext(std::chrono::seconds(10), true).get(), Restore(init.restore_ticket()), &restored);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(restored.restored());
  ASSERT_TRUE(MasterLogSays("a trainer then gave it its copy of the dense values (version 7)", std::chrono::seconds(10)))
      << testing::ReadFileOrEmpty(Path("master.log"));

  // The primary goes; its backup, promoted, serves the trainer's copy.
  const std::string old = address;
  ASSERT_TRUE(primary_->Signal(SIGKILL).ok());
  ASSERT_NO_FATAL_FAILURE(Exited("ps-c"));
  const std::string promoted = NewPrimaryAddress(old, std::chrono::seconds(20));
  ASSERT_FALSE(promoted.empty()) << testing::ReadFileOrEmpty(Path("master.log"));
  auto third = proto::ParameterServer::NewStub(rpc::MakeChannel(promoted));
  proto::PullRequest pull;
  for (int block = 0; block < 3; ++block) {
    proto::DenseBlock* want = pull.add_dense();
    want->set_param("w");
    want->set_block(block);
  }
  proto::PullResponse got;
  for (int attempt = 0; attempt < 100; ++attempt) {
    st = third->Pull(rpc::MakeContext(std::chrono::seconds(10), true).get(), pull, &got);
    if (st.ok() || st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<float> values;
  for (const proto::DenseBlock& block : got.dense()) {
    const size_t at = values.size();
    values.resize(at + block.values().size() / 4);
    std::memcpy(values.data() + at, block.values().data(), block.values().size());
  }
  EXPECT_EQ(values, Learned()) << testing::ReadFileOrEmpty(Path("ps-d.log"));
}

}  // namespace
}  // namespace pl::dist_testing
