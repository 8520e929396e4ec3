// The master's own log lines, produced by a real Master, sorted by JobEventLog: pins the
// wording ClassifyMasterLine relies on.
#include "paddle_like/metrics/job_events.h"

#include <gtest/gtest.h>

#include "master/master_service.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/master/test_util.h"

namespace pl::metrics {
namespace {

TEST(JobEventsTest, SortsTheMastersOwnLines) {
  pl::testing::ScratchDir dir;
  pl::testing::FakeClock clock;
  JobEventLog events(/*capacity=*/100);
  MasterOptions o;
  o.queue.num_passes = 1;
  o.num_pservers = 1;
  o.lease_ms = 1000;
  o.now_ms = clock.fn();
  o.expire_interval_ms = 0;
  o.log = [&events](const std::string& line) { events.Add(line); };
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto master = Master::Open(o, store->get(), [] { return StatusOr<std::vector<ChunkInfo>>(pl::testing::MakeChunks(4)); });
  ASSERT_TRUE(master.ok()) << master.status();
  Master& m = **master;

  proto::RegisterPserverRequest ps;
  ps.set_index(0);
  ps.set_address("127.0.0.1:1");
  ASSERT_TRUE(m.RegisterPserver(ps).ok());
  proto::RegisterTrainerRequest named;
  named.set_name("a");
  const int64_t a = m.RegisterTrainer(named)->trainer_id();
  const int64_t b = m.RegisterTrainer(named)->trainer_id();
  proto::GetTaskRequest get;
  get.set_trainer_id(a);
  const proto::Task task = m.GetTask(get)->task();
  proto::TaskFailedRequest failed;
  failed.set_trainer_id(a);
  failed.set_task_id(task.id());
  failed.set_pass(task.pass());
  failed.set_reason("bad batch");
  ASSERT_TRUE(m.TaskFailed(failed).ok());
  proto::LeaveRequest leave;
  leave.set_trainer_id(b);
  ASSERT_TRUE(m.Leave(leave).ok());
  get.set_trainer_id(a);
  ASSERT_TRUE(m.GetTask(get).ok());
  clock.now += 5000;  // a's lease, and its task's, run out
  ASSERT_TRUE(m.ExpireNow().ok());

  std::string all;  // for the failure message
  for (const JobEvent& e : events.Last()) all += std::string(JobEventKindName(e.kind)) + ": " + e.text + "\n";
  EXPECT_EQ(events.Total(JobEventKind::kJoin), 3) << all;  // one pserver, two trainers
  EXPECT_EQ(events.Total(JobEventKind::kLeave), 1) << all;
  EXPECT_EQ(events.Total(JobEventKind::kFailure), 1) << all;
  EXPECT_GE(events.Total(JobEventKind::kLeaseExpired), 1) << all;
}

TEST(JobEventsTest, KeepsOnlyTheLastEventsButCountsAll) {
  JobEventLog events(/*capacity=*/2);
  events.Add("trainer 1 (x) registered");
  events.Add("3 task lease(s) expired");
  events.Add("trainer 1 left");
  ASSERT_EQ(events.Last().size(), 2u);
  EXPECT_EQ(events.Last()[0].kind, JobEventKind::kLeaseExpired);
  EXPECT_EQ(events.Last()[0].count, 3);
  EXPECT_EQ(events.Total(JobEventKind::kJoin), 1);
  EXPECT_EQ(events.Total(JobEventKind::kLeaseExpired), 3);
}

}  // namespace
}  // namespace pl::metrics
