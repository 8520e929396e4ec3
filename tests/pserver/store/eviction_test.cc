// Eviction of sparse rows: a table's time to live (evict_after_s) and the pserver's
// memory cap (--sparse_memory_mb, least recently touched first), driven here tick by
// tick (RowEvictor does it in the pserver). The cap takes the least often updated
// rows first, and among those the least recently touched. An evicted row comes back from the
// initializer, through admission again; its slot is reused; incremental checkpoints
// record the evictions; a replicated primary's backups evict exactly what it did.
#include <filesystem>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

// dim 2, SGD: a record is 2 values + the step (2 floats) = 16 bytes; with its tick and
// mark (8) and its id and index entry (16), RowCost 40.
constexpr int64_t kRowCost = 40;

proto::ParamSpec Table(int64_t evict_after_s, int64_t admit_after = 0) {
  proto::ParamSpec s = SparseSpec("emb", 2, 0, InitSpec::Constant(1.0f));
  s.set_evict_after_s(evict_after_s);
  s.set_admit_after(admit_after);
  return s;
}

std::unique_ptr<ParameterShard> MakeShard(proto::ParamSpec table) {
  auto shard = std::make_unique<ParameterShard>(0, 1);
  auto init = shard->Init(MakeInit({table}, Sgd(0.5f)));
  EXPECT_TRUE(init.ok()) << init.status();
  return shard;
}

proto::PushRequest Ones(const std::vector<int64_t>& ids) {
  proto::PushRequest push;
  AddRows(&push, "emb", 2, ids, std::vector<float>(2 * ids.size(), 1.0f));
  return push;
}

void PushOnes(ParameterShard& shard, const std::vector<int64_t>& ids) {
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Ones(ids))).ok());
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> ids;
  for (int64_t id = from; id < to; ++id) ids.push_back(id);
  return ids;
}

proto::TableStats Stats(const ParameterShard& shard) { return shard.tables().Stats()[0]; }

TEST(Eviction, RowsUntouchedForTheirTimeToLiveGoAndComeBackFromTheInitializer) {
  auto shard = MakeShard(Table(/*evict_after_s=*/1));
  ASSERT_TRUE(shard->tables().evicting());  // a table with a time to live turns the notes on
  shard->tables().SetTick(1);
  PushOnes(*shard, {1, 2, 3});  // 1 - 0.5 = 0.5 each
  shard->tables().SetTick(5);
  EXPECT_THAT(PullRows(*shard, "emb", {2}), ElementsAre(0.5f, 0.5f));  // a pull touches row 2
  // At tick 12 the time to live (10 ticks of 100 ms) has passed for rows last touched
  // at tick 1, not for row 2.
  shard->tables().SetTick(12);
  EXPECT_EQ(shard->SweepRows(/*ttl_due=*/false), 0);  // the cap is not exceeded; no TTL scan asked
  EXPECT_EQ(shard->SweepRows(/*ttl_due=*/true), 2);
  proto::TableStats s = Stats(*shard);
  EXPECT_EQ(s.rows(), 1);
  EXPECT_EQ(s.evicted(), 2);
  EXPECT_EQ(s.evict_after_s(), 1);
  // Row 2 kept its training; rows 1 and 3 start over from the initializer.
  EXPECT_THAT(PullRows(*shard, "emb", {1, 2, 3}), ElementsAre(1.0f, 1.0f, 0.5f, 0.5f, 1.0f, 1.0f));
  PushOnes(*shard, {1});
  EXPECT_THAT(PullRows(*shard, "emb", {1}), ElementsAre(0.5f, 0.5f));
  EXPECT_EQ(Stats(*shard).rows(), 2);  // row 1 made again by its push; row 3 only read
}

TEST(Eviction, AmongRowsUpdatedAsOftenTheCapEvictsTheLeastRecentlyTouchedDownToItsLowWater) {
  auto shard = MakeShard(Table(0));
  shard->eviction().Enable(100 * kRowCost);  // high water 95 rows, low water 85
  shard->tables().SetTick(1);
  PushOnes(*shard, Range(0, 60));
  shard->tables().SetTick(2);
  PushOnes(*shard, Range(100, 130));
  EXPECT_EQ(shard->SweepRows(false), 0);  // 90 rows: under the high water
  PushOnes(*shard, Range(130, 160));      // 120 rows
  EXPECT_EQ(shard->eviction().bytes(), 120 * kRowCost);
  EXPECT_EQ(shard->SweepRows(false), 35);  // down to 85 rows, all of them from tick 1
  EXPECT_EQ(shard->eviction().bytes(), 85 * kRowCost);
  EXPECT_EQ(Stats(*shard).rows(), 85);
  // Every row touched at tick 2 is still trained...
  EXPECT_THAT(PullRows(*shard, "emb", Range(100, 160)), Each(Eq(0.5f)));
  // ...and 25 of the tick-1 rows are; the other 35 read the initializer again.
  const std::vector<float> old = PullRows(*shard, "emb", Range(0, 60));
  EXPECT_EQ(std::count(old.begin(), old.end(), 0.5f), 2 * 25);
  EXPECT_EQ(std::count(old.begin(), old.end(), 1.0f), 2 * 35);
}

TEST(Eviction, TheCapKeepsTheMostUpdatedRowsHoweverLongAgo) {
  auto shard = MakeShard(Table(0));
  shard->eviction().Enable(100 * kRowCost);
  shard->tables().SetTick(1);
  for (int i = 0; i < 4; ++i) PushOnes(*shard, Range(0, 10));  // 1 - 4 * 0.5 = -1
  shard->tables().SetTick(2);
  PushOnes(*shard, Range(100, 200));  // 110 rows: 25 must go
  EXPECT_EQ(shard->SweepRows(false), 25);
  // Rows 0..9, older but updated 4 times each, stay; 25 of the once-updated rows go.
  EXPECT_THAT(PullRows(*shard, "emb", Range(0, 10)), Each(Eq(-1.0f)));
  const std::vector<float> once = PullRows(*shard, "emb", Range(100, 200));
  EXPECT_EQ(std::count(once.begin(), once.end(), 1.0f), 2 * 25);
}

TEST(Eviction, UnderTheCapTheRowsStayBoundedAndSlotsAreReused) {
  auto shard = MakeShard(Table(0));
  shard->eviction().Enable(4000 * kRowCost);
  int64_t bytes_early = 0;
  for (uint32_t tick = 1; tick <= 20; ++tick) {
    shard->tables().SetTick(tick);
    PushOnes(*shard, Range(tick * 10000, tick * 10000 + 2000));
    shard->SweepRows(false);
    EXPECT_LE(shard->eviction().bytes(), 4000 * kRowCost) << "tick " << tick;
    if (tick == 5) bytes_early = Stats(*shard).bytes();
  }
  // 40,000 rows went through; the memory they take stays near what the cap's 4,000 took
  // by round 5, because evicted rows' slots take the new rows. It still creeps up (about
  // 1% a round here): a stripe that gets more new rows than it freed grows, so each
  // stripe ends up sized for its own peak (a few percent over the mean on large tables).
  EXPECT_LE(Stats(*shard).bytes(), bytes_early * 3 / 2);
  EXPECT_LE(Stats(*shard).rows(), 4000);
  // The newest rows are the ones kept.
  EXPECT_THAT(PullRows(*shard, "emb", Range(200000, 202000)), Each(Eq(0.5f)));
}

TEST(Eviction, AnEvictedIdComesBackThroughAdmission) {
  auto shard = MakeShard(Table(/*evict_after_s=*/1, /*admit_after=*/2));
  shard->tables().SetTick(1);
  PushOnes(*shard, {5});
  PushOnes(*shard, {5});  // admitted: 1 - 0.5
  EXPECT_THAT(PullRows(*shard, "emb", {5}), ElementsAre(0.5f, 0.5f));
  shard->tables().SetTick(20);
  EXPECT_EQ(shard->SweepRows(true), 1);
  EXPECT_THAT(PullRows(*shard, "emb", {5}), ElementsAre(0.0f, 0.0f));  // no row: the shared default
  EXPECT_EQ(Stats(*shard).rows(), 0);
  // The sketch has seen id 5 twice recently, so its next update admits it again, onto
  // a fresh row from the initializer (1.0), not its old one.
  PushOnes(*shard, {5});
  EXPECT_THAT(PullRows(*shard, "emb", {5}), ElementsAre(0.5f, 0.5f));
  EXPECT_EQ(Stats(*shard).admitted(), 2);
}

TEST(Eviction, IncrementalCheckpointsRecordEvictionsAndRestoreTheSameRows) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / ("eviction_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  auto shard = MakeShard(Table(/*evict_after_s=*/1));
  Checkpointer ckpt(dir, 0, 2, 10);
  shard->tables().SetTick(1);
  PushOnes(*shard, Range(0, 20));
  ASSERT_TRUE(ckpt.Save(*shard).ok());  // full: rows 0..19
  shard->tables().SetTick(5);
  PushOnes(*shard, Range(10, 20));       // rows 10..19 at tick 5: 0.0
  shard->tables().SetTick(12);
  ASSERT_EQ(shard->SweepRows(true), 10);  // rows 0..9 go
  PushOnes(*shard, {3});                  // row 3 comes back (1 - 0.5) into a reused slot
  PushOnes(*shard, {30});                 // and a new row
  auto delta = ckpt.Save(*shard);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_THAT(*delta, ::testing::EndsWith(".delta"));
  auto restored = Checkpointer(dir, 0).RestoreLatest(1);
  ASSERT_TRUE(restored.ok() && restored->shard) << restored.status();
  EXPECT_EQ(Stats(*restored->shard).rows(), 12);  // 3, 10..19, 30
  const std::vector<int64_t> all = Range(0, 31);
  EXPECT_EQ(PullRows(*restored->shard, "emb", all), PullRows(*shard, "emb", all));
  std::filesystem::remove_all(dir);
}

// A primary's replication layer that hands the stream to the test.
class RecordingHook : public ReplicationHook {
 public:
  Status CheckPrimary() const override { return primary_ ? absl::OkStatus() : absl::UnavailableError("a backup"); }
  StatusOr<int64_t> ForwardPush(const PushFrame&) override { return ++position_; }
  StatusOr<int64_t> ForwardInit(const proto::InitRequest&) override { return ++position_; }
  StatusOr<int64_t> ForwardStepComplete(int) override { return ++position_; }
  StatusOr<int64_t> ForwardEviction(const proto::SparseRowsMsg& evicted, bool) override {
    evictions.push_back(evicted);
    return ++position_;
  }
  int64_t last_position() const override { return position_; }
  Status WaitAcked(int64_t, absl::Time) override { return absl::OkStatus(); }

  void set_primary(bool primary) { primary_ = primary; }
  std::vector<proto::SparseRowsMsg> evictions;

 private:
  bool primary_ = true;
  int64_t position_ = 0;
};

TEST(Eviction, ABackupEvictsWhatItsPrimarysStreamSaysAndNothingElse) {
  RecordingHook primary_hook, backup_hook;
  backup_hook.set_primary(false);
  auto primary = MakeShard(Table(0));
  auto backup = MakeShard(Table(0));
  primary->SetReplicationHook(&primary_hook);
  backup->SetReplicationHook(&backup_hook);
  backup->SetFollowing(true);
  for (ParameterShard* s : {primary.get(), backup.get()}) s->eviction().Enable(100 * kRowCost);
  // Both see the same pushes; the backup's clock differs (its own), which must not matter.
  auto push_both = [&](uint32_t primary_tick, uint32_t backup_tick, const std::vector<int64_t>& ids) {
    primary->tables().SetTick(primary_tick);
    backup->tables().SetTick(backup_tick);
    PushOnes(*primary, ids);
    ASSERT_TRUE(backup->FollowPush(PushFrame::FromProtoRef(Ones(ids))).ok());
  };
  push_both(1, 7, Range(0, 60));
  push_both(2, 3, Range(100, 160));
  EXPECT_EQ(backup->SweepRows(true), 0);  // a backup never picks rows itself
  EXPECT_EQ(primary->SweepRows(true), 35);
  ASSERT_FALSE(primary_hook.evictions.empty());
  for (const proto::SparseRowsMsg& m : primary_hook.evictions) ASSERT_TRUE(backup->FollowEviction(m, false).ok());
  EXPECT_EQ(Stats(*backup).rows(), 85);
  // The same rows with the same values (read as the primary would: a backup takes no
  // pulls; iteration orders differ between hash maps, so not their dumps).
  std::vector<int64_t> all = Range(0, 60);
  for (int64_t id : Range(100, 160)) all.push_back(id);
  backup_hook.set_primary(true);
  EXPECT_EQ(PullRows(*backup, "emb", all), PullRows(*primary, "emb", all));
  backup_hook.set_primary(false);
  // A primary that lost its role keeps its rows rather than evict what no stream says.
  push_both(3, 3, Range(200, 260));  // over the cap again
  const int64_t rows = Stats(*primary).rows();
  primary_hook.set_primary(false);
  EXPECT_EQ(primary->SweepRows(false), 0);
  EXPECT_EQ(Stats(*primary).rows(), rows);
}

TEST(Eviction, ATimeToLiveOutOfRangeIsRefusedNamingTheTable) {
  ParameterShard shard(0, 1);
  auto init = shard.Init(MakeInit({Table(-1)}, Sgd(0.5f)));
  ASSERT_FALSE(init.ok());
  EXPECT_EQ(init.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(init.status().message(), HasSubstr("parameter 'emb': evict_after_s -1 is outside [0, 31536000]"));
  EXPECT_FALSE(shard.initialized());
}

// Issue 40: without a cap of its own, a pserver with a memory budget caps its sparse
// rows at what the dense parameters leave of it, and sweeps down to it: pushes of ever
// new ids cannot take the host's memory.
TEST(Eviction, WithoutACapOfItsOwnTheSparseRowsGetWhatTheDenseParametersLeaveOfTheBudget) {
  auto shard = std::make_unique<ParameterShard>(0, 1);
  constexpr int64_t kBudget = 1 << 20;  // 1 MB
  shard->set_memory_budget(kBudget, /*cap_sparse_rows=*/true);
  EXPECT_EQ(shard->eviction().cap_bytes(), kBudget) << "nothing dense yet: all of it";
  // 192 KB of dense floats (SGD: no optimizer slots) leave 832 KB to the rows.
  auto init = shard->Init(MakeInit({DenseSpec("w", {49152}, 4096, InitSpec::Constant(0.0f)), Table(0)}, Sgd(0.5f)));
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(shard->eviction().cap_bytes(), kBudget - 49152 * 4);
  ASSERT_TRUE(shard->tables().evicting());
  for (int64_t from = 0; from < 40000; from += 4000) {
    shard->tables().SetTick(static_cast<uint32_t>(from / 4000 + 1));
    PushOnes(*shard, Range(from, from + 4000));
  }
  EXPECT_GT(shard->eviction().bytes(), shard->eviction().cap_bytes()) << "40000 rows of 40 bytes: 1.6 MB";
  EXPECT_GT(shard->SweepRows(/*ttl_due=*/false), 0);
  EXPECT_LE(shard->eviction().bytes(), shard->eviction().cap_bytes());
  // A budget of -1 (no limit) and an explicit cap leave the rows alone.
  auto unlimited = std::make_unique<ParameterShard>(0, 1);
  unlimited->set_memory_budget(0, /*cap_sparse_rows=*/true);
  ASSERT_TRUE(unlimited->Init(MakeInit({Table(0)}, Sgd(0.5f))).ok());
  EXPECT_EQ(unlimited->eviction().cap_bytes(), 0);
  EXPECT_FALSE(unlimited->tables().evicting());
}

}  // namespace
}  // namespace pl::pserver
