// A replicated shard whose replicas are on different hosts of the test bed (each host
// with /dev/shm of its own): the primary offers its backup shared memory, the backup
// cannot open it, and the stream's dense blocks go over a dense link between the hosts
// instead. Every update reaches the backup: promoted after the primary's SIGKILL, or
// after the loss of the primary's whole host (cut off, every process on it killed), it
// holds the primary's values bit for bit, and they are the hand-computed SGD steps.
// Hosts: 0 the master, 1 the primary, 2 the backup; the test drives the shard as a plain
// client of the ParameterServer service.
#include <signal.h>

#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/dist/one_replicated_shard.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {
namespace {

using ::pl::netbed::TestBed;
using ::testing::HasSubstr;

constexpr int64_t kN = 8192;
constexpr float kLr = 0.5f;
constexpr int kPushes = 5;

// The failure under test: true, the primary's host is lost; false, its process killed.
class ReplicasAcrossHostsTest : public OneReplicatedShardTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    OneReplicatedShardTest::SetUp();
    if (IsSkipped()) return;
    if (Status supported = TestBed::CheckSupported(); !supported.ok()) GTEST_SKIP() << supported;
    auto bed = TestBed::Create(3);
    ASSERT_TRUE(bed.ok()) << bed.status();
    bed_ = std::move(*bed);
  }
  void TearDown() override {
    // The processes before the bed that holds their hosts.
    primary_.reset();
    backup_.reset();
    master_.reset();
    bed_.reset();
  }

  int HostIndex(const std::string& name) const { return name == "master" ? 0 : name == "ps-a" ? 1 : 2; }
  std::string HostOf(const std::string& name) override { return bed_->host(HostIndex(name)).address(); }
  StatusOr<std::unique_ptr<ChildProcess>> SpawnOn(const std::string& name, const std::vector<std::string>& argv,
                                                  const std::string& log) override {
    return bed_->Start(HostIndex(name), argv, log);
  }

  static StatusOr<std::vector<float>> Pull(proto::ParameterServer::Stub* stub) {
    proto::PullRequest req;
    req.add_dense()->set_param("w");
    proto::PullResponse resp;
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Pull(rpc::MakeContext(std::chrono::seconds(5)).get(), req, &resp)));
    if (resp.dense_size() != 1 || static_cast<int64_t>(resp.dense(0).values().size()) != kN * 4) {
      return absl::DataLossError("the pull lacks w");
    }
    std::vector<float> w(kN);
    std::memcpy(w.data(), resp.dense(0).values().data(), kN * 4);
    return w;
  }

  std::unique_ptr<TestBed> bed_;
};

TEST_P(ReplicasAcrossHostsTest, TheStreamGoesOverADenseLinkAndThePromotedBackupHoldsEveryUpdate) {
  ASSERT_TRUE(StartMaster(/*pserver_lease_ms=*/1000).ok());
  auto started = StartPrimaryAndBackup(master_address_);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));
  proto::InitRequest init;
  proto::ParamSpec* p = init.add_params();
  p->set_name("w");
  p->set_kind(proto::ParamSpec::DENSE);
  p->add_shape(kN);
  p->set_block_size(kN);
  init.mutable_optimizer()->set_name("sgd");
  init.mutable_optimizer()->set_learning_rate(kLr);
  init.set_seed(5);
  proto::InitResponse inited;
  ASSERT_TRUE(stub->Init(rpc::MakeContext(std::chrono::seconds(10)).get(), init, &inited).ok());
  auto start = Pull(stub.get());
  ASSERT_TRUE(start.ok()) << start.status();

  std::vector<float> expected = *start;
  for (int id = 1; id <= kPushes; ++id) {
    proto::PushRequest push;
    push.set_trainer_id(1);
    push.set_client_id(91);
    push.set_push_id(id);
    push.set_num_samples(1);
    proto::DenseBlock* b = push.add_dense();
    b->set_param("w");
    std::vector<float> g(kN);
    for (int64_t i = 0; i < kN; ++i) g[i] = 0.25f * id * (1 + i % 3);
    b->set_values(g.data(), g.size() * 4);
    proto::PushResponse resp;
    grpc::Status st = stub->Push(rpc::MakeContext(std::chrono::seconds(10)).get(), push, &resp);
    ASSERT_TRUE(st.ok()) << "push " << id << ": " << st.error_message();
    for (int64_t i = 0; i < kN; ++i) expected[i] -= kLr * g[i];
  }
  auto acknowledged = Pull(stub.get());
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();
  for (int64_t i = 0; i < kN; ++i) ASSERT_NEAR((*acknowledged)[i], expected[i], 1e-5) << "w[" << i << "]";

  // The backup could not open the primary's memory on another host; the link took
  // every push, the Init went inline.
  proto::StatsResponse stats;
  ASSERT_TRUE(stub->Stats(rpc::MakeContext(std::chrono::seconds(5)).get(), {}, &stats).ok());
  EXPECT_EQ(stats.stream_entries_shm(), 0);
  EXPECT_EQ(stats.stream_entries_linked(), kPushes);
  EXPECT_EQ(stats.stream_entries_inline(), 1);
  const std::string primary_log = testing::ReadFileOrEmpty(Path("ps-a.log"));
  EXPECT_THAT(primary_log, HasSubstr("shares no memory with this process"));
  EXPECT_THAT(primary_log, HasSubstr("on another host, or in /dev/shm of its own"));
  EXPECT_EQ(CountOf(primary_log, "shares no memory"), 1) << "asked again: " << primary_log;

  if (GetParam()) {
    ASSERT_TRUE(bed_->Lose(HostIndex("ps-a")).ok());
  } else {
    ASSERT_TRUE(primary_->Signal(SIGKILL).ok());
  }
  ASSERT_TRUE(primary_->WaitFor(std::chrono::seconds(10)));
  const std::string next = NewPrimaryAddress(primary, std::chrono::seconds(20));
  ASSERT_FALSE(next.empty()) << testing::ReadFileOrEmpty(Path("master.log"));
  auto promoted = proto::ParameterServer::NewStub(rpc::MakeChannel(next));
  StatusOr<std::vector<float>> taken_over = absl::UnavailableError("not pulled");
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        taken_over = Pull(promoted.get());
        return taken_over.ok();
      },
      std::chrono::seconds(10)))
      << taken_over.status();
  EXPECT_EQ(*taken_over, *acknowledged);
}

INSTANTIATE_TEST_SUITE_P(Failures, ReplicasAcrossHostsTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("PrimarysHostLost") : std::string("PrimaryKilled");
                         });

}  // namespace
}  // namespace pl::dist_testing
