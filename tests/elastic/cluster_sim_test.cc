// pl-sim-elastic's simulation (benchmarks/elastic_cluster/sim/cluster_sim.h) on tiny traces
// whose job completion times, busy slot-seconds and slot delays are computed by hand.
#include "benchmarks/elastic_cluster/sim/cluster_sim.h"

#include <gtest/gtest.h>

namespace pl::elastic_sim {
namespace {

// One model "m": 100 samples/s on 1 trainer, 200 on 2, 400 on 4; join 1 s, leave 0.5 s,
// exit 0 s.
constexpr char kCurves[] = R"({"m": {"samples_per_s": {"1": 100, "2": 200, "4": 400},
                                     "join_s": 1.0, "leave_s": 0.5}})";

Curves MakeCurves() {
  StatusOr<Curves> curves = ParseCurves(kCurves);
  EXPECT_TRUE(curves.ok()) << curves.status();
  return curves.ok() ? *curves : Curves{};
}

Trace MakeTrace(const std::string& json) {
  StatusOr<Trace> trace = ParseTrace(json);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? *trace : Trace{};
}

SimResult RunMode(const Trace& trace, Mode mode) {
  SimOptions options;
  options.mode = mode;
  options.policy.cooldown_ms = 0;
  options.policy.settle_ms = 0;
  options.timeline = true;
  StatusOr<SimResult> r = Simulate(trace, MakeCurves(), options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

// 4 slots, no online services, horizon 20 s, decisions every 1 s; one job of 2000 samples,
// 1..4 trainers, 2 when static.
constexpr char kOneJob[] = R"({"slots": 4, "horizon_s": 20, "period_s": 1, "online": [[0, 0]],
  "jobs": [{"name": "a", "arrival_s": 0, "model": "m", "work_samples": 2000,
            "min_trainers": 1, "max_trainers": 4, "static_trainers": 2}]})";

TEST(ClusterSimTest, OneJobStatic) {
  const SimResult r = RunMode(MakeTrace(kOneJob), Mode::kStatic);
  // 2 trainers start at 0, train from 1 s at 200/s: 2000 samples take 10 s -> finish 11.
  ASSERT_EQ(r.jobs_finished, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].start_s, 0.0);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish_s, 11.0);
  EXPECT_DOUBLE_EQ(r.mean_jct_s, 11.0);
  EXPECT_DOUBLE_EQ(r.p90_jct_s, 11.0);
  // Busy: 2 slots x 11 s of the 4 x 20.
  EXPECT_DOUBLE_EQ(r.busy_slot_s, 22.0);
  EXPECT_DOUBLE_EQ(r.utilisation, 22.0 / 80.0);
  EXPECT_EQ(r.shrinks, 0);
  EXPECT_EQ(r.decisions, 0);
  // Both slots were free since 0 and used at 0.
  EXPECT_EQ(r.free_to_used_count, 2);
  EXPECT_DOUBLE_EQ(r.mean_free_to_used_s, 0.0);
}

TEST(ClusterSimTest, OneJobElasticGrowsAfterAdmissionAndFinishesSooner) {
  const Trace trace = MakeTrace(kOneJob);
  const SimResult r = RunMode(trace, Mode::kElastic);
  // Decision at 0 admits it at its minimum (1 trainer, training from 1 s); the one at 1 s
  // grows it to 4 (3 more, training from 2 s). Progress: 100 samples in [1, 2), then
  // 400/s for the other 1900: 4.75 s -> finish 6.75.
  ASSERT_EQ(r.jobs_finished, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish_s, 6.75);
  EXPECT_DOUBLE_EQ(r.mean_jct_s, 6.75);
  // Busy: 1 slot x 6.75 s + 3 slots x 5.75 s = 24.
  EXPECT_DOUBLE_EQ(r.busy_slot_s, 24.0);
  EXPECT_DOUBLE_EQ(r.utilisation, 24.0 / 80.0);
  EXPECT_EQ(r.shrinks, 0);
  EXPECT_EQ(r.over_committed_periods, 0);
  EXPECT_EQ(r.decisions, 21);  // t = 0, 1, ..., 20
  // Four slots free since 0: one used at 0, three at 1 -> mean 0.75 s.
  EXPECT_EQ(r.free_to_used_count, 4);
  EXPECT_DOUBLE_EQ(r.mean_free_to_used_s, 0.75);

  // The same job statically takes longer on fewer slot-seconds.
  const SimResult s = RunMode(trace, Mode::kStatic);
  EXPECT_LT(r.mean_jct_s, s.mean_jct_s);
  EXPECT_GT(r.utilisation, s.utilisation);

  // The timeline row after the decision at 1 s: 4 trainers holding slots, 1 training.
  ASSERT_GE(r.timeline.size(), 2u);
  EXPECT_DOUBLE_EQ(r.timeline[1].t_s, 1.0);
  EXPECT_EQ(r.timeline[1].training_capacity, 4);
  EXPECT_EQ(r.timeline[1].trainers_busy, 4);
  EXPECT_EQ(r.timeline[1].trainers_training, 1);
  EXPECT_EQ(r.timeline[1].jobs_running, 1);
}

// The same job; online services take 2 of the 4 slots from t = 5 on.
constexpr char kCapacityDrop[] = R"({"slots": 4, "horizon_s": 20, "period_s": 1,
  "online": [[0, 0], [5, 2]],
  "jobs": [{"name": "a", "arrival_s": 0, "model": "m", "work_samples": 2000,
            "min_trainers": 1, "max_trainers": 4, "static_trainers": 2}]})";

TEST(ClusterSimTest, CapacityDropIsReclaimedAndLeavingTrainersOverlap) {
  const Trace trace = MakeTrace(kCapacityDrop);
  const SimResult r = RunMode(trace, Mode::kElastic);
  // 4 trainers from 1 s (training from 2 s: 100 + 3 x 400 = 1300 samples by 5 s). At 5 s
  // the decision reclaims 2 (newest first): they stop training and leave until 5.5 s. The
  // other 700 samples at 200/s take 3.5 s -> finish 8.5.
  ASSERT_EQ(r.jobs_finished, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish_s, 8.5);
  EXPECT_EQ(r.shrinks, 1);
  EXPECT_EQ(r.trainers_stopped, 2);
  EXPECT_EQ(r.over_committed_periods, 0);
  // Online 2 + 4 trainers on 4 slots for 0.5 s.
  EXPECT_DOUBLE_EQ(r.overlap_slot_s, 1.0);
  // Busy: [0,1) 1; [1,5) 4; [5,5.5) 4 (capped); [5.5,8.5) 2+2; [8.5,20) online 2.
  EXPECT_DOUBLE_EQ(r.busy_slot_s, 1 + 16 + 2 + 12 + 23);

  // Static: the partition is 4 - 2 = 2 slots; 2 trainers from 0, training from 1 at
  // 200/s -> finish 11. Busy: [0,5) 2; [5,11) 4; [11,20) 2.
  const SimResult s = RunMode(trace, Mode::kStatic);
  EXPECT_DOUBLE_EQ(s.jobs[0].finish_s, 11.0);
  EXPECT_DOUBLE_EQ(s.busy_slot_s, 10 + 24 + 18);
  EXPECT_DOUBLE_EQ(s.overlap_slot_s, 0.0);
  EXPECT_EQ(s.shrinks, 0);
}

TEST(ClusterSimTest, StaticQueueIsFifoAndWaitsForFreeSlots) {
  // Partition 2: b (arriving at 0.5) waits for a's two slots, free at 11; it trains from 12.
  const Trace trace = MakeTrace(R"({"slots": 2, "horizon_s": 30, "period_s": 1, "online": [],
    "jobs": [{"name": "a", "arrival_s": 0, "model": "m", "work_samples": 2000,
              "min_trainers": 1, "max_trainers": 2, "static_trainers": 2},
             {"name": "b", "arrival_s": 0.5, "model": "m", "work_samples": 2000,
              "min_trainers": 1, "max_trainers": 2, "static_trainers": 2}]})");
  const SimResult s = RunMode(trace, Mode::kStatic);
  ASSERT_EQ(s.jobs_finished, 2);
  EXPECT_DOUBLE_EQ(s.jobs[1].start_s, 11.0);
  EXPECT_DOUBLE_EQ(s.jobs[1].finish_s, 22.0);
  EXPECT_DOUBLE_EQ(s.mean_jct_s, (11.0 + 21.5) / 2);
  EXPECT_DOUBLE_EQ(s.p90_jct_s, 11.0 + 0.9 * (21.5 - 11.0));
  EXPECT_EQ(s.jobs_finished_by_horizon, 2);
  EXPECT_DOUBLE_EQ(s.busy_slot_s, 2 * 22.0);
}

TEST(ClusterSimTest, RunDrainsPastTheHorizonButMeasuresUtilisationWithinIt) {
  const Trace trace = MakeTrace(R"({"slots": 2, "horizon_s": 5, "period_s": 1, "online": [],
    "jobs": [{"name": "a", "arrival_s": 0, "model": "m", "work_samples": 2000,
              "min_trainers": 2, "max_trainers": 2, "static_trainers": 2}]})");
  const SimResult s = RunMode(trace, Mode::kStatic);
  EXPECT_EQ(s.jobs_finished, 1);
  EXPECT_EQ(s.jobs_finished_by_horizon, 0);
  EXPECT_DOUBLE_EQ(s.jobs[0].finish_s, 11.0);
  EXPECT_DOUBLE_EQ(s.utilisation, 1.0);
}

TEST(ClusterSimTest, FreeSlotsCountOnlyWhileSomeJobWantsThem) {
  // The slots are free from 0 but nobody wants them until a arrives at 3.
  const Trace trace = MakeTrace(R"({"slots": 2, "horizon_s": 20, "period_s": 1, "online": [],
    "jobs": [{"name": "a", "arrival_s": 3, "model": "m", "work_samples": 200,
              "min_trainers": 1, "max_trainers": 2, "static_trainers": 1}]})");
  const SimResult s = RunMode(trace, Mode::kStatic);
  EXPECT_EQ(s.free_to_used_count, 1);
  EXPECT_DOUBLE_EQ(s.mean_free_to_used_s, 0.0);  // started on arrival
  // Elastic: added at 3, admitted by the decision at 3 (1 trainer, delay 0), grown by the
  // one at 4 (delay 1: wanted since 3).
  const SimResult e = RunMode(trace, Mode::kElastic);
  EXPECT_EQ(e.free_to_used_count, 2);
  EXPECT_DOUBLE_EQ(e.mean_free_to_used_s, 0.5);
}

TEST(ClusterSimTest, CurveInterpolatesAndExtrapolatesPerTrainer) {
  StatusOr<Curves> curves = ParseCurves(R"({"x": {"samples_per_s": {"4": 300, "1": 100, "2": 180},
      "join_s": 0, "leave_s": 0}, "y": {"samples_per_s": {"2": 200}, "join_s": 0, "leave_s": 0}})");
  ASSERT_TRUE(curves.ok()) << curves.status();
  const ModelCurve& x = curves->at("x");
  EXPECT_DOUBLE_EQ(x.SamplesPerSecond(0), 0.0);
  EXPECT_DOUBLE_EQ(x.SamplesPerSecond(1), 100.0);
  EXPECT_DOUBLE_EQ(x.SamplesPerSecond(3), 240.0);
  EXPECT_DOUBLE_EQ(x.SamplesPerSecond(8), 600.0);  // 300 / 4 per trainer beyond the last
  EXPECT_DOUBLE_EQ(curves->at("y").SamplesPerSecond(1), 100.0);  // from (0, 0)
}

TEST(ClusterSimTest, PercentileIsNumpysLinearDefault) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile({5}, 90), 5.0);
  EXPECT_DOUBLE_EQ(Percentile({}, 90), 0.0);
}

TEST(ClusterSimTest, RejectsJobsThatCouldNeverRunStatically) {
  const Trace trace = MakeTrace(R"({"slots": 4, "horizon_s": 20, "period_s": 1, "online": [[0, 1], [5, 3]],
    "jobs": [{"name": "big", "arrival_s": 0, "model": "m", "work_samples": 10,
              "min_trainers": 1, "max_trainers": 4, "static_trainers": 2}]})");
  Status s = CheckTrace(trace, MakeCurves());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("job 'big'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("static partition"), std::string::npos) << s;

  const Trace unknown = MakeTrace(R"({"slots": 4, "horizon_s": 20, "period_s": 1, "online": [],
    "jobs": [{"name": "u", "arrival_s": 0, "model": "nope", "work_samples": 10,
              "min_trainers": 1, "max_trainers": 1, "static_trainers": 1}]})");
  s = Simulate(unknown, MakeCurves(), SimOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no model 'nope'"), std::string::npos) << s;
}

TEST(ClusterSimTest, ParseErrorsNameTheField) {
  StatusOr<Trace> t = ParseTrace(R"({"slots": 4, "horizon_s": 20, "period_s": 1, "online": [],
    "jobs": [{"name": "a", "arrival_s": 0, "model": "m", "work_samples": 10,
              "min_trainers": 1.5, "max_trainers": 1, "static_trainers": 1}]})");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("job 'a': 'min_trainers' is not an integer"), std::string::npos)
      << t.status();
  t = ParseTrace(R"({"slots": 4, "horizon_s": 20, "period_s": 1, "online": [[3, 1], [2, 1]], "jobs": []})");
  EXPECT_NE(t.status().message().find("online[1]: t goes backwards"), std::string::npos) << t.status();
  StatusOr<Curves> c = ParseCurves(R"({"m": {"samples_per_s": {"0": 5}, "join_s": 0, "leave_s": 0}})");
  EXPECT_NE(c.status().message().find("trainer count '0'"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace pl::elastic_sim
