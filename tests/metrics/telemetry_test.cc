// A process's telemetry in-process: what TrainerTelemetry, JobSampler and PserverSampler
// put on /metrics (scraped over HTTP) and in the event file.
#include "paddle_like/metrics/telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <fstream>

#include "paddle_like/metrics/job_sampler.h"
#include "paddle_like/metrics/pserver_sampler.h"
#include "paddle_like/metrics/spsc_ring.h"
#include "paddle_like/metrics/trainer_telemetry.h"
#include "tests/testing/scratch_dir.h"

namespace pl::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::unique_ptr<ProcessTelemetry> Open(const std::string& logdir, const std::string& role, const std::string& index,
                                       const std::string& port_file = "") {
  TelemetryOptions o;
  o.logdir = logdir;
  o.process_name = role + "-" + index;
  o.role = role;
  o.index = index;
  o.metrics_host = "127.0.0.1";
  o.metrics_port = 0;
  o.metrics_port_file = port_file;
  auto t = ProcessTelemetry::Open(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::string Scrape(const ProcessTelemetry& t) {
  auto body = HttpGet("127.0.0.1", t.metrics_port(), "/metrics");
  EXPECT_TRUE(body.ok()) << body.status();
  return body.ok() ? *body : "";
}

TEST(TelemetryTest, TrainerStepsReachMetricsAndEvents) {
  pl::testing::ScratchDir dir;
  auto t = Open(dir.path(), "trainer", "3", dir.File("metrics.port"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(pl::testing::Slurp(dir.File("metrics.port")), absl::StrCat(t->metrics_port(), "\n"));
  ASSERT_NE(t->events(), nullptr);
  EXPECT_THAT(t->events()->path(), StartsWith(dir.File("trainer-3/events.out.tfevents.")));
  TrainerTelemetry trainer(t.get());
  trainer.OnStep({1, 2.0, 16, 64, 0.003, 0.001, 0.004});
  trainer.OnStep({2, 1.0, 32, 64, 0.003, 0.001, 0.03});
  trainer.OnEvaluation(2, "accuracy", 0.875);
  const std::string text = Scrape(*t);
  EXPECT_THAT(text, HasSubstr("# TYPE pl_trainer_steps_total counter"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_steps_total{index=\"3\",role=\"trainer\"} 2"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_samples_total{index=\"3\",role=\"trainer\"} 128"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_loss{index=\"3\",role=\"trainer\"} 1"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_train_accuracy{index=\"3\",role=\"trainer\"} 0.5"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_test_accuracy{index=\"3\",role=\"trainer\"} 0.875"));
  EXPECT_THAT(text, HasSubstr("# TYPE pl_trainer_step_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_step_seconds_bucket{index=\"3\",role=\"trainer\",le=\"0.005\"} 1"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_step_seconds_count{index=\"3\",role=\"trainer\"} 2"));
  // OnEvaluation flushed: three records after the version one.
  EXPECT_GT(std::filesystem::file_size(t->events()->path()), 100u);
}

TEST(TelemetryTest, AFullRingDropsAndCountsInsteadOfWaiting) {
  auto t = Open("", "trainer", "0");
  ASSERT_NE(t, nullptr);
  TrainerTelemetry trainer(t.get(), /*drain_every=*/absl::Hours(1));  // nothing drains but us
  for (int step = 1; step <= 5000; ++step) trainer.OnStep({step, 1.0, -1, 64, 0.001, 0.001, 0.002});
  trainer.Drain();
  const std::string text = Scrape(*t);
  EXPECT_THAT(text, HasSubstr("pl_trainer_steps_total{index=\"0\",role=\"trainer\"} 4096"));
  EXPECT_THAT(text, HasSubstr("pl_trainer_records_dropped_total{index=\"0\",role=\"trainer\"} 904"));
  // Drained, the ring takes steps again.
  trainer.OnStep({5001, 1.0, -1, 64, 0.001, 0.001, 0.002});
  trainer.Drain();
  EXPECT_THAT(Scrape(*t), HasSubstr("pl_trainer_steps_total{index=\"0\",role=\"trainer\"} 4097"));
}

TEST(SpscRingTest, KeepsOrderAcrossThreads) {
  SpscRing<int64_t> ring(64);
  constexpr int64_t kItems = 200000;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::thread producer([&] {
    for (int64_t i = 0; i < kItems && absl::Now() < deadline;) i += ring.Push(i) ? 1 : 0;
  });
  int64_t expected = 0;
  while (expected < kItems && absl::Now() < deadline) {
    int64_t v;
    if (ring.Pop(&v)) {
      ASSERT_EQ(v, expected++);
    }
  }
  producer.join();
  EXPECT_EQ(expected, kItems);
}

TEST(TelemetryTest, MasterAndPserverSamplersExposeTheirCounters) {
  auto master = Open("", "master", "0");
  ASSERT_NE(master, nullptr);
  EXPECT_EQ(master->events(), nullptr);
  JobEventLog events;
  events.Add("trainer 1 dropped: its lease expired");
  events.Add("2 task lease(s) expired");
  JobSampler job(master.get(), &events);
  proto::JobStatusResponse s;
  s.set_pass(2);
  s.set_num_passes(3);
  s.set_todo(5);
  s.set_pending(1);
  s.set_done(4);
  s.set_live_trainers(2);
  s.set_samples_done(640);
  s.set_replicas(2);
  s.set_shards_below_copies(1);
  s.set_trainer_target(3);
  job.Record(s);
  const std::string text = Scrape(*master);
  EXPECT_THAT(text, HasSubstr("pl_master_trainer_target{index=\"0\",role=\"master\"} 3"));
  // Every /metrics carries the process metrics and the build (issue 37).
  EXPECT_THAT(text, ::testing::ContainsRegex("\nprocess_cpu_seconds_total [0-9.e+-]+\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nprocess_resident_memory_bytes [1-9][0-9.e+]*\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nprocess_open_fds [1-9][0-9]*\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nprocess_start_time_seconds 1[0-9.e+]+\n"));
  EXPECT_THAT(text, HasSubstr("pl_build_info{version=\""));
  EXPECT_THAT(text, HasSubstr("pl_master_tasks{index=\"0\",role=\"master\",state=\"todo\"} 5"));
  EXPECT_THAT(text, HasSubstr("pl_master_tasks{index=\"0\",role=\"master\",state=\"pending\"} 1"));
  EXPECT_THAT(text, HasSubstr("pl_master_pass{index=\"0\",role=\"master\"} 2"));
  EXPECT_THAT(text, HasSubstr("pl_master_live_trainers{index=\"0\",role=\"master\"} 2"));
  EXPECT_THAT(text, HasSubstr("pl_master_shards_below_copies{index=\"0\",role=\"master\"} 1"));
  EXPECT_THAT(text, HasSubstr("pl_master_samples_total{index=\"0\",role=\"master\"} 640"));
  EXPECT_THAT(text, HasSubstr("pl_master_leases_expired_total{index=\"0\",role=\"master\"} 3"));

  auto ps = Open("", "pserver", "1");
  ASSERT_NE(ps, nullptr);
  PserverSampler sampler(ps.get(), nullptr);
  proto::StatsResponse stats;
  stats.set_pushes_applied(10);
  stats.set_dense_elements(1000);
  sampler.Record(stats, absl::Now());
  stats.set_pushes_applied(25);
  stats.set_pulls(7);
  stats.set_stream_entries_linked(24);
  stats.set_stream_entries_inline(1);
  stats.set_stream_entries_shm(7);
  stats.set_stream_calls(20);
  stats.set_stream_dense_bytes(98304);
  sampler.Record(stats, absl::Now());
  stats.set_pushes_applied(3);  // a restarted shard: the counter must not go down
  sampler.Record(stats, absl::Now());
  const std::string ps_text = Scrape(*ps);
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_pushes_total{index=\"1\",role=\"pserver\"} 25"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_pulls_total{index=\"1\",role=\"pserver\"} 7"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_dense_bytes{index=\"1\",role=\"pserver\"} 4000"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_stream_entries_total{index=\"1\",role=\"pserver\",via=\"link\"} 24"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_stream_entries_total{index=\"1\",role=\"pserver\",via=\"inline\"} 1"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_stream_entries_total{index=\"1\",role=\"pserver\",via=\"shm\"} 7"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_stream_calls_total{index=\"1\",role=\"pserver\"} 20"));
  EXPECT_THAT(ps_text, HasSubstr("pl_pserver_stream_dense_bytes_total{index=\"1\",role=\"pserver\"} 98304"));
}

TEST(TelemetryTest, APserversTablesAndTheirHottestRowsReachMetrics) {
  auto ps = Open("", "pserver", "0");
  ASSERT_NE(ps, nullptr);
  PserverSampler sampler(ps.get(), nullptr);
  proto::StatsResponse stats;
  proto::TableStats* t = stats.add_tables();
  t->set_name("emb");
  t->set_rows(1200);
  t->set_bytes(64000);
  proto::HotRow* first = t->add_hottest();
  first->set_id(17);
  first->set_updates(100);
  proto::HotRow* second = t->add_hottest();
  second->set_id(4);
  second->set_updates(50);
  const absl::Time t0 = absl::Now();
  sampler.Record(stats, t0);
  std::string text = Scrape(*ps);
  EXPECT_THAT(text, HasSubstr("pl_pserver_table_rows{index=\"0\",role=\"pserver\",table=\"emb\"} 1200"));
  EXPECT_THAT(text, HasSubstr("pl_pserver_table_bytes{index=\"0\",role=\"pserver\",table=\"emb\"} 64000"));
  EXPECT_THAT(text, Not(HasSubstr("pl_pserver_hot_row_updates_per_second{")));  // no rate from one sample
  // Two seconds later row 4 overtook row 17.
  first->set_id(4);
  first->set_updates(250);
  second->set_id(17);
  second->set_updates(140);
  sampler.Record(stats, t0 + absl::Seconds(2));
  text = Scrape(*ps);
  EXPECT_THAT(text, HasSubstr("pl_pserver_hot_row_updates_per_second{index=\"0\",role=\"pserver\",id=\"4\",rank=\"1\",table=\"emb\"} 100"));
  EXPECT_THAT(text, HasSubstr("pl_pserver_hot_row_updates_per_second{index=\"0\",role=\"pserver\",id=\"17\",rank=\"2\",table=\"emb\"} 20"));
  // A row that left the hottest leaves the family.
  t->mutable_hottest()->RemoveLast();
  sampler.Record(stats, t0 + absl::Seconds(3));
  text = Scrape(*ps);
  EXPECT_THAT(text, Not(HasSubstr("id=\"17\"")));
}

TEST(TelemetryTest, ErrorsNameTheFlag) {
  pl::testing::ScratchDir dir;
  { std::ofstream(dir.File("file")) << "x"; }
  TelemetryOptions o;
  o.logdir = dir.File("file");
  o.process_name = "master";
  auto bad_dir = ProcessTelemetry::Open(o);
  ASSERT_FALSE(bad_dir.ok());
  EXPECT_THAT(std::string(bad_dir.status().message()), StartsWith("--logdir: cannot create the log directory"));

  auto first = Open("", "master", "0");
  ASSERT_NE(first, nullptr);
  TelemetryOptions taken;
  taken.metrics_host = "127.0.0.1";
  taken.metrics_port = first->metrics_port();
  auto busy = ProcessTelemetry::Open(taken);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(busy.status().message()),
              HasSubstr(absl::StrCat("--metrics_port: cannot listen on 127.0.0.1:", first->metrics_port())));
}

}  // namespace
}  // namespace pl::metrics
