// Leader election on a real etcd: one leader at a time, a standby takes over when the
// leader resigns or its lease runs out, and a leader cut off from etcd knows it lost
// before any standby can win.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "paddle_like/etcd/etcd_election.h"
#include "paddle_like/etcd/etcd_state_store.h"
#include "tests/etcd/etcd_fixture.h"
#include "tests/testing/tcp_relay.h"

namespace pl::etcd {
namespace {

using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

using EtcdElectionTest = EtcdFixture;

EtcdElection::Options Named(const std::string& key, const std::string& who) {
  EtcdElection::Options o;
  o.key = key;
  o.value = who;
  o.ttl_s = 1;
  o.poll = absl::Milliseconds(20);
  return o;
}

// Campaigns on a thread of its own; won() once it leads.
class Campaigner {
 public:
  Campaigner(EtcdClient* client, EtcdElection::Options o) : election_(client, std::move(o)) {
    thread_ = std::thread([this] {
      result_ = election_.Campaign([this] { return stop_.load(); });
      won_at_ = SteadyClock::now();
      done_ = true;
    });
  }
  ~Campaigner() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool won() const { return done_.load() && result_.ok(); }
  bool done() const { return done_.load(); }
  const StatusOr<Fence>& result() const { return result_; }
  SteadyClock::time_point won_at() const { return won_at_; }
  EtcdElection& election() { return election_; }

 private:
  EtcdElection election_;
  std::atomic<bool> stop_{false}, done_{false};
  StatusOr<Fence> result_ = absl::UnknownError("running");
  SteadyClock::time_point won_at_;
  std::thread thread_;
};

TEST_F(EtcdElectionTest, OneLeadsTheOtherStandsByAndTakesOverWhenItResigns) {
  const std::string key = prefix_ + "/leader";
  EtcdElection::Options slow = Named(key, "a:1");
  slow.ttl_s = 2;  // a's lease must outlive a loaded machine's pauses for this test's 3 s
  EtcdElection a(client_.get(), slow);
  auto fa = a.Campaign([] { return false; });
  ASSERT_TRUE(fa.ok()) << fa.status();
  a.KeepLeading([](const std::string& why) { ADD_FAILURE() << "a lost: " << why; });

  Campaigner b(client_.get(), Named(key, "b:1"));
  // Through three lease terms of a's, renewed: b stands by.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_FALSE(b.done());
  const auto resigned = SteadyClock::now();
  a.Resign();
  ASSERT_TRUE(process::WaitUntil([&] { return b.done(); }, std::chrono::seconds(10)));
  ASSERT_TRUE(b.won()) << b.result().status();
  EXPECT_LT(b.won_at() - resigned, std::chrono::seconds(1));  // not a lease term: at once
  EXPECT_GT(b.result()->create_revision, fa->create_revision);
  // a's term is over: its writes are refused.
  EtcdStateStore old_store(client_.get(), prefix_, *fa);
  EXPECT_TRUE(absl::IsFailedPrecondition(old_store.Put("master/state", "x")));
  EtcdStateStore new_store(client_.get(), prefix_, *b.result());
  EXPECT_TRUE(new_store.Put("master/state", "y").ok());
}

TEST_F(EtcdElectionTest, AStandbyLeadsOnceTheDeadLeadersLeaseRunsOut) {
  const std::string key = prefix_ + "/leader";
  auto a = std::make_unique<EtcdElection>(client_.get(), Named(key, "a:1"));
  ASSERT_TRUE(a->Campaign([] { return false; }).ok());
  // a dies: nobody renews or revokes its lease.
  a.reset();
  const auto died = SteadyClock::now();
  Campaigner b(client_.get(), Named(key, "b:1"));
  ASSERT_TRUE(process::WaitUntil([&] { return b.done(); }, std::chrono::seconds(10)));
  ASSERT_TRUE(b.won()) << b.result().status();
  const double s = std::chrono::duration<double>(b.won_at() - died).count();
  std::cout << "[measured] standby led " << s << " s after the leader stopped renewing (lease 1 s)" << std::endl;
  EXPECT_LT(s, 5.0);
}

TEST_F(EtcdElectionTest, ARevokedLeaseIsReportedToTheLeader) {
  EtcdElection a(client_.get(), Named(prefix_ + "/leader", "a:1"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  EXPECT_EQ(a.granted_ttl_s(), 1);  // the member's 500 ms election timeout allows 1 s
  std::atomic<bool> lost{false};
  std::string why;
  std::mutex mu;
  a.KeepLeading([&](const std::string& w) {
    std::lock_guard<std::mutex> lock(mu);
    why = w;
    lost = true;
  });
  ASSERT_TRUE(client_->LeaseRevoke(a.lease_id()).ok());
  ASSERT_TRUE(process::WaitUntil([&] { return lost.load(); }, std::chrono::seconds(5)));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(why, HasSubstr("run out"));
}

// The split-brain case: the leader is cut off from etcd (a relay that stops moving
// bytes, as a partition does) while a standby reaches it. The leader must count its
// lease as lost before the standby can win.
TEST_F(EtcdElectionTest, ALeaderCutOffFromEtcdStepsDownBeforeTheStandbyLeads) {
  auto relay = testing::TcpRelay::Start(server_->client_port());
  ASSERT_TRUE(relay.ok()) << relay.status();
  auto through = EtcdClient::Connect("127.0.0.1:" + std::to_string((*relay)->port()), absl::Milliseconds(300));
  ASSERT_TRUE(through.ok());
  const std::string key = prefix_ + "/leader";
  EtcdElection a(through->get(), Named(key, "a:1"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  std::atomic<bool> lost{false};
  SteadyClock::time_point lost_at;
  a.KeepLeading([&](const std::string&) {
    lost_at = SteadyClock::now();
    lost = true;
  });
  Campaigner b(client_.get(), Named(key, "b:1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_FALSE(b.done());
  (*relay)->Cut();
  ASSERT_TRUE(process::WaitUntil([&] { return b.done() && lost.load(); }, std::chrono::seconds(15)));
  ASSERT_TRUE(b.won()) << b.result().status();
  EXPECT_LT(lost_at, b.won_at()) << "the standby led while the old leader still believed it led";
  std::cout << "[measured] old leader stepped down "
            << std::chrono::duration<double>(b.won_at() - lost_at).count() << " s before the standby led"
            << std::endl;
}

TEST_F(EtcdElectionTest, ACampaignEndsWhenAskedToStop) {
  const std::string key = prefix_ + "/leader";
  EtcdElection a(client_.get(), Named(key, "a:1"));
  ASSERT_TRUE(a.Campaign([] { return false; }).ok());
  a.KeepLeading([](const std::string&) {});
  Campaigner b(client_.get(), Named(key, "b:1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  b.Stop();
  EXPECT_TRUE(absl::IsCancelled(b.result().status())) << b.result().status();
}

TEST(EtcdClientTest, EndpointsThatAreNotHostPortAreRefusedByName) {
  auto c = EtcdClient::Connect("127.0.0.1:2379,nonsense");
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_THAT(c.status().message(), HasSubstr("'nonsense'"));
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdClient::Connect("").status()));
  EXPECT_TRUE(EtcdClient::Connect("http://127.0.0.1:2379, 10.0.0.1:2379").ok());
}

}  // namespace
}  // namespace pl::etcd
