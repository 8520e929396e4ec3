// The master's status page from a real Master: its JSON parses and holds the job, the
// members, the events and the curves; its text is what pl-status prints; the HTML draws
// from status.json with nothing loaded from elsewhere.
#include "master/status_page.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/io/json_lite.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions o;
    o.queue.num_passes = 2;
    o.num_pservers = 1;
    o.lease_ms = 3000;
    o.expire_interval_ms = 0;
    o.log = [this](const std::string& line) { events_.Add(line); };
    auto store = LocalDirStore::Open(dir_.path());
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
    auto master = Master::Open(o, store_.get(), [] { return StatusOr<std::vector<ChunkInfo>>(testing::MakeChunks(6)); });
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(master).value();
    proto::RegisterPserverRequest ps;
    ps.set_index(0);
    ps.set_address("10.0.0.1:7000");
    ASSERT_TRUE(master_->RegisterPserver(ps).ok());
    proto::RegisterTrainerRequest named;
    named.set_name("trainer-0");
    const int64_t id = master_->RegisterTrainer(named)->trainer_id();
    proto::GetTaskRequest get;
    get.set_trainer_id(id);
    task_ = master_->GetTask(get)->task().id();
    proto::ProgressReport report;
    report.set_trainer("trainer-0");
    for (int step : {10, 20}) {
      proto::ProgressPoint* p = report.add_points();
      p->set_step(step);
      p->set_loss(2.0f / step);
      p->set_train_accuracy(0.5f);
      p->set_samples_per_sec(1000);
    }
    report.set_evaluated(true);
    report.set_test_metric_name("accuracy");
    report.set_test_metric(0.875f);
    board_.Add(report);
  }

  testing::ScratchDir dir_;
  metrics::JobEventLog events_;
  metrics::ProgressBoard board_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Master> master_;
  int64_t task_ = 0;
};

TEST_F(StatusPageTest, JsonHoldsJobMembersEventsAndCurves) {
  StatusPage page(master_.get(), &events_, &board_, 3000);
  const metrics::HttpResponse r = page.Handle("/status.json");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  auto json = ParseJson(r.body);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << r.body;
  const JsonValue* job = json->Find("job");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->Find("todo")->integer, 5);
  EXPECT_EQ(job->Find("pending")->integer, 1);
  EXPECT_EQ(job->Find("num_passes")->integer, 2);
  const JsonValue* trainers = json->Find("trainers");
  ASSERT_EQ(trainers->array.size(), 1u);
  EXPECT_EQ(trainers->array[0].Find("name")->string, "trainer-0");
  EXPECT_EQ(trainers->array[0].Find("task")->integer, task_);
  EXPECT_LT(trainers->array[0].Find("heartbeat_s_ago")->number, 5.0);
  EXPECT_EQ(json->Find("pservers")->array[0].Find("address")->string, "10.0.0.1:7000");
  std::vector<std::string> kinds;
  for (const JsonValue& e : json->Find("events")->array) kinds.push_back(e.Find("kind")->string);
  EXPECT_THAT(kinds, ::testing::Contains("join"));
  const JsonValue* curve = json->Find("curves")->Find("trainer-0");
  ASSERT_NE(curve, nullptr);
  ASSERT_EQ(curve->Find("points")->array.size(), 2u);
  EXPECT_EQ(curve->Find("points")->array[1].array[0].integer, 20);
  EXPECT_NEAR(curve->Find("points")->array[1].array[1].number, 0.1, 1e-6);
  EXPECT_NEAR(curve->Find("test_metric")->number, 0.875, 1e-6);
}

// A replicated shard: the page says how many replicas are in sync, catching up and
// missing against the copies the job was launched with, and the primary's loss shows
// as a lease expiry and a failover among the events.
TEST(StatusPageReplicasTest, ShowsReplicasInSyncAndCatchingUpAndFailoversAsEvents) {
  testing::ScratchDir dir;
  testing::FakeClock clock;
  metrics::JobEventLog events;
  metrics::ProgressBoard board;
  MasterOptions o;
  o.num_pservers = 1;
  o.replicas = 4;
  o.now_ms = clock.fn();
  o.expire_interval_ms = 0;
  o.log = [&events](const std::string& line) { events.Add(line); };
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto master = Master::Open(o, store->get(), [] { return StatusOr<std::vector<ChunkInfo>>(testing::MakeChunks(2)); });
  ASSERT_TRUE(master.ok()) << master.status();
  auto beat = [&](uint64_t id, std::vector<uint64_t> caught_up = {}) {
    proto::RegisterPserverRequest r;
    r.set_index(0);
    r.set_replica_id(id);
    r.set_address(absl::StrCat("10.0.0.", id, ":7100"));
    r.set_epoch(1);
    for (uint64_t c : caught_up) r.add_caught_up(c);
    auto resp = (*master)->RegisterPserver(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
  };
  beat(1);       // primary
  beat(2);       // joins
  beat(1, {2});  // ... and is in sync
  beat(3);       // joins
  StatusPage page(master->get(), &events, &board, 3000);
  auto json = ParseJson(page.Handle("/status.json").body);
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue& shard = json->Find("pservers")->array.at(0);
  EXPECT_EQ(shard.Find("replicas")->integer, 2);
  EXPECT_EQ(shard.Find("joining")->integer, 1);
  EXPECT_EQ(shard.Find("missing")->integer, 1);
  EXPECT_EQ(json->Find("job")->Find("replicas")->integer, 4);
  EXPECT_EQ((*master)->JobStatus({})->shards_below_copies(), 1);  // pl_master_shards_below_copies
  EXPECT_THAT(page.Handle("/status.txt").body, HasSubstr("replicas 2 in sync, 1 catching up, 1 missing of 4"));

  clock.now += 500;
  beat(2);
  beat(3);
  clock.now += 400;  // the primary's lease (800 ms) ran out, not the others'
  ASSERT_TRUE((*master)->ExpireNow().ok());
  EXPECT_EQ(events.Total(metrics::JobEventKind::kFailover), 1);
  EXPECT_GE(events.Total(metrics::JobEventKind::kLeaseExpired), 1);
  EXPECT_EQ(events.Total(metrics::JobEventKind::kJoin), 3);  // two joins, one caught up
  json = ParseJson(page.Handle("/status.json").body);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("pservers")->array.at(0).Find("address")->string, "10.0.0.2:7100");
  std::vector<std::string> kinds;
  for (const JsonValue& e : json->Find("events")->array) kinds.push_back(e.Find("kind")->string);
  EXPECT_THAT(kinds, ::testing::Contains("failover"));
}

TEST_F(StatusPageTest, TextIsWhatPlStatusPrints) {
  StatusPage page(master_.get(), &events_, &board_, 3000);
  const std::string text = page.Handle("/status.txt").body;
  EXPECT_THAT(text, HasSubstr("job: pass 1/2 | tasks todo 5 pending 1 done 0 failed 0"));
  EXPECT_THAT(text, HasSubstr("trainer-0"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("task ", task_)));
  EXPECT_THAT(text, HasSubstr("step 20 loss 0.1000 acc 0.5000"));
  EXPECT_THAT(text, HasSubstr("10.0.0.1:7000"));
  EXPECT_THAT(text, HasSubstr("trainer-0: test accuracy 0.8750"));
  EXPECT_THAT(text, HasSubstr("join          trainer 1 (trainer-0) registered"));
  EXPECT_EQ(page.Handle("/healthz").body, "ok\n");
  EXPECT_EQ(page.Handle("/nope").status, 404);
}

// Issue 40: each loss shows with its cause, in the text (pl-status) and the JSON.
TEST_F(StatusPageTest, LossesShowWithTheirCause) {
  StatusPage page(master_.get(), &events_, &board_, 3000);
  EXPECT_THAT(page.Handle("/status.txt").body, Not(HasSubstr("loss:")));
  proto::RegisterPserverRequest ps;
  ps.set_index(0);
  ps.set_address("10.0.0.1:7000");
  ps.set_incarnation(7);
  ps.set_started_empty(true);
  ps.set_pushes_refused(3);
  ASSERT_TRUE(master_->RegisterPserver(ps).ok());
  const std::string text = page.Handle("/status.txt").body;
  EXPECT_THAT(text, HasSubstr("loss: pserver 0 refused 3 push(es) whose gradients were out of bounds")) << text;
  auto json = ParseJson(page.Handle("/status.json").body);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("job")->Find("pushes_refused")->number, 3);
  ASSERT_EQ(json->Find("job")->Find("losses")->array.size(), 1u);
  EXPECT_THAT(events_.Last().back().text, HasSubstr("loss: pserver 0 refuses pushes"));
}

TEST_F(StatusPageTest, PageDrawsFromStatusJsonWithNothingFromOutside) {
  StatusPage page(master_.get(), &events_, &board_, 3000);
  const metrics::HttpResponse r = page.Handle("/");
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("fetch(\"status.json\""));
  EXPECT_THAT(r.body, HasSubstr("<svg id=\"loss\""));
  EXPECT_THAT(r.body, HasSubstr("setInterval(refresh"));
  EXPECT_THAT(r.body, Not(HasSubstr("src=")));
  EXPECT_THAT(r.body, Not(HasSubstr("http")));
  EXPECT_EQ(page.Handle("/nope").status, 404);
}

TEST(ProgressBoardTest, KeepsTheWholeRunWithinItsBound) {
  metrics::ProgressBoard board(/*max_points=*/10);
  for (int step = 1; step <= 100; ++step) {
    proto::ProgressReport r;
    r.set_trainer("t");
    r.add_points()->set_step(step);
    board.Add(r);
  }
  const auto& points = board.Curves()["t"].points;
  ASSERT_LE(points.size(), 11u);
  EXPECT_EQ(points.front().step(), 1);
  EXPECT_EQ(points.back().step(), 100);
}

}  // namespace
}  // namespace pl
