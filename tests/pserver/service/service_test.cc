// The gRPC service on loopback: round trip, protocol check, size limit, stats,
// checkpoints; and the membership watcher against a minimal master service.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "pserver/service/membership_watcher.h"
#include "pserver/service/pserver_service.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) / absl::StrCat("pserver_svc_", getpid())).string();
    std::filesystem::remove_all(dir_);
    checkpointer_ = std::make_unique<Checkpointer>(dir_, 0);
    service_ = std::make_unique<PserverService>(&shard_, checkpointer_.get());
    rpc::ServerOptions options;
    options.address = "127.0.0.1:0";
    options.max_message_bytes = 1 << 20;
    auto server = rpc::StartServer(options, {service_.get()}, &port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    rpc::ChannelOptions channel;
    channel.max_message_bytes = 8 << 20;  // the client may send more than the server takes
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port_), channel));
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<grpc::ClientContext> Ctx() { return rpc::MakeContext(std::chrono::seconds(5), /*wait_for_ready=*/true); }

  std::string dir_;
  ParameterShard shard_{0, 1};
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<PserverService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(ServiceTest, InitPushPullStatsAndCheckpoint) {
  proto::InitResponse init;
  auto request = MakeInit({DenseSpec("p", {3}, 3, InitSpec::Constant(1.0f)), SparseSpec("e", 2, 0, InitSpec::Zeros())},
                          Sgd(0.5f));
  ASSERT_TRUE(stub_->Init(Ctx().get(), request, &init).ok());
  EXPECT_TRUE(init.created());
  proto::PushRequest push;
  AddDense(&push, "p", 0, {2, 4, 6});
  AddRows(&push, "e", 2, {3, 9}, {2, 2, 4, 4});
  proto::PushResponse pushed;
  grpc::Status s = stub_->Push(Ctx().get(), push, &pushed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(pushed.version(), 1);

  proto::PullRequest pull;
  pull.add_dense()->set_param("p");
  auto* rows = pull.add_sparse();
  rows->set_table("e");
  rows->add_ids(9);
  rows->add_ids(4);
  proto::PullResponse got;
  s = stub_->Pull(Ctx().get(), pull, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Floats(got.dense(0).values()), ::testing::ElementsAre(0.0f, -1.0f, -2.0f));
  EXPECT_EQ(got.sparse(0).dim(), 2);
  EXPECT_THAT(Floats(got.sparse(0).values()), ::testing::ElementsAre(-2.0f, -2.0f, 0.0f, 0.0f));
  EXPECT_EQ(got.version(), 1);

  proto::CheckpointResponse ck;
  ASSERT_TRUE(stub_->Checkpoint(Ctx().get(), proto::CheckpointRequest(), &ck).ok());
  EXPECT_TRUE(std::filesystem::exists(ck.path()));

  proto::StatsResponse stats;
  ASSERT_TRUE(stub_->Stats(Ctx().get(), proto::StatsRequest(), &stats).ok());
  EXPECT_EQ(stats.version(), 1);
  EXPECT_EQ(stats.dense_elements(), 3);
  EXPECT_EQ(stats.sparse_rows(), 2);  // the pushed rows; a pull creates none
  EXPECT_EQ(stats.pushes_applied(), 1);
  EXPECT_EQ(stats.sparse_rows_pushed(), 2);
  EXPECT_EQ(stats.sparse_rows_pulled(), 2);
  EXPECT_EQ(stats.checkpoints_written(), 1);
  EXPECT_GT(stats.rss_bytes(), 1 << 20);

  // A bad push crosses the wire with its code and message.
  proto::PushRequest bad;
  AddDense(&bad, "q", 0, {1});
  s = stub_->Push(Ctx().get(), bad, &pushed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("'q'"));
}

TEST_F(ServiceTest, CallWithoutProtocolMetadataIsRefused) {
  grpc::ClientContext plain;
  plain.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  proto::StatsResponse stats;
  grpc::Status s = stub_->Stats(&plain, proto::StatsRequest(), &stats);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("pl-protocol-version"));
}

TEST_F(ServiceTest, OversizedMessageIsRefused) {
  proto::InitResponse init;
  ASSERT_TRUE(stub_->Init(Ctx().get(), MakeInit({DenseSpec("big", {1 << 19}, 1 << 19)}, Sgd(0.1f)), &init).ok());
  proto::PushRequest push;
  AddDense(&push, "big", 0, std::vector<float>(1 << 19, 1.0f));  // 2 MiB > 1 MiB limit
  proto::PushResponse resp;
  grpc::Status s = stub_->Push(Ctx().get(), push, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(shard_.version(), 0);
}

// The smallest master the watcher needs: registration and a settable live set.
class TinyMaster final : public proto::Master::Service {
 public:
  grpc::Status RegisterPserver(grpc::ServerContext* ctx, const proto::RegisterPserverRequest* req,
                               proto::RegisterPserverResponse* resp) override {
    if (auto s = rpc::CheckProtocol(ctx); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    registered_ = req->address();
    resp->set_num_pservers(1);
    resp->set_generation(++generation_);
    return grpc::Status::OK;
  }
  grpc::Status Membership(grpc::ServerContext* ctx, const proto::MembershipRequest*,
                          proto::MembershipResponse* resp) override {
    if (auto s = rpc::CheckProtocol(ctx); !s.ok()) return s;
    absl::MutexLock l(&mu_);
    for (int64_t id : live_) {
      proto::TrainerInfo* t = resp->add_trainers();
      t->set_id(id);
      t->set_task_id(100 + id);  // holding a task: takes part in sync steps
    }
    return grpc::Status::OK;
  }
  void SetLive(std::vector<int64_t> live) {
    absl::MutexLock l(&mu_);
    live_ = std::move(live);
  }
  std::string registered() {
    absl::MutexLock l(&mu_);
    return registered_;
  }
  int64_t generation() {
    absl::MutexLock l(&mu_);
    return generation_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int64_t> live_;
  std::string registered_;
  int64_t generation_ = 0;
};

TEST(MembershipWatcherTest, RegistersAndFeedsTheLiveSetToTheBarrier) {
  TinyMaster master;
  master.SetLive({1, 2});
  int port = 0;
  auto server = rpc::StartServer(rpc::ServerOptions{}, {&master}, &port);
  ASSERT_TRUE(server.ok());
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {1}, 1, InitSpec::Zeros())}, Sgd(1.0f), 1, true)).ok());
  MembershipWatcherOptions options;
  options.master_address = absl::StrCat("127.0.0.1:", port);
  options.poll_interval = absl::Milliseconds(20);
  options.register_index = 0;
  options.register_address = "127.0.0.1:4242";
  options.register_interval = absl::Milliseconds(50);
  MembershipWatcher watcher(options, [&](const std::vector<int64_t>& live) { shard.SetLiveTrainers(live); });
  watcher.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (master.generation() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_GE(master.generation(), 2);  // re-registers periodically
  EXPECT_EQ(master.registered(), "127.0.0.1:4242");
  EXPECT_TRUE(watcher.registered());

  proto::PushRequest push;
  push.set_trainer_id(1);
  AddDense(&push, "p", 0, {4.0f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(shard.version(), 0);  // trainer 2 is live: the barrier waits
  master.SetLive({1});            // its lease expires
  proto::PullRequest pull;
  pull.set_min_version(1);
  proto::PullResponse resp;
  Status s = shard.Pull(pull, absl::Now() + absl::Seconds(5), &resp);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(-4.0f));
  watcher.Stop();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST(MembershipWatcherTest, AnUnreachableMasterIsRetriedWithoutHarm) {
  MembershipWatcherOptions options;
  options.master_address = "127.0.0.1:1";  // nothing listens there
  options.poll_interval = absl::Milliseconds(10);
  options.rpc_timeout = absl::Milliseconds(100);
  options.register_index = 0;
  options.register_address = "127.0.0.1:9";
  int calls = 0;
  MembershipWatcher watcher(options, [&](const std::vector<int64_t>&) { ++calls; });
  watcher.Start();
  absl::SleepFor(absl::Milliseconds(150));
  watcher.Stop();
  EXPECT_FALSE(watcher.registered());
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace pl::pserver
