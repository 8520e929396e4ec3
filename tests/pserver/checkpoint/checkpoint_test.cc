// Checkpoints: round trip with optimizer state, rotation, corrupt-newest fallback,
// incremental ones (chains of deltas over a full one).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pserver/checkpoint/checkpoint.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;
namespace fs = std::filesystem;

std::vector<fs::path>& TempDirsMade() {
  static auto* dirs = new std::vector<fs::path>();
  return *dirs;
}

// A fresh directory for one test, removed when the test binary exits.
std::string TempDir(const std::string& name) {
  static const bool cleanup_registered = [] {
    return std::atexit([] {
             std::error_code ignored;
             for (const fs::path& d : TempDirsMade()) fs::remove_all(d, ignored);
           }) == 0;
  }();
  (void)cleanup_registered;
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("pserver_ckpt_", name, "_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  TempDirsMade().push_back(dir);
  return dir.string();
}

OptimizerSpec Adam() {
  OptimizerSpec o;
  o.kind = OptimizerKind::kAdam;
  o.learning_rate = 0.05f;
  return o;
}

constexpr int kP = 2;

// A shard of index 0 with Adam state, some steps done, dense and sparse.
void Train(ParameterShard& shard, int pushes, float scale) {
  std::vector<int64_t> ids = OwnedIds(0, kP, 4);
  for (int k = 0; k < pushes; ++k) {
    proto::PushRequest push;
    for (int b = 0; b < 6; ++b) {
      if (ShardOfDenseBlock("w", b, kP) != 0) continue;
      AddDense(&push, "w", b, std::vector<float>(std::min(4, 23 - 4 * b), scale * (b + 1 + k)));
    }
    AddRows(&push, "emb", 3, {ids[k % 4]}, {scale, -scale, 2 * scale});
    ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  }
}

std::unique_ptr<ParameterShard> MakeShard() {
  auto shard = std::make_unique<ParameterShard>(0, kP);
  EXPECT_TRUE(shard->Init(MakeInit({DenseSpec("w", {23}, 4), SparseSpec("emb", 3)}, Adam(), 11)).ok());
  return shard;
}

// Everything observable: pulled values, then the effect of one more identical push
// (equal only if optimizer state and step counts are equal too).
std::vector<float> Observe(ParameterShard& shard) {
  std::vector<float> out;
  std::vector<int64_t> ids = OwnedIds(0, kP, 5);
  for (int b = 0; b < 6; ++b) {
    if (ShardOfDenseBlock("w", b, kP) == 0) {
      auto v = PullBlock(shard, "w", b);
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  auto rows = PullRows(shard, "emb", ids);
  out.insert(out.end(), rows.begin(), rows.end());
  Train(shard, 4, 0.3f);
  for (int b = 0; b < 6; ++b) {
    if (ShardOfDenseBlock("w", b, kP) == 0) {
      auto v = PullBlock(shard, "w", b);
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  rows = PullRows(shard, "emb", ids);
  out.insert(out.end(), rows.begin(), rows.end());
  out.push_back(static_cast<float>(shard.version()));
  return out;
}

TEST(Checkpoint, RoundTripKeepsValuesOptimizerStateStepsAndVersion) {
  const std::string dir = TempDir("roundtrip");
  auto shard = MakeShard();
  Train(*shard, 5, 1.0f);
  Checkpointer ckpt(dir, 0);
  auto path = ckpt.Save(*shard);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(*path, HasSubstr("pserver-0/ckpt-"));

  auto restored = ckpt.RestoreLatest(kP);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NE(restored->shard, nullptr);
  EXPECT_EQ(restored->path, *path);
  EXPECT_TRUE(restored->skipped.empty());
  EXPECT_EQ(restored->shard->version(), 5);
  EXPECT_FALSE(restored->shard->sync());
  EXPECT_EQ(restored->shard->Counters().sparse_rows, shard->Counters().sparse_rows);
  // A trainer's Init after the restart finds the shard as it was.
  auto init = restored->shard->Init(MakeInit({DenseSpec("w", {23}, 4), SparseSpec("emb", 3)}, Adam(), 11));
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_FALSE(init->created());
  EXPECT_EQ(init->version(), 5);
  EXPECT_EQ(Observe(*restored->shard), Observe(*shard));
}

TEST(Checkpoint, KeepsTheLatestTwoAndFallsBackFromACorruptNewest) {
  const std::string dir = TempDir("corrupt");
  auto shard = MakeShard();
  Checkpointer ckpt(dir, 0, /*keep=*/2, /*full_every=*/1);
  Train(*shard, 1, 1.0f);
  ASSERT_TRUE(ckpt.Save(*shard).ok());
  Train(*shard, 1, 1.0f);
  auto older = ckpt.Save(*shard);
  ASSERT_TRUE(older.ok());
  auto expected = MakeShard();
  Train(*expected, 1, 1.0f);
  Train(*expected, 1, 1.0f);
  Train(*shard, 1, 1.0f);
  auto newest = ckpt.Save(*shard);
  ASSERT_TRUE(newest.ok());
  EXPECT_THAT(ckpt.List(), ::testing::ElementsAre(*newest, *older));

  {  // flip one byte in the middle of the newest
    std::fstream f(*newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(fs::file_size(*newest) / 2);
    char c;
    f.seekg(fs::file_size(*newest) / 2);
    f.get(c);
    f.seekp(fs::file_size(*newest) / 2);
    f.put(static_cast<char>(c ^ 0x10));
  }
  ParameterShard probe(0, kP);
  Status s = Checkpointer::Load(*newest, &probe);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(*newest));
  EXPECT_THAT(s.message(), HasSubstr("checksum"));

  auto restored = Checkpointer(dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NE(restored->shard, nullptr);
  EXPECT_EQ(restored->path, *older);
  EXPECT_THAT(restored->chain, ::testing::ElementsAre(*older));
  ASSERT_EQ(restored->skipped.size(), 1u);
  EXPECT_THAT(restored->skipped[0], HasSubstr(*newest));
  EXPECT_EQ(restored->shard->version(), 2);
  EXPECT_EQ(Observe(*restored->shard), Observe(*expected));
}

// ---- incremental checkpoints ----

void CorruptMiddle(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(fs::file_size(path) / 2);
  char c;
  f.seekg(middle);
  f.get(c);
  f.seekp(middle);
  f.put(static_cast<char>(c ^ 0x10));
}

// One push touching `n` of shard 0's rows, from its `first` owned id on.
void TouchRows(ParameterShard& shard, int first, int n, float g) {
  std::vector<int64_t> touched = OwnedIds(0, kP, first + n);
  touched.erase(touched.begin(), touched.begin() + first);
  proto::PushRequest push;
  AddRows(&push, "emb", 3, touched, std::vector<float>(3 * touched.size(), g));
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
}

// Every dense value and rows [0, rows) of "emb", then the version.
std::vector<float> Values(ParameterShard& shard, int rows) {
  std::vector<float> out;
  for (int b = 0; b < 6; ++b) {
    if (ShardOfDenseBlock("w", b, kP) != 0) continue;
    auto v = PullBlock(shard, "w", b);
    out.insert(out.end(), v.begin(), v.end());
  }
  auto r = PullRows(shard, "emb", OwnedIds(0, kP, rows));
  out.insert(out.end(), r.begin(), r.end());
  out.push_back(static_cast<float>(shard.version()));
  return out;
}

constexpr int kRows = 2000;

TEST(Checkpoint, IncrementalOnesHoldTheChangedRowsAndRestoreAsAFullOneDoes) {
  const std::string inc_dir = TempDir("incremental"), full_dir = TempDir("incremental_ref");
  auto shard = MakeShard();
  TouchRows(*shard, 0, kRows, 1.0f);
  Train(*shard, 2, 1.0f);
  Checkpointer inc(inc_dir, 0, /*keep=*/2, /*full_every=*/10);
  auto base = inc.Save(*shard);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_THAT(*base, ::testing::EndsWith(".bin"));
  TouchRows(*shard, 0, kRows / 100, 0.5f);  // 1% of the rows
  Train(*shard, 1, 0.7f);
  auto delta1 = inc.Save(*shard);
  ASSERT_TRUE(delta1.ok()) << delta1.status();
  EXPECT_THAT(*delta1, ::testing::EndsWith(".delta"));
  // The rows changed and every dense block: a fraction of the whole.
  EXPECT_LT(fs::file_size(*delta1) * 20, fs::file_size(*base)) << fs::file_size(*delta1) << " vs " << fs::file_size(*base);
  TouchRows(*shard, 10, 30, 0.25f);  // overlaps the rows of the first delta
  auto delta2 = inc.Save(*shard);
  ASSERT_TRUE(delta2.ok());
  Checkpointer full(full_dir, 0, 2, /*full_every=*/1);
  ASSERT_TRUE(full.Save(*shard).ok());

  auto from_chain = Checkpointer(inc_dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(from_chain.ok() && from_chain->shard) << from_chain.status();
  EXPECT_THAT(from_chain->chain, ::testing::ElementsAre(*base, *delta1, *delta2));
  EXPECT_EQ(from_chain->path, *delta2);
  EXPECT_TRUE(from_chain->skipped.empty());
  auto from_full = Checkpointer(full_dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(from_full.ok() && from_full->shard);
  const std::vector<float> live = Values(*shard, kRows);
  EXPECT_EQ(Values(*from_chain->shard, kRows), live);
  EXPECT_EQ(Values(*from_full->shard, kRows), live);
  // Optimizer state and step counts too: one more identical push lands the same.
  EXPECT_EQ(Observe(*from_chain->shard), Observe(*shard));
}

TEST(Checkpoint, ACorruptDeltaIsPassedOverForTheGoodStateBeforeIt) {
  const std::string dir = TempDir("corrupt_delta");
  auto shard = MakeShard();
  TouchRows(*shard, 0, 200, 1.0f);
  Checkpointer ckpt(dir, 0, 2, 10);
  auto base = ckpt.Save(*shard);
  const std::vector<float> at_base = Values(*shard, 200);
  TouchRows(*shard, 0, 20, 0.5f);
  Train(*shard, 1, 1.0f);
  auto delta1 = ckpt.Save(*shard);
  const std::vector<float> at_delta1 = Values(*shard, 200);
  TouchRows(*shard, 20, 20, 0.5f);
  auto delta2 = ckpt.Save(*shard);
  ASSERT_TRUE(base.ok() && delta1.ok() && delta2.ok());

  CorruptMiddle(*delta2);
  auto restored = Checkpointer(dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(restored.ok() && restored->shard) << restored.status();
  EXPECT_THAT(restored->chain, ::testing::ElementsAre(*base, *delta1));
  ASSERT_EQ(restored->skipped.size(), 1u);
  EXPECT_THAT(restored->skipped[0], HasSubstr("checksum"));
  EXPECT_EQ(Values(*restored->shard, 200), at_delta1);

  // The first delta corrupt too: the second cannot be applied without it.
  CorruptMiddle(*delta1);
  restored = Checkpointer(dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(restored.ok() && restored->shard);
  EXPECT_THAT(restored->chain, ::testing::ElementsAre(*base));
  EXPECT_EQ(restored->skipped.size(), 2u);
  EXPECT_EQ(Values(*restored->shard, 200), at_base);

  // A delta missing from the middle of a chain ends it the same way.
  fs::remove(*delta1);
  restored = Checkpointer(dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(restored.ok() && restored->shard);
  EXPECT_THAT(restored->chain, ::testing::ElementsAre(*base));
  ASSERT_EQ(restored->skipped.size(), 1u);
  EXPECT_THAT(restored->skipped[0], HasSubstr("missing"));
}

TEST(Checkpoint, EveryNthIsFullAndOnlyTheChainsOfTheNewestFullOnesAreKept) {
  const std::string dir = TempDir("chains");
  auto shard = MakeShard();
  Checkpointer ckpt(dir, 0, /*keep=*/2, /*full_every=*/3);
  std::vector<std::string> paths;
  for (int i = 0; i < 7; ++i) {
    Train(*shard, 1, 0.1f * (i + 1));
    auto p = ckpt.Save(*shard);
    ASSERT_TRUE(p.ok()) << p.status();
    paths.push_back(*p);
  }
  for (int i : {0, 3, 6}) EXPECT_THAT(paths[i], ::testing::EndsWith(".bin")) << i;
  for (int i : {1, 2, 4, 5}) EXPECT_THAT(paths[i], ::testing::EndsWith(".delta")) << i;
  // Two full ones (4 and 7) and the deltas after the older of them.
  EXPECT_THAT(ckpt.List(), ::testing::ElementsAre(paths[6], paths[5], paths[4], paths[3]));
  auto restored = Checkpointer(dir, 0).RestoreLatest(kP);
  ASSERT_TRUE(restored.ok() && restored->shard);
  EXPECT_THAT(restored->chain, ::testing::ElementsAre(paths[6]));
  // A new process's Checkpointer starts with a full one: the marks of the one before
  // it died with it.
  Checkpointer next(dir, 0, 2, 3);
  ParameterShard& again = *restored->shard;
  Train(again, 1, 0.5f);
  auto first = next.Save(again);
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(*first, ::testing::EndsWith(".bin"));
}

TEST(Checkpoint, TruncatedFileIsDataLossAndOtherShardCountIsRefused) {
  const std::string dir = TempDir("trunc");
  auto shard = MakeShard();
  Train(*shard, 1, 1.0f);
  Checkpointer ckpt(dir, 0);
  auto path = ckpt.Save(*shard);
  ASSERT_TRUE(path.ok());
  const std::string copy = *path + ".copy";
  fs::copy_file(*path, copy);
  fs::resize_file(*path, fs::file_size(*path) - 7);
  ParameterShard probe(0, kP);
  EXPECT_EQ(Checkpointer::Load(*path, &probe).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(probe.initialized());
  auto none = ckpt.RestoreLatest(kP);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shard, nullptr);  // the only file is corrupt: start fresh
  EXPECT_EQ(none->skipped.size(), 1u);

  fs::rename(copy, *path);
  auto other = Checkpointer(dir, 0).RestoreLatest(kP + 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("pserver 0 of 2"));
}

TEST(Checkpoint, SyncFlagAndEmptyDirectory) {
  const std::string dir = TempDir("sync");
  Checkpointer ckpt(dir, 1);
  auto nothing = ckpt.RestoreLatest(3);
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(nothing->shard, nullptr);
  ParameterShard shard(1, 3);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2)}, Sgd(0.1f), 3, /*sync=*/true)).ok());
  ASSERT_TRUE(ckpt.Save(shard).ok());
  auto restored = ckpt.RestoreLatest(3);
  ASSERT_TRUE(restored.ok() && restored->shard);
  EXPECT_TRUE(restored->shard->sync());
  EXPECT_EQ(Dump(*restored->shard), Dump(shard));
}

}  // namespace
}  // namespace pl::pserver
