// A shard that lost every copy is created again from the seed; the first trainer with a
// learned copy to Init it after that gets a ticket, and with it may give the shard its
// copy of the values (InitRequest.restore), once. Issue 40: a sync job's shard whose two replicas were
// both killed otherwise starts over and costs the job 0.01-0.02 of accuracy.
#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/optim/lr_schedule.h"
#include "pserver/store/dense_store.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

constexpr int kBlock = 8;
constexpr int kNumel = 20;  // three blocks: 8, 8, 4

OptimizerSpec Adam() {
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.05f;
  return adam;
}

// `learned`: the version the caller's copy had seen (0: none, as at a job's start).
proto::InitRequest ModelInit(int64_t learned = 0, const OptimizerSpec& optimizer = Adam()) {
  proto::InitRequest r = MakeInit({DenseSpec("w", {kNumel}, kBlock)}, optimizer, /*seed=*/11);
  r.set_learned_version(learned);
  return r;
}

// What a trainer that learned `base + i / 8` for element i sends.
proto::InitRequest RestoreOf(uint64_t ticket, float base = 0.5f) {
  proto::InitRequest r;
  r.set_restore_ticket(ticket);
  r.set_learned_version(42);
  for (int b = 0; b * kBlock < kNumel; ++b) {
    std::vector<float> v;
    for (int i = b * kBlock; i < std::min(kNumel, (b + 1) * kBlock); ++i) v.push_back(base + i / 8.0f);
    proto::DenseBlock* blk = r.add_restore();
    blk->set_param("w");
    blk->set_block(b);
    SetFloats(blk->mutable_values(), v.data(), static_cast<int64_t>(v.size()));
  }
  return r;
}

std::vector<float> AllValues(ParameterShard& shard) {
  std::vector<float> all;
  for (int b = 0; b * kBlock < kNumel; ++b) {
    const std::vector<float> v = PullBlock(shard, "w", b);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

Status PushGradient(ParameterShard& shard, float g) {
  proto::PushRequest r;
  for (int b = 0; b * kBlock < kNumel; ++b) {
    AddDense(&r, "w", b, std::vector<float>(std::min(kBlock, kNumel - b * kBlock), g));
  }
  return shard.Push(PushFrame::FromProtoRef(r)).status();
}

TEST(RestoreTest, TheFirstLearnedCopyReplacesTheSeedsValuesOnceAndTheOptimizerRestartsWarm) {
  ParameterShard shard(0, 1);
  // A trainer that joined after the loss creates it: it has nothing to give.
  auto first = shard.Init(ModelInit());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->created());
  EXPECT_EQ(first->restore_ticket(), 0u);
  // The first trainer that had learned from the shard gets the ticket; the next does not.
  auto created = shard.Init(ModelInit(/*learned=*/417));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->created());
  ASSERT_NE(created->restore_ticket(), 0u);
  auto other = shard.Init(ModelInit(/*learned=*/417));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->restore_ticket(), 0u);
  // An update lands first (async: another trainer's push): its Adam state must not
  // survive the restore.
  ASSERT_TRUE(PushGradient(shard, 3.0f).ok());

  // A wrong ticket is refused and changes nothing.
  const std::vector<float> before = AllValues(shard);
  auto forged = shard.Init(RestoreOf(created->restore_ticket() ^ 1));
  ASSERT_EQ(forged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(forged.status().message(), HasSubstr("ticket"));
  EXPECT_EQ(AllValues(shard), before);

  auto restored = shard.Init(RestoreOf(created->restore_ticket()));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->restored());
  std::vector<float> want;
  for (int i = 0; i < kNumel; ++i) want.push_back(0.5f + i / 8.0f);
  EXPECT_EQ(AllValues(shard), want);

  // Spent: the same ticket again is refused, and the values stay.
  auto again = shard.Init(RestoreOf(created->restore_ticket(), /*base=*/9.0f));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(AllValues(shard), want);

  // The optimizer starts over: the next push moves the values exactly as it moves a
  // fresh shard's that was restored before any update.
  ParameterShard fresh(0, 1);
  auto fresh_created = fresh.Init(ModelInit(/*learned=*/1));
  ASSERT_TRUE(fresh_created.ok());
  ASSERT_TRUE(fresh.Init(RestoreOf(fresh_created->restore_ticket())).ok());
  ASSERT_TRUE(PushGradient(shard, -1.0f).ok());
  ASSERT_TRUE(PushGradient(fresh, -1.0f).ok());
  const std::vector<float> after = AllValues(shard);
  EXPECT_EQ(after, AllValues(fresh));
  // Adam restarts warm: the first step is a tenth of the learning rate against the
  // gradient's sign (from zeroed moments it would be the whole rate, 0.05).
  for (int i = 0; i < kNumel; ++i) EXPECT_NEAR(after[i], want[i] + 0.005f, 1e-6f) << i;
}

TEST(RestoreTest, ABadRestoreIsRefusedWholeAndChangesNothing) {
  ParameterShard shard(0, 1);
  auto created = shard.Init(ModelInit(/*learned=*/5));
  ASSERT_TRUE(created.ok());
  const std::vector<float> seed = AllValues(shard);

  proto::InitRequest nan = RestoreOf(created->restore_ticket());
  std::vector<float> bad(kBlock, 1.0f);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  SetFloats(nan.mutable_restore(1)->mutable_values(), bad.data(), kBlock);
  auto r = shard.Init(nan);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'w' block 1 has a non-finite value"));
  EXPECT_EQ(AllValues(shard), seed);  // block 0, checked before block 1, was not written

  // Each check with a ticket of its own (a refused restore spends its ticket).
  ParameterShard second(0, 1);
  auto second_created = second.Init(ModelInit(/*learned=*/5));
  ASSERT_TRUE(second_created.ok());
  proto::InitRequest short_block = RestoreOf(second_created->restore_ticket());
  short_block.mutable_restore(2)->mutable_values()->resize(8);
  r = second.Init(short_block);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("the block holds 4 floats"));
  EXPECT_EQ(second.Init(RestoreOf(second_created->restore_ticket())).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ParameterShard third(0, 1);
  auto third_created = third.Init(ModelInit(/*learned=*/5));
  ASSERT_TRUE(third_created.ok());
  proto::InitRequest unknown = RestoreOf(third_created->restore_ticket());
  unknown.mutable_restore(0)->set_param("v");
  EXPECT_EQ(third.Init(unknown).status().code(), absl::StatusCode::kNotFound);

  // A ticket with nothing to restore, and a restore of a shard never created.
  proto::InitRequest empty;
  empty.set_restore_ticket(1);
  EXPECT_EQ(ParameterShard(0, 1).Init(empty).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParameterShard(0, 1).Init(RestoreOf(1)).status().code(), absl::StatusCode::kNotFound);
}

// A serving shard in its first seconds (a new job): a trainer that joined and pulled
// from it has a learned copy, but one of this shard's own life, which it never takes.
TEST(RestoreTest, ACopyPulledFromTheShardItselfGetsNoTicket) {
  ParameterShard shard(0, 1);
  auto created = shard.Init(ModelInit());
  ASSERT_TRUE(created.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PushGradient(shard, 1.0f).ok());  // version 3
  for (const int64_t learned : {1, 2, 3}) {
    auto joined = shard.Init(ModelInit(learned));
    ASSERT_TRUE(joined.ok()) << joined.status();
    EXPECT_EQ(joined->restore_ticket(), 0u) << "learned " << learned << " of a shard at version 3";
  }
  auto before = shard.Init(ModelInit(/*learned=*/4));  // seen more than this shard applied
  ASSERT_TRUE(before.ok());
  EXPECT_NE(before->restore_ticket(), 0u);
}

// The window: no ticket once it has passed (a shard that serves a job), one ticket per
// creation, and a ticket redeemed late is refused.
TEST(RestoreTest, ATicketIsIssuedOnceWithinTheWindowOfACreation) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RestoreTicket ticket;
  EXPECT_EQ(ticket.Issue(t0), 0u) << "a shard never created again gives no ticket";
  ticket.Open(t0);
  EXPECT_EQ(ticket.Issue(t0 + RestoreTicket::kWindow + absl::Seconds(1)), 0u);
  ticket.Open(t0);
  const uint64_t issued = ticket.Issue(t0 + absl::Seconds(1));
  ASSERT_NE(issued, 0u);
  EXPECT_EQ(ticket.Issue(t0 + absl::Seconds(2)), 0u);
  const Status late = ticket.Redeem(issued, t0 + RestoreTicket::kWindow + absl::Seconds(1));
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.message(), HasSubstr("after the shard was created"));
  ticket.Open(t0);
  const uint64_t again = ticket.Issue(t0);
  EXPECT_TRUE(ticket.Redeem(again, t0 + absl::Seconds(3)).ok());
  EXPECT_FALSE(ticket.Redeem(again, t0 + absl::Seconds(3)).ok()) << "spent";
}

// The restored blocks count on from the copy's version (42): a learning-rate schedule
// goes on where it was, while Adam counts its own updates from the restore. Both counts
// survive the shard's state (a checkpoint, a snapshot).
TEST(RestoreTest, ARestoredShardKeepsItsScheduleAndBothCountsSurviveItsState) {
  OptimizerSpec halving = Adam();
  LrSchedule schedule;
  schedule.kind = LrSchedule::Kind::kStep;
  schedule.step_size = 40;
  schedule.gamma = 0.5;
  ASSERT_TRUE(EncodeLrSchedule(schedule, &halving).ok());
  ParameterShard shard(0, 1);
  auto created = shard.Init(ModelInit(/*learned=*/5, halving));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_NE(created->restore_ticket(), 0u);
  ASSERT_TRUE(shard.Init(RestoreOf(created->restore_ticket())).ok());
  const std::vector<float> restored = AllValues(shard);
  ASSERT_TRUE(PushGradient(shard, -1.0f).ok());
  // Update 43: the rate is 0.05 * 0.5 (after 42 updates, one halving); Adam's first step
  // since the restore is a tenth of it. Counted from 0 it would be 0.005.
  const std::vector<float> after = AllValues(shard);
  for (int i = 0; i < kNumel; ++i) EXPECT_NEAR(after[i] - restored[i], 0.0025f, 1e-6f) << i;

  // The shard's state, loaded into a fresh shard, steps on exactly as the original.
  const std::string state = Dump(shard);
  ParameterShard reloaded(0, 1);
  ASSERT_TRUE(LoadDump(reloaded, state).ok());
  for (float g : {0.5f, -2.0f, 1.0f}) {
    ASSERT_TRUE(PushGradient(shard, g).ok());
    ASSERT_TRUE(PushGradient(reloaded, g).ok());
  }
  EXPECT_EQ(AllValues(reloaded), AllValues(shard));
  EXPECT_EQ(Dump(reloaded), Dump(shard));
}

// A block's two counts in the one int64 the shard's state has for them: a block never
// restored keeps the plain count older files hold; a restored one packs both; anything
// else negative is refused.
TEST(RestoreTest, TheStepRecordKeepsBothCountsAndRefusesWhatIsNotOne) {
  int64_t step = -1, restarted_at = -1;
  ASSERT_TRUE(DenseStore::ParseStepRecord(DenseStore::StepRecord(417, 0), &step, &restarted_at));
  EXPECT_EQ(DenseStore::StepRecord(417, 0), 417);
  EXPECT_EQ(step, 417);
  EXPECT_EQ(restarted_at, 0);
  for (const auto& [s, r] : std::vector<std::pair<int64_t, int64_t>>{{42, 42}, {43, 42}, {1'000'000'123, 1'000'000'000}}) {
    const int64_t record = DenseStore::StepRecord(s, r);
    EXPECT_LT(record, 0);
    ASSERT_TRUE(DenseStore::ParseStepRecord(record, &step, &restarted_at)) << record;
    EXPECT_EQ(step, s);
    EXPECT_EQ(restarted_at, r);
  }
  // 2^23 updates after the restore no bias correction is left: the plain count.
  EXPECT_EQ(DenseStore::StepRecord(5 + (int64_t{1} << 23), 5), 5 + (int64_t{1} << 23));
  EXPECT_FALSE(DenseStore::ParseStepRecord(-1, &step, &restarted_at)) << "restored at step 0 is no restore";
}

// A backup applies the primary's restore from its stream as it is (the primary checked
// the ticket), and both hold the same bytes.
TEST(RestoreTest, ABackupFollowingTheRestoreHoldsTheSameBytes) {
  ParameterShard primary(0, 1), backup(0, 1);
  backup.SetFollowing(true);
  auto created = primary.Init(ModelInit(/*learned=*/5));
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(backup.FollowInit(ModelInit(/*learned=*/5)).ok());
  const proto::InitRequest restore = RestoreOf(created->restore_ticket());
  ASSERT_TRUE(primary.Init(restore).ok());
  ASSERT_TRUE(backup.FollowInit(restore).ok());
  EXPECT_EQ(Dump(primary), Dump(backup));
}

}  // namespace
}  // namespace pl::pserver
