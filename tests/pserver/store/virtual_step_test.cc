// Sync steps of virtual trainers (docs/consistent-training.md): a step takes one
// micro-batch from each virtual trainer its mask names, sums them in virtual-trainer
// order whatever order they came in, counts a second copy once, ignores the live set,
// and a pull of the version before it still gets that version's values.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/dist/step_mask.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class VirtualStep : public ::testing::Test {
 protected:
  void SetUp() override { Init(shard_); }
  static void Init(ParameterShard& shard) {
    ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f)),
                                     SparseSpec("e", 1, 0, InitSpec::Constant(0.0f))},
                                    Sgd(0.5f), 7, /*sync=*/true)).ok());
  }
  // Virtual trainer `v`'s micro-batch of step `step`, computed by trainer `trainer`.
  static StatusOr<int64_t> Push(ParameterShard& shard, int64_t trainer, int64_t v, int64_t step,
                                const std::vector<int64_t>& members, std::vector<float> g,
                                std::vector<int64_t> rows = {}, std::vector<float> row_grads = {}) {
    proto::PushRequest r;
    r.set_trainer_id(trainer);
    r.set_step(step);
    r.set_virtual_trainer(v);
    r.set_step_expects(StepMask(members));
    r.set_num_samples(4);
    AddDense(&r, "p", 0, g);
    if (!rows.empty()) AddRows(&r, "e", 1, rows, row_grads);
    return shard.Push(PushFrame::FromProtoRef(r), absl::InfiniteFuture());
  }
  StatusOr<int64_t> Push(int64_t trainer, int64_t v, int64_t step, const std::vector<int64_t>& members,
                         std::vector<float> g) {
    return Push(shard_, trainer, v, step, members, std::move(g));
  }
  // The dense block at exactly `version` (PullRequest.exact_version).
  StatusOr<std::vector<float>> PullExact(int64_t version) {
    proto::PullRequest req;
    proto::DenseBlock* b = req.add_dense();
    b->set_param("p");
    b->set_block(0);
    req.set_min_version(version);
    req.set_exact_version(true);
    proto::PullResponse resp;
    PL_RETURN_IF_ERROR(shard_.Pull(req, absl::InfiniteFuture(), &resp));
    EXPECT_EQ(resp.version(), version);
    return Floats(resp.dense(0).values());
  }
  ParameterShard shard_{0, 1};
};

// 1e8 + 0.25 rounds to 1e8 in float, so the sum depends on its order: in virtual-trainer
// order it is (1e8 + 0.25) - 1e8 = 0, arrival order (2, 0, 1) would give 0.25.
TEST_F(VirtualStep, MicroBatchesAreSummedInVirtualTrainerOrderWhateverOrderTheyCome) {
  const std::vector<int64_t> all = {0, 1, 2};
  ASSERT_TRUE(Push(/*trainer=*/9, /*v=*/2, 0, all, {-1e8f, 3.0f}).ok());
  ASSERT_TRUE(Push(4, 0, 0, all, {1e8f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 0);
  ASSERT_TRUE(Push(4, 1, 0, all, {0.25f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 1);
  // mean over the 3 virtual trainers, lr 0.5: p0 = 1 - 0.5 * 0 / 3, p1 = 1 - 0.5 * 3 / 3
  EXPECT_THAT(PullBlock(shard_, "p", 0), ElementsAre(1.0f, 0.5f));

  ParameterShard in_order{0, 1};
  Init(in_order);
  ASSERT_TRUE(Push(in_order, 1, 0, 0, all, {1e8f, 0.0f}).ok());
  ASSERT_TRUE(Push(in_order, 1, 1, 0, all, {0.25f, 0.0f}).ok());
  ASSERT_TRUE(Push(in_order, 1, 2, 0, all, {-1e8f, 3.0f}).ok());
  EXPECT_EQ(Dump(in_order), Dump(shard_));
}

TEST_F(VirtualStep, ASecondCopyOfAMicroBatchCountsOnceWhoeverSendsIt) {
  const std::vector<int64_t> both = {0, 1};
  ASSERT_TRUE(Push(1, 0, 0, both, {2.0f, 2.0f}).ok());
  // Trainer 2 took virtual trainer 0 over and sent step 0 again: the first copy stands.
  ASSERT_TRUE(Push(2, 0, 0, both, {100.0f, 100.0f}).ok());
  EXPECT_EQ(shard_.version(), 0);
  ASSERT_TRUE(Push(2, 1, 0, both, {0.0f, 0.0f}).ok());
  EXPECT_EQ(shard_.version(), 1);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ElementsAre(0.5f, 0.5f));  // mean 1, lr 0.5
  // A copy of a finished step is stale: nothing changes.
  ASSERT_TRUE(Push(3, 1, 0, both, {7.0f, 7.0f}).ok());
  EXPECT_THAT(PullBlock(shard_, "p", 0), ElementsAre(0.5f, 0.5f));
}

TEST_F(VirtualStep, TheStepWaitsForItsMicroBatchesNotForTheLiveTrainers) {
  shard_.SetLiveTrainers({1, 2});
  ASSERT_TRUE(Push(1, 0, 0, {0, 1}, {2.0f, 2.0f}).ok());
  shard_.SetLiveTrainers({1});  // trainer 2 left; its virtual trainer's micro-batch is still due
  EXPECT_EQ(shard_.version(), 0);
  shard_.SetLiveTrainers({});
  EXPECT_EQ(shard_.version(), 0);
  ASSERT_TRUE(Push(1, 1, 0, {0, 1}, {2.0f, 2.0f}).ok());
  EXPECT_EQ(shard_.version(), 1);
  EXPECT_THAT(PullBlock(shard_, "p", 0), ElementsAre(0.0f, 0.0f));
}

TEST_F(VirtualStep, PushesThatDisagreeOnTheStepAreRefusedAndChangeNothing) {
  ASSERT_TRUE(Push(1, 0, 0, {0, 1}, {2.0f, 2.0f}).ok());
  auto other_mask = Push(2, 1, 0, {0, 1, 2}, {9.0f, 9.0f});
  EXPECT_EQ(other_mask.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_mask.status().message(), HasSubstr("expects other virtual trainers"));
  auto outside = Push(2, 3, 0, {0, 1}, {9.0f, 9.0f});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.status().message(), HasSubstr("leaves it out"));
  proto::PushRequest plain;  // a trainer that is not in the job's mode
  plain.set_trainer_id(5);
  plain.set_step(0);
  AddDense(&plain, "p", 0, {9.0f, 9.0f});
  auto mixed = shard_.Push(PushFrame::FromProtoRef(plain), absl::InfiniteFuture());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mixed.status().message(), HasSubstr("names none"));
  EXPECT_EQ(shard_.version(), 0);
  ASSERT_TRUE(Push(2, 1, 0, {0, 1}, {0.0f, 0.0f}).ok());
  EXPECT_THAT(PullBlock(shard_, "p", 0), ElementsAre(0.5f, 0.5f));
}

// A trainer behind by a step (it joined, or took over a virtual trainer) reads the
// values its step began with, which the shard keeps for one step.
TEST_F(VirtualStep, APullOfTheVersionBeforeGetsItsValues) {
  ASSERT_TRUE(Push(shard_, 1, 0, 0, {0}, {2.0f, -2.0f}, {5}, {4.0f}).ok());
  ASSERT_EQ(shard_.version(), 1);
  auto before = PullExact(0);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_THAT(*before, ElementsAre(1.0f, 1.0f));
  auto now = PullExact(1);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_THAT(*now, ElementsAre(0.0f, 2.0f));
  ASSERT_TRUE(Push(shard_, 1, 0, 1, {0}, {2.0f, 2.0f}).ok());
  auto gone = PullExact(0);  // two steps back: not kept
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gone.status().message(), HasSubstr("this shard is at version 2"));
  EXPECT_THAT(PullRows(shard_, "e", {5}), ElementsAre(-2.0f));
}

TEST(StepMaskTest, MasksOfOneSetAreEqualStrings) {
  EXPECT_EQ(StepMask({3, 0, 9}), StepMask({0, 3, 9}));
  EXPECT_EQ(StepMask({0, 3, 9}).size(), 2u);
  EXPECT_EQ(StepMask({}), "");
  EXPECT_THAT(StepMaskMembers(StepMask({9, 0, 3})), ElementsAre(0, 3, 9));
  EXPECT_FALSE(StepMaskHas(StepMask({1}), 0));
  EXPECT_FALSE(StepMaskHas(StepMask({1}), 100));
  EXPECT_EQ(StepMask({kMaxVirtualTrainers}), "");  // out of range: left out
}

}  // namespace
}  // namespace pl::pserver
