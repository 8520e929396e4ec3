// The master while its storage stalls (master/master_service.h): a durable wait in
// flight long enough stops lease checks, and its end gives every lease a full term.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "master/master_service.h"
#include "paddle_like/store/local_dir_store.h"
#include "paddle_like/store/record_log.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using pl::testing::FakeClock;
using pl::testing::MakeChunks;
using pl::testing::ScratchDir;

proto::RegisterTrainerRequest Registration(const std::string& name) {
  proto::RegisterTrainerRequest r;
  r.set_name(name);
  return r;
}

// A storage that stalls (a slow fsync, an etcd election) holds the answers to every
// renewal made meanwhile: a pserver sends its next heartbeat once the last is answered.
// While a durable wait is that long in flight no lease is judged, and once it ends every
// lease gets a full term; then leases run out as before.
class HeldLog : public RecordLog {
 public:
  explicit HeldLog(std::unique_ptr<RecordLog> real) : real_(std::move(real)) {}
  StatusOr<LogContents> Load() override { return real_->Load(); }
  StatusOr<int64_t> Append(absl::string_view payload) override { return real_->Append(payload); }
  // Holds the first wait after Hold(true) until Hold(false); the others pass (a lease
  // check's own record must not block the test when the master gets it wrong).
  Status Sync(int64_t ticket) override {
    std::unique_lock<std::mutex> l(mu_);
    if (held_ && waiting_ == 0) {
      ++waiting_;
      changed_.notify_all();
      changed_.wait(l, [&] { return !held_; });
    }
    l.unlock();
    return real_->Sync(ticket);
  }
  Status Reset() override { return real_->Reset(); }
  int64_t size() const override { return real_->size(); }
  std::string name() const override { return real_->name(); }
  void Hold(bool held) {
    std::lock_guard<std::mutex> l(mu_);
    held_ = held;
    changed_.notify_all();
  }
  bool AwaitWaiter() {
    std::unique_lock<std::mutex> l(mu_);
    return changed_.wait_for(l, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }

 private:
  std::unique_ptr<RecordLog> real_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_ = false;
  int waiting_ = 0;
};

TEST(MasterTest, AStalledStorageJudgesNoLeaseAndThenGivesEachAFullTerm) {
  ScratchDir dir;
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  FakeClock clock;
  std::atomic<int64_t> mono{5'000};
  auto log = std::make_shared<HeldLog>(OpenFileRecordLog(dir.path() + "/events.log"));
  std::vector<std::string> lines;
  std::mutex lines_mu;
  MasterOptions o;
  o.queue.num_passes = 1;
  o.num_pservers = 2;
  o.lease_ms = 1000;
  o.now_ms = clock.fn();
  o.expire_interval_ms = 100;  // the guards are on (the thread is not started by Open)
  o.pserver_lease_ms = 800;
  o.monotonic_ms = [&mono] { return mono.load(); };
  o.event_log = log;
  o.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> l(lines_mu);
    lines.push_back(line);
  };
  auto master = Master::Open(o, store->get(), [] { return StatusOr<std::vector<ChunkInfo>>(MakeChunks(2)); });
  ASSERT_TRUE(master.ok()) << master.status();
  Master& m = **master;
  const int64_t id = m.RegisterTrainer(Registration("t"))->trainer_id();
  ASSERT_TRUE(m.ExpireNow().ok());
  // A heartbeat's record is held by the storage for 5 s (the lease is 1 s).
  log->Hold(true);
  std::thread beat([&] {
    proto::HeartbeatRequest hb;
    hb.set_trainer_id(id);
    EXPECT_TRUE(m.Heartbeat(hb).ok());
  });
  ASSERT_TRUE(log->AwaitWaiter());
  for (int i = 0; i < 50; ++i) {  // the expiry thread's checks meanwhile, every 100 ms
    clock.now += 100;
    mono += 100;
    ASSERT_TRUE(m.ExpireNow().ok());
  }
  {
    std::lock_guard<std::mutex> l(lines_mu);
    EXPECT_THAT(absl::StrJoin(lines, "\n"), Not(HasSubstr("dropped"))) << "a lease ran out while the storage stalled";
  }
  log->Hold(false);
  beat.join();
  clock.now += 100;
  mono += 100;
  ASSERT_TRUE(m.ExpireNow().ok());
  {
    std::lock_guard<std::mutex> l(lines_mu);
    const std::string all = absl::StrJoin(lines, "\n");
    EXPECT_THAT(all, HasSubstr("the master's storage took 5000 ms to make a change durable")) << all;
    EXPECT_THAT(all, Not(HasSubstr("dropped: its lease expired"))) << all;
  }
  EXPECT_EQ(m.GetMembership({})->trainers_size(), 1);
  // A full term from now (1 s), and then it runs out as any lease does (checked every
  // 100 ms, as the thread does: a longer gap would be a stall of the master).
  for (int i = 0; i < 9; ++i) {
    clock.now += 100;
    mono += 100;
    ASSERT_TRUE(m.ExpireNow().ok());
  }
  EXPECT_EQ(m.GetMembership({})->trainers_size(), 1);
  for (int i = 0; i < 2; ++i) {
    clock.now += 100;
    mono += 100;
    ASSERT_TRUE(m.ExpireNow().ok());
  }
  EXPECT_EQ(m.GetMembership({})->trainers_size(), 0);
  std::lock_guard<std::mutex> l(lines_mu);
  EXPECT_THAT(absl::StrJoin(lines, "\n"), HasSubstr("dropped: its lease expired"));
}

}  // namespace
}  // namespace pl
