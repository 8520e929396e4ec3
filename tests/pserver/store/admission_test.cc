// Admission (a table's admit_after): an id gets its own row only at its Nth pushed
// update; before that it reads zeros and its gradients change nothing. The sightings
// are part of the shard's state, so a replica loaded from a snapshot and a shard
// restored from checkpoints admit the same ids at the same update.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::ParamSpec Table(int64_t admit_after) {
  proto::ParamSpec s = SparseSpec("emb", 2, 0, InitSpec::Constant(1.0f));
  s.set_admit_after(admit_after);
  return s;
}

std::unique_ptr<ParameterShard> MakeShard(int64_t admit_after) {
  auto shard = std::make_unique<ParameterShard>(0, 1);
  auto init = shard->Init(MakeInit({Table(admit_after)}, Sgd(0.5f)));
  EXPECT_TRUE(init.ok()) << init.status();
  return shard;
}

void PushOnes(ParameterShard& shard, std::vector<int64_t> ids) {
  proto::PushRequest push;
  AddRows(&push, "emb", 2, ids, std::vector<float>(2 * ids.size(), 1.0f));
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
}

proto::TableStats Stats(const ParameterShard& shard) { return shard.tables().Stats()[0]; }

TEST(Admission, AnIdGetsItsRowAtItsNthUpdateAndReadsZerosUntilThen) {
  auto shard = MakeShard(3);
  EXPECT_THAT(PullRows(*shard, "emb", {5}), ElementsAre(0.0f, 0.0f));  // a pull creates nothing
  EXPECT_EQ(Stats(*shard).rows(), 0);
  PushOnes(*shard, {5, 6});
  PushOnes(*shard, {5});
  EXPECT_THAT(PullRows(*shard, "emb", {5, 6}), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));  // the gradients changed nothing
  EXPECT_EQ(Stats(*shard).rows(), 0);
  PushOnes(*shard, {5});  // the third: a row from the initializer, then this update (SGD 0.5)
  EXPECT_THAT(PullRows(*shard, "emb", {5, 6}), ElementsAre(0.5f, 0.5f, 0.0f, 0.0f));
  PushOnes(*shard, {5});
  EXPECT_THAT(PullRows(*shard, "emb", {5}), ElementsAre(0.0f, 0.0f));
  const proto::TableStats s = Stats(*shard);
  EXPECT_EQ(s.rows(), 1);
  EXPECT_EQ(s.admitted(), 1);
  EXPECT_EQ(s.admit_after(), 3);
  // Without admission a row exists from its first push; a pull reads the initializer.
  auto open = MakeShard(0);
  EXPECT_THAT(PullRows(*open, "emb", {5}), ElementsAre(1.0f, 1.0f));
  EXPECT_EQ(Stats(*open).rows(), 0);
  PushOnes(*open, {5});
  EXPECT_EQ(Stats(*open).rows(), 1);
}

TEST(Admission, TheSightingsTravelWithTheStateSoReplicasAdmitAlike) {
  auto primary = MakeShard(3);
  PushOnes(*primary, {9, 10});
  PushOnes(*primary, {9});
  ParameterShard joined(0, 1);
  ASSERT_TRUE(LoadDump(joined, Dump(*primary)).ok());
  // One more update admits id 9 on both (its third); id 10 has had one only.
  for (ParameterShard* s : {primary.get(), &joined}) PushOnes(*s, {9, 10});
  EXPECT_EQ(PullRows(joined, "emb", {9, 10}), PullRows(*primary, "emb", {9, 10}));
  EXPECT_THAT(PullRows(joined, "emb", {9, 10}), ElementsAre(0.5f, 0.5f, 0.0f, 0.0f));
  // A shard that never saw those updates would not have admitted id 9 yet.
  auto fresh = MakeShard(3);
  PushOnes(*fresh, {9});
  EXPECT_THAT(PullRows(*fresh, "emb", {9}), ElementsAre(0.0f, 0.0f));
}

TEST(Admission, CheckpointsKeepTheSightingsFullAndIncremental) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / ("admission_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  auto shard = MakeShard(3);
  Checkpointer ckpt(dir, 0, 2, 10);
  PushOnes(*shard, {4});
  ASSERT_TRUE(ckpt.Save(*shard).ok());  // full: one sighting of 4
  PushOnes(*shard, {4});
  auto delta = ckpt.Save(*shard);       // incremental: no row changed, two sightings of 4
  ASSERT_TRUE(delta.ok());
  EXPECT_THAT(*delta, ::testing::EndsWith(".delta"));
  auto restored = Checkpointer(dir, 0).RestoreLatest(1);
  ASSERT_TRUE(restored.ok() && restored->shard) << restored.status();
  PushOnes(*restored->shard, {4});
  EXPECT_THAT(PullRows(*restored->shard, "emb", {4}), ElementsAre(0.5f, 0.5f));
  std::filesystem::remove_all(dir);
}

TEST(Admission, AnAdmitAfterOutOfRangeIsRefusedNamingTheTable) {
  ParameterShard shard(0, 1);
  auto init = shard.Init(MakeInit({Table(70000)}, Sgd(0.5f)));
  ASSERT_FALSE(init.ok());
  EXPECT_EQ(init.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(init.status().message(), HasSubstr("parameter 'emb': admit_after 70000 is outside [0, 65535]"));
  EXPECT_FALSE(shard.initialized());
}

}  // namespace
}  // namespace pl::pserver
