// PrimaryWatch against a pserver that stops answering on an open connection (a relay
// that stops moving bytes: what a dead host looks like to a call already out), on
// the real gRPC path: a call whose shard the
// master places elsewhere is cancelled long before its deadline, one whose primary
// stays is left to its deadline, and quick calls never make the watch ask the master.
#include "paddle_like/client/primary_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "tests/client/one_pserver.h"
#include "tests/testing/tcp_relay.h"

namespace pl {
namespace {

// A pserver behind a relay: a first call connects, then the relay stops moving bytes
// (the connection stays open: no FIN, no RST), as when the pserver's host dies.
class PrimaryWatchTest : public OnePserverTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(Start(pserver::SharedRegionOptions()));
    auto relay = testing::TcpRelay::Start(std::stoi(address_.substr(address_.rfind(':') + 1)));
    ASSERT_TRUE(relay.ok()) << relay.status();
    relay_ = std::move(*relay);
    peer_ = absl::StrCat("127.0.0.1:", relay_->port());
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(peer_));
    ASSERT_TRUE(Call(nullptr, absl::Seconds(10)).ok()) << "the first call, before the cut";
    relay_->Cut();
  }
  void TearDown() override {
    relay_.reset();
    OnePserverTest::TearDown();
  }

  // One Stats call to the pserver (as shard 0) through `watch`, with `deadline`.
  grpc::Status Call(PrimaryWatch* watch, absl::Duration deadline) {
    PrimaryWatch::Call call(watch, 0, peer_, deadline);
    proto::StatsResponse resp;
    return stub_->Stats(call.get(), proto::StatsRequest(), &resp);
  }

  std::unique_ptr<testing::TcpRelay> relay_;
  std::string peer_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(PrimaryWatchTest, ACallToAPrimaryTheMasterReplacedEndsLongBeforeItsDeadline) {
  std::atomic<int> asked{0};
  PrimaryWatch watch([&]() -> StatusOr<std::vector<std::string>> {
    ++asked;
    return std::vector<std::string>{"127.0.0.1:1"};  // the promoted backup
  });
  const absl::Time start = absl::Now();
  const grpc::Status s = Call(&watch, absl::Seconds(30));
  // Not UNAVAILABLE: gRPC's keepalive (seconds) did not end it first.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_TRUE(rpc::IsRetryable(rpc::FromGrpc(s)));  // the caller retries at the new primary
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "waited for the deadline, not the watch";
  EXPECT_EQ(watch.cancelled(), 1);
  EXPECT_GE(asked.load(), 1);
}

TEST_F(PrimaryWatchTest, ACallWhosePrimaryStaysIsLeftToItsDeadline) {
  std::atomic<int> asked{0};
  PrimaryWatch watch([&]() -> StatusOr<std::vector<std::string>> {
    ++asked;
    return std::vector<std::string>{peer_};
  });
  const grpc::Status s = Call(&watch, absl::Seconds(1));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_EQ(watch.cancelled(), 0);
  EXPECT_GE(asked.load(), 1) << "a call out for a second was never checked";
}

// A long wait (a sync barrier) makes the watch ask less and less often, not five times
// a second: 6 asks 200 ms apart from 300 ms on, then 400, 800, 1600 ms apart: at most
// 10 in 4 s (where 5 a second would be 19; gRPC's keepalive ends the call at 5 s).
TEST_F(PrimaryWatchTest, ALongCallIsAskedAboutLessAndLessOften) {
  std::atomic<int> asked{0};
  PrimaryWatch watch([&]() -> StatusOr<std::vector<std::string>> {
    ++asked;
    return std::vector<std::string>{peer_};
  });
  const grpc::Status s = Call(&watch, absl::Seconds(4));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_GE(asked.load(), 2);
  EXPECT_LE(asked.load(), 10);
}

// Also: a master that does not answer (the resolver fails) cancels nothing.
TEST_F(PrimaryWatchTest, QuickCallsNeverAskAndAFailedAskCancelsNothing) {
  std::atomic<int> asked{0};
  {
    PrimaryWatch watch([&]() -> StatusOr<std::vector<std::string>> {
      ++asked;
      return std::vector<std::string>{"127.0.0.1:1"};
    });
    for (int k = 0; k < 20; ++k) {
      PrimaryWatch::Call call(&watch, 0, "127.0.0.1:2", absl::Seconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(asked.load(), 0);
  }
  PrimaryWatch unreachable_master([]() -> StatusOr<std::vector<std::string>> {
    return absl::UnavailableError("master unreachable");
  });
  const grpc::Status s = Call(&unreachable_master, absl::Seconds(1));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_EQ(unreachable_master.cancelled(), 0);
}

// A watch without a master (null) just makes contexts.
TEST_F(PrimaryWatchTest, ACallWithNoWatchIsAPlainContext) {
  const grpc::Status s = Call(nullptr, absl::Milliseconds(300));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
}

}  // namespace
}  // namespace pl
