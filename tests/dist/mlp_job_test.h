// MlpJobTest: the fixture of the tests that run a job of real processes (Cluster) on
// the mlp with a 12000-sample subset of Fashion-MNIST (100 records a chunk): it writes
// the subset (and skips without the prepared data), makes the job's options, starts
// the cluster and reads what the trainers logged. Trainers log every step
// (--log_every_s 0): "... INFO trainer-R: pass P task T  step S  loss L", so a test
// knows when a trainer is in the middle of a task and which task it holds.
//
// Used by the single-host tests (tests/dist) and the multi-host ones (tests/netbed),
// which place the same processes on hosts of a test bed (ClusterOptions::placement).
#ifndef PADDLE_LIKE_TESTS_DIST_MLP_JOB_TEST_H_
#define PADDLE_LIKE_TESTS_DIST_MLP_JOB_TEST_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/cluster.h"

namespace pl::dist_testing {

inline constexpr int kSamples = 12000;
inline constexpr int kPerChunk = 100;
inline constexpr int kChunks = kSamples / kPerChunk;

// The final accuracy a test asserts when it is about something else (every chunk trained
// once, a failover): the model learned, chance being 0.10. Async trainers over two passes
// reach 0.72-0.79 on the first 2000 test images; the interleaving under load moves it
// below that (0.697 in a CI run beside the rest of the suite), so the bound leaves room.
inline constexpr double kLearnedAccuracy = 0.62;

class MlpJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_src_ = FashionMnistFile("train.plrec");
    test_src_ = FashionMnistFile("test.plrec");
    if (train_src_.empty() || test_src_.empty()) {
      GTEST_SKIP() << "needs $PL_DATA_DIR/fashion-mnist/{train,test}.plrec (pl-convert idx ...)";
    }
    ASSERT_FALSE(dir_.path().empty());
    auto chunks = WriteSubset(train_src_, dir_.path() + "/train.plrec", kSamples, kPerChunk);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    ASSERT_EQ(*chunks, kChunks);
  }

  // PL_DIST_TEST_LOGS=1 prints every process's log after each test (passing or not).
  void TearDown() override {
    const char* dump = std::getenv("PL_DIST_TEST_LOGS");
    if (cluster_ && dump != nullptr && std::string(dump) == "1") std::cout << cluster_->AllLogs() << std::endl;
  }

  ClusterOptions Options(int passes, int chunks_per_task, int64_t lease_ms) const {
    ClusterOptions o;
    o.data = dir_.path() + "/train.plrec";
    o.num_pservers = 2;
    o.passes = passes;
    o.chunks_per_task = chunks_per_task;
    o.lease_ms = lease_ms;
    o.trainer_args = {"--model", "mlp", "--threads", "1", "--batch_size", "64", "--optimizer", "adam",
                      "--lr", "0.001", "--test_data", test_src_, "--test_limit", "2000", "--log_every_s", "0"};
    return o;
  }

  void StartCluster(ClusterOptions o, int trainers) {
    cluster_ = std::make_unique<Cluster>(std::move(o), dir_.path());
    Status s = cluster_->Start(trainers);
    ASSERT_TRUE(s.ok()) << s << "\n" << cluster_->AllLogs();
  }

  // The master's trainer id of trainer `rank` (from its "registered as trainer N" line).
  int64_t TrainerId(int rank) {
    static const std::regex re(R"(registered as trainer (\d+))");
    std::smatch m;
    const std::string log = cluster_->TrainerLog(rank);
    if (!std::regex_search(log, m, re)) return -1;
    return std::stoll(m[1]);
  }

  // Waits until trainer `rank` has logged its step `step`; returns the task it was in.
  int64_t WaitForStep(int rank, int step, milliseconds timeout) {
    const std::string needle = absl::StrCat("  step ", step, "  loss");
    if (!WaitForText(cluster_->TrainerLogPath(rank), needle, timeout)) return -1;
    const std::string log = cluster_->TrainerLog(rank);
    const std::regex re(absl::StrCat(R"(task (\d+)  step )", step, "  loss"));
    std::smatch m;
    if (!std::regex_search(log, m, re)) return -1;
    return std::stoll(m[1]);
  }

  // Waits for trainer `rank` to exit 0 with a final accuracy; returns that accuracy.
  double ExpectFinishedWithAccuracy(int rank) {
    auto exit = testing::WaitForExit(cluster_->trainer(rank), seconds(60));
    EXPECT_TRUE(exit.ok() && exit->success())
        << "trainer " << rank << ": " << (exit.ok() ? exit->Describe() : exit.status().ToString()) << "\n"
        << cluster_->AllLogs();
    auto acc = LastNumberAfter(cluster_->TrainerLog(rank), "final test accuracy: ");
    EXPECT_TRUE(acc.has_value()) << cluster_->TrainerLog(rank);
    std::cout << "[measured] trainer " << rank << ": final test accuracy " << acc.value_or(0) << std::endl;
    return acc.value_or(0);
  }

  // Retries the trainer reported in its closing line ("...; N retries").
  int64_t TrainerRetries(int rank) {
    return static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(rank), "samples/s); ").value_or(-1));
  }

  // Waits (up to 30 s) until pserver `i` has written a checkpoint; false on timeout.
  bool WaitForCheckpoint(int i) {
    return testing::WaitUntil(
        [&] {
          auto s = cluster_->PserverStats(i);
          return s.ok() && s->checkpoints_written() >= 1;
        },
        seconds(30));
  }

  // Tasks the trainer finished, from its closing line ("job done after N tasks, ...").
  int64_t TasksTrained(int rank) {
    return static_cast<int64_t>(LastNumberAfter(cluster_->TrainerLog(rank), "job done after ").value_or(0));
  }

  std::string train_src_, test_src_;
  testing::TempDir dir_{"pl-dist-test"};
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_DIST_MLP_JOB_TEST_H_
