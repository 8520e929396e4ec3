// MasterClient's one retry policy (MasterCallPolicy), against a master service in this
// process that fails as told and counts the attempts it gets.
#include "paddle_like/client/master_client.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"

namespace pl {
namespace {

class FailingMaster final : public proto::Master::Service {
 public:
  // The first `failures` calls fail with `code`, the rest succeed.
  void FailFirst(int failures, grpc::StatusCode code) {
    failures_ = failures;
    code_ = code;
  }
  int calls() const { return calls_.load(); }

  grpc::Status Membership(grpc::ServerContext*, const proto::MembershipRequest*,
                          proto::MembershipResponse* response) override {
    if (calls_++ < failures_) return grpc::Status(code_, "told to fail");
    response->add_pservers()->set_address("10.0.0.1:7100");
    return grpc::Status::OK;
  }

 private:
  std::atomic<int> calls_{0};
  int failures_ = 0;
  grpc::StatusCode code_ = grpc::StatusCode::UNAVAILABLE;
};

class MasterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    auto server = rpc::StartServer({}, {&master_}, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override { server_->Shutdown(); }

  FailingMaster master_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(MasterClientTest, OneAttemptPolicyMakesExactlyOne) {
  master_.FailFirst(3, grpc::StatusCode::UNAVAILABLE);
  MasterClient client(address_);
  auto got = client.Membership(MasterCallPolicy::Once(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_EQ(master_.calls(), 1);
}

TEST_F(MasterClientTest, RetryableFailuresAreRetriedUntilOneSucceeds) {
  master_.FailFirst(3, grpc::StatusCode::UNAVAILABLE);
  MasterClient client(address_);
  // Each failed attempt makes the next dial a fresh channel; the answer still comes.
  auto got = client.Membership(MasterCallPolicy{absl::Seconds(5), absl::Seconds(60), true});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->pservers(0).address(), "10.0.0.1:7100");
  EXPECT_EQ(master_.calls(), 4);
}

TEST_F(MasterClientTest, AnAnswerThatIsNotRetryableIsFinal) {
  master_.FailFirst(3, grpc::StatusCode::PERMISSION_DENIED);
  MasterClient client(address_);
  auto got = client.Membership(MasterCallPolicy{absl::Seconds(5), absl::Seconds(60), true});
  EXPECT_TRUE(absl::IsPermissionDenied(got.status())) << got.status();
  EXPECT_EQ(master_.calls(), 1);
}

TEST_F(MasterClientTest, ARetryLoopGivesUpAndSaysSo) {
  master_.FailFirst(1 << 30, grpc::StatusCode::UNAVAILABLE);
  MasterClient client(address_);
  auto got = client.Membership(MasterCallPolicy{absl::Seconds(5), absl::Milliseconds(300), true});
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("master Membership: gave up retrying"), std::string::npos) << got.status();
  EXPECT_GE(master_.calls(), 2);
}

}  // namespace
}  // namespace pl
