// The ctr model (an embedding table over sparse ids + an MLP) trained by 2 trainers on
// 2 pservers over a synthetic click log from pl-gen-clicks: only the rows a batch
// touches travel (the pservers' row counters match what the trainers say they pulled
// and pushed, and are far below shipping the whole table every step), and the test
// AUC comes close to the ideal AUC of the generating model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "paddle_like/testing/cluster.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;

// pl-gen-clicks' defaults: 8 fields x 500 ids. Calibrated: 300k samples x 2 passes with
// Adam 0.002 reach a test AUC of 0.867 against the ideal 0.877 (60k x 3 passes: 0.85).
constexpr int64_t kFields = 8, kVocab = 500, kTableRows = kFields * kVocab;
constexpr int kTrain = 300000, kTest = 10000, kPerChunk = 5000;
constexpr int kPasses = 2;
constexpr int64_t kBatch = 256;

TEST(DistCtrTest, OnlyTouchedRowsTravelAndAucApproachesTheIdeal) {
  testing::TempDir dir("pl-dist-ctr");
  ASSERT_FALSE(dir.path().empty());
  auto gen_bin = testing::BinaryPath("pl-gen-clicks");
  ASSERT_TRUE(gen_bin.ok()) << gen_bin.status();
  const std::string gen_log = dir.path() + "/gen.log";
  auto gen = testing::Spawn({*gen_bin, "--out", dir.path() + "/clicks", "--train", std::to_string(kTrain), "--test",
                             std::to_string(kTest), "--records_per_chunk", std::to_string(kPerChunk)},
                            gen_log);
  ASSERT_TRUE(gen.ok()) << gen.status();
  auto gen_exit = testing::WaitForExit(**gen, seconds(60));
  ASSERT_TRUE(gen_exit.ok() && gen_exit->success()) << testing::ReadFileOrEmpty(gen_log);
  auto ideal = LastNumberAfter(testing::ReadFileOrEmpty(gen_log), "ideal test auc: ");
  ASSERT_TRUE(ideal.has_value()) << testing::ReadFileOrEmpty(gen_log);

  ClusterOptions o;
  o.data = dir.path() + "/clicks/train.plrec";
  o.num_pservers = 2;
  o.passes = kPasses;
  o.chunks_per_task = 2;
  o.lease_ms = 10000;
  o.trainer_args = {"--model", "ctr", "--threads", "1", "--batch_size", std::to_string(kBatch), "--optimizer",
                    "adam", "--lr", "0.002", "--test_data", dir.path() + "/clicks/test.plrec", "--log_every_s", "5"};
  Cluster cluster(o, dir.path());
  Status started = cluster.Start(2);
  ASSERT_TRUE(started.ok()) << started << "\n" << cluster.AllLogs();
  auto done = cluster.WaitForJobDone(seconds(150));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster.AllLogs();
  EXPECT_EQ(done->chunks_trained(), kPasses * kTrain / kPerChunk);
  EXPECT_EQ(done->failed(), 0);

  int64_t steps = 0, trainer_pulled = 0, trainer_pushed = 0;
  double auc = 0;
  for (int r = 0; r < 2; ++r) {
    auto exit = testing::WaitForExit(cluster.trainer(r), seconds(60));
    ASSERT_TRUE(exit.ok() && exit->success()) << cluster.AllLogs();
    const std::string log = cluster.TrainerLog(r);
    EXPECT_THAT(log, HasSubstr("samples/s); 0 retries")) << "a retried pull would be counted twice";
    steps += static_cast<int64_t>(LastNumberAfter(log, " tasks, ").value_or(0));
    trainer_pulled += static_cast<int64_t>(LastNumberAfter(log, "sparse rows pulled ").value_or(-1));
    trainer_pushed += static_cast<int64_t>(LastNumberAfter(log, "sparse rows pushed ").value_or(-1));
    auto metric = LastNumberAfter(log, "final test auc: ");
    ASSERT_TRUE(metric.has_value()) << log;
    auc = *metric;
  }
  int64_t ps_pulled = 0, ps_pushed = 0, ps_rows = 0;
  for (int i = 0; i < 2; ++i) {
    auto stats = cluster.PserverStats(i);
    ASSERT_TRUE(stats.ok()) << stats.status();
    ps_pulled += stats->sparse_rows_pulled();
    ps_pushed += stats->sparse_rows_pushed();
    ps_rows += stats->sparse_rows();
  }
  std::cout << "[measured] ctr: " << steps << " steps; sparse rows pulled " << ps_pulled << " (trainers say "
            << trainer_pulled << "), pushed " << ps_pushed << " (trainers say " << trainer_pushed << "); "
            << ps_rows << " rows exist; test auc " << auc << " vs ideal " << *ideal << std::endl;
  ASSERT_GT(steps, 0);
  // Both sides count the same rows: each pull/push asks each pserver for exactly the
  // distinct ids it owns.
  EXPECT_EQ(ps_pulled, trainer_pulled);
  EXPECT_EQ(ps_pushed, trainer_pushed);
  // At most the batch's ids per step (plus each trainer's one pull of the test set's
  // ids for the final evaluation), and far below the whole table every step.
  EXPECT_LE(ps_pushed, steps * kBatch * kFields);
  EXPECT_LE(ps_pulled, steps * kBatch * kFields + 2 * kTableRows);
  EXPECT_LT(ps_pulled, steps * kTableRows / 4);
  EXPECT_GT(ps_pulled, steps);  // every step pulled rows
  EXPECT_LE(ps_rows, kTableRows);
  // A training step pushes a gradient for exactly the rows it pulled, so what was pulled
  // beyond the pushes is the evaluation's one pull per trainer.
  EXPECT_GT(ps_pulled, ps_pushed);
  EXPECT_LE(ps_pulled - ps_pushed, 2 * kTableRows);
  EXPECT_NEAR(auc, *ideal, 0.02);
}

}  // namespace
}  // namespace pl::dist_testing
