// The disk tier (pl-pserver --sparse_disk_dir): rows beyond the memory cap move to
// RocksDB instead of being dropped and come back when touched, so a table ten times the
// cap trains exactly as it would without one; checkpoints carry the rows on disk and a
// restore puts what is beyond the cap straight there; a backup moves the same rows.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/store/disk_tier.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::HasSubstr;

constexpr int64_t kRowCost = 40;  // dim 2, SGD (eviction_test.cc)
constexpr int64_t kCap = 100 * kRowCost;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / (name + "_" + std::to_string(getpid()))).string();
}

proto::ParamSpec Table(int64_t admit_after = 0) {
  proto::ParamSpec s = SparseSpec("emb", 2, 0, InitSpec::Uniform(1.0f));
  s.set_admit_after(admit_after);
  return s;
}

std::unique_ptr<ParameterShard> MakeShard(const std::string& disk_dir, int64_t admit_after = 0) {
  auto shard = std::make_unique<ParameterShard>(0, 1);
  if (!disk_dir.empty()) {
    auto tier = DiskTier::Open(disk_dir, kCap);
    EXPECT_TRUE(tier.ok()) << tier.status();
    shard->tables().AttachDiskTier(std::move(*tier));
    shard->eviction().Enable(kCap);
  }
  auto init = shard->Init(MakeInit({Table(admit_after)}, Sgd(0.5f)));
  EXPECT_TRUE(init.ok()) << init.status();
  return shard;
}

void Push(ParameterShard& shard, const std::vector<int64_t>& ids, float g) {
  proto::PushRequest push;
  AddRows(&push, "emb", 2, ids, std::vector<float>(2 * ids.size(), g));
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> ids;
  for (int64_t id = from; id < to; ++id) ids.push_back(id);
  return ids;
}

TEST(DiskTier, PutTakeAndListRowsByTable) {
  auto tier = DiskTier::Open(TempPath("tier"), 0);
  ASSERT_TRUE(tier.ok()) << tier.status();
  DiskTier& t = **tier;
  ASSERT_TRUE(t.Put("a", 7, std::vector<float>{1, 2, 3}).ok());
  ASSERT_TRUE(t.Put("a", 1LL << 40, std::vector<float>{4, 5, 6}).ok());
  ASSERT_TRUE(t.Put("ab", 7, std::vector<float>{7, 8, 9}).ok());  // another table, a name sharing a prefix
  EXPECT_EQ(t.rows("a"), 2);
  EXPECT_EQ(t.rows(), 3);
  std::vector<std::pair<int64_t, float>> seen;
  ASSERT_TRUE(t.ForEach("a", 3, [&](int64_t id, absl::Span<const float> r) {
                 seen.emplace_back(id, r[0]);
                 return absl::OkStatus();
               }).ok());
  EXPECT_THAT(seen, ::testing::ElementsAre(std::make_pair(int64_t{7}, 1.0f), std::make_pair(int64_t{1} << 40, 4.0f)));
  std::vector<float> back(3);
  EXPECT_TRUE(*t.Take("a", 7, absl::MakeSpan(back)));
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3}));
  EXPECT_FALSE(*t.Take("a", 7, absl::MakeSpan(back)));  // taken: no longer here
  std::vector<float> wrong(2);
  EXPECT_EQ(t.Take("ab", 7, absl::MakeSpan(wrong)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(t.rows("ab"), 1);
  EXPECT_EQ(t.rows(), 2);
}

TEST(DiskTier, ATableTenTimesTheCapTrainsExactlyAsWithoutOne) {
  auto open = MakeShard("");
  auto capped = MakeShard(TempPath("tier_train"));
  // 1,000 rows (ten times the cap's 100) in rounds of pushes; each row is updated in
  // several rounds, so rows keep coming back from disk with their state.
  for (uint32_t round = 0; round < 12; ++round) {
    capped->tables().SetTick(round + 1);
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < 1000; ++id) {
      if ((id + round) % 3 == 0) ids.push_back(id);
    }
    const float g = 0.1f * static_cast<float>(round + 1);
    Push(*open, ids, g);
    Push(*capped, ids, g);
    capped->SweepRows(false);
    EXPECT_LE(capped->eviction().bytes(), kCap);
  }
  const proto::TableStats s = capped->tables().Stats()[0];
  EXPECT_LE(s.rows(), 100);
  EXPECT_EQ(s.rows() + s.rows_on_disk(), 1000);
  EXPECT_EQ(s.evicted(), 0);  // nothing was dropped
  EXPECT_GT(capped->tables().disk_bytes(), 0);
  EXPECT_EQ(PullRows(*capped, "emb", Range(0, 1000)), PullRows(*open, "emb", Range(0, 1000)));
}

TEST(DiskTier, ACheckpointCarriesTheRowsOnDiskAndARestorePutsTheExcessThere) {
  const std::string dir = TempPath("tier_ckpt");
  std::filesystem::remove_all(dir);
  auto shard = MakeShard(TempPath("tier_ckpt_disk"));
  shard->tables().SetTick(1);
  Push(*shard, Range(0, 500), 1.0f);
  shard->SweepRows(false);
  ASSERT_GT(shard->tables().Stats()[0].rows_on_disk(), 300);
  Checkpointer ckpt(dir, 0, 2, 10);
  ASSERT_TRUE(ckpt.Save(*shard).ok());
  Push(*shard, Range(0, 10), 1.0f);
  auto second = ckpt.Save(*shard);  // a whole one again: change marks do not follow rows to disk
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(*second, ::testing::Not(::testing::EndsWith(".delta")));
  auto restored = Checkpointer(dir, 0).RestoreLatest(1, [](ParameterShard* s) -> Status {
    PL_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> tier, DiskTier::Open(TempPath("tier_ckpt_restored"), kCap));
    s->tables().AttachDiskTier(std::move(tier));
    s->eviction().Enable(kCap);
    return absl::OkStatus();
  });
  ASSERT_TRUE(restored.ok() && restored->shard) << restored.status();
  const proto::TableStats s = restored->shard->tables().Stats()[0];
  EXPECT_LE(s.rows(), 100);  // never more than the cap in memory, even while restoring
  EXPECT_EQ(s.rows() + s.rows_on_disk(), 500);
  EXPECT_EQ(PullRows(*restored->shard, "emb", Range(0, 500)), PullRows(*shard, "emb", Range(0, 500)));
  std::filesystem::remove_all(dir);
}

TEST(DiskTier, ARowOnDiskNeedsNoNewAdmission) {
  auto shard = MakeShard(TempPath("tier_admit"), /*admit_after=*/3);
  shard->tables().SetTick(1);
  for (int i = 0; i < 3; ++i) Push(*shard, Range(0, 200), 1.0f);  // every id admitted at its third update
  shard->SweepRows(false);
  const int64_t on_disk = shard->tables().Stats()[0].rows_on_disk();
  ASSERT_GT(on_disk, 0);
  // A pull finds each row where it is (not the shared zeros of an id never admitted).
  const std::vector<float> rows = PullRows(*shard, "emb", Range(0, 200));
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 0.0f), 0);
  EXPECT_EQ(shard->tables().Stats()[0].admitted(), 200);
}

TEST(DiskTier, ABackupWithoutADiskTierRefusesToMoveRowsToOne) {
  auto backup = MakeShard("");
  proto::SparseRowsMsg msg;
  msg.set_table("emb");
  msg.add_ids(3);
  Status s = backup->FollowEviction(msg, /*to_disk=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--sparse_disk_dir"));
}

}  // namespace
}  // namespace pl::pserver
