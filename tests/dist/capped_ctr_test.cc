// A click model on a 26-field log whose ids do not fit the pservers' memory cap: the
// same 2-pserver x 2-trainer job runs uncapped and with pl-pserver --sparse_memory_mb 1,
// where the pservers evict the least often (then least recently) used rows all along. The capped job
// finishes every chunk, each pserver's sparse rows stay within the cap, it really
// evicted (many more rows went through than it holds), and its test AUC stays close to
// the uncapped job's: the rows the cap keeps are the ids a Zipf-distributed log sees
// most. With a disk tier (--sparse_disk_dir) nothing is dropped at all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "paddle_like/testing/cluster.h"

namespace pl::dist_testing {
namespace {

constexpr int kFields = 26;
constexpr int64_t kVocab = 20000;
constexpr int kTrain = 60000, kTest = 10000, kPerChunk = 5000;
constexpr int64_t kCapMb = 1;

struct JobResult {
  double auc = 0;
  int64_t rows = 0, evicted = 0, max_sparse_bytes = 0, rows_on_disk = 0;
};

void RunJob(const std::string& dir, const std::string& clicks, int64_t cap_mb, JobResult* out, bool disk = false) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ASSERT_FALSE(ec) << dir << ": " << ec.message();
  ClusterOptions o;
  o.data = clicks + "/train.plrec";
  o.num_pservers = 2;
  o.passes = 1;
  o.lease_ms = 10000;
  if (cap_mb > 0) o.pserver_args = {"--sparse_memory_mb", std::to_string(cap_mb)};
  if (disk) o.pserver_args.insert(o.pserver_args.end(), {"--sparse_disk_dir", dir + "/disk-{i}"});
  o.trainer_args = {"--model", "ctr", "--ctr_fields", std::to_string(kFields), "--threads", "1", "--batch_size",
                    "256", "--optimizer", "adam", "--lr", "0.002", "--test_data", clicks + "/test.plrec",
                    "--log_every_s", "5"};
  Cluster cluster(o, dir);
  Status started = cluster.Start(2);
  ASSERT_TRUE(started.ok()) << started << "\n" << cluster.AllLogs();
  auto done = cluster.WaitForJobDone(seconds(300));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << cluster.AllLogs();
  EXPECT_EQ(done->chunks_trained(), kTrain / kPerChunk);
  EXPECT_EQ(done->failed(), 0);
  for (int r = 0; r < 2; ++r) {
    auto exit = testing::WaitForExit(cluster.trainer(r), seconds(120));
    ASSERT_TRUE(exit.ok() && exit->success()) << cluster.AllLogs();
    auto auc = LastNumberAfter(cluster.TrainerLog(r), "final test auc: ");
    ASSERT_TRUE(auc.has_value()) << cluster.TrainerLog(r);
    out->auc = *auc;
  }
  for (int i = 0; i < 2; ++i) {
    // The trainers' last pulls (the evaluation's) may have created rows since the last
    // sweep; the pserver's sweeper (every 100 ms) brings them back under the cap.
    StatusOr<proto::StatsResponse> stats = cluster.PserverStats(i);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (stats.ok() && cap_mb > 0 && stats->sparse_bytes() > (cap_mb << 20) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      stats = cluster.PserverStats(i);
    }
    // With a disk tier the sweep goes on down to its low-water mark, and a row it moves
    // is counted in memory and on disk for a moment (Stats reads the two apart): read
    // until two reads a few sweeps apart agree.
    auto kept = [](const proto::StatsResponse& s) {
      int64_t rows = s.sparse_rows();
      for (const proto::TableStats& t : s.tables()) rows += t.rows_on_disk();
      return std::make_pair(rows, s.sparse_bytes());
    };
    while (stats.ok() && disk && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(300));
      StatusOr<proto::StatsResponse> again = cluster.PserverStats(i);
      if (!again.ok() || kept(*again) == kept(*stats)) break;
      stats = std::move(again);
    }
    ASSERT_TRUE(stats.ok()) << stats.status();
    if (cap_mb > 0) {
      EXPECT_EQ(stats->sparse_memory_cap_bytes(), cap_mb << 20);
    } else {  // the default: what the dense parameters leave of the pserver's memory budget
      EXPECT_GT(stats->sparse_memory_cap_bytes(), int64_t{64} << 20);
    }
    out->rows += stats->sparse_rows();
    out->max_sparse_bytes = std::max(out->max_sparse_bytes, stats->sparse_bytes());
    for (const proto::TableStats& t : stats->tables()) {
      out->evicted += t.evicted();
      out->rows_on_disk += t.rows_on_disk();
    }
  }
}

// Writes the 26-field click log into DIR/clicks; returns that directory.
std::string GenerateClicks(const std::string& dir) {
  auto gen_bin = testing::BinaryPath("pl-gen-clicks");
  EXPECT_TRUE(gen_bin.ok()) << gen_bin.status();
  if (!gen_bin.ok()) return "";
  const std::string clicks = dir + "/clicks", gen_log = dir + "/gen.log";
  auto gen = testing::Spawn({*gen_bin, "--out", clicks, "--fields", std::to_string(kFields), "--vocab",
                             std::to_string(kVocab), "--train", std::to_string(kTrain), "--test",
                             std::to_string(kTest), "--records_per_chunk", std::to_string(kPerChunk)},
                            gen_log);
  EXPECT_TRUE(gen.ok()) << gen.status();
  if (!gen.ok()) return "";
  auto gen_exit = testing::WaitForExit(**gen, seconds(60));
  EXPECT_TRUE(gen_exit.ok() && gen_exit->success()) << testing::ReadFileOrEmpty(gen_log);
  return gen_exit.ok() && gen_exit->success() ? clicks : "";
}

TEST(DistCappedCtrTest, AJobOverTheMemoryCapEvictsStaysUnderItAndKeepsItsAuc) {
  testing::TempDir dir("pl-dist-capped-ctr");
  ASSERT_FALSE(dir.path().empty());
  const std::string clicks = GenerateClicks(dir.path());
  ASSERT_FALSE(clicks.empty());

  JobResult open, capped;
  RunJob(dir.path() + "/open", clicks, 0, &open);
  if (HasFatalFailure()) return;
  RunJob(dir.path() + "/capped", clicks, kCapMb, &capped);
  if (HasFatalFailure()) return;
  std::cout << "[measured] 26-field ctr, 2 pservers x 2 trainers: uncapped " << open.rows << " rows, auc "
            << open.auc << "; capped at " << kCapMb << " MB per pserver: " << capped.rows << " rows, "
            << capped.evicted << " evicted, largest sparse_bytes " << capped.max_sparse_bytes << ", auc "
            << capped.auc << std::endl;
  // Measured (2026-11-25): 226,273 rows uncapped, AUC 0.8368; capped 13,106 rows (6%),
  // 464,034 evictions, AUC 0.8333. By recency alone (the first version) the capped AUC
  // was 0.6587: most rows a batch touches were touched as recently as the hot ones.
  EXPECT_EQ(open.evicted, 0);
  EXPECT_LE(capped.max_sparse_bytes, kCapMb << 20);
  // The cap really bit: the uncapped job holds several times what the capped one may.
  EXPECT_GT(open.rows, 3 * capped.rows);
  EXPECT_GE(capped.evicted, open.rows - capped.rows);
  EXPECT_NEAR(capped.auc, open.auc, 0.015);
}

// The same capped job with a disk tier (--sparse_disk_dir): nothing is dropped, every row
// beyond the cap is on disk, and the model is the uncapped one's (up to async order).
TEST(DistCappedCtrTest, WithADiskTierNothingIsDroppedAndTheAucIsTheUncappedOnes) {
  testing::TempDir dir("pl-dist-disk-ctr");
  ASSERT_FALSE(dir.path().empty());
  const std::string clicks = GenerateClicks(dir.path());
  ASSERT_FALSE(clicks.empty());
  JobResult open, tiered;
  RunJob(dir.path() + "/open", clicks, 0, &open);
  if (HasFatalFailure()) return;
  RunJob(dir.path() + "/tiered", clicks, kCapMb, &tiered, /*disk=*/true);
  if (HasFatalFailure()) return;
  std::cout << "[measured] 26-field ctr with a disk tier: uncapped " << open.rows << " rows, auc " << open.auc
            << "; capped at " << kCapMb << " MB with a disk tier: " << tiered.rows << " rows in memory, "
            << tiered.rows_on_disk << " on disk, " << tiered.evicted << " dropped, auc " << tiered.auc << std::endl;
  EXPECT_EQ(tiered.evicted, 0);
  EXPECT_LE(tiered.max_sparse_bytes, kCapMb << 20);
  EXPECT_EQ(tiered.rows + tiered.rows_on_disk, open.rows);  // every row the job made, kept
  EXPECT_GT(tiered.rows_on_disk, 3 * tiered.rows);
  EXPECT_NEAR(tiered.auc, open.auc, 0.005);
}

}  // namespace
}  // namespace pl::dist_testing
