// A push applied by many threads (pl-pserver --apply_threads) leaves the bits one thread
// leaves, on a primary and on a replica following its stream, async and sync; and
// pushes of parameter changes (local steps, PushRequest.delta) are added as they are.
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/core/parallel_for.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

// 24 blocks of 64 Ki floats (6 MB of values: ThreadsForDense asks for 8 threads or
// more) and a table, under Adam with weight decay.
constexpr int64_t kBlock = 65536;
constexpr int64_t kBlocks = 24;

class ApplyThreads {
 public:
  explicit ApplyThreads(int n) { SetApplyThreads(n); }
  ~ApplyThreads() { SetApplyThreads(0); }
};

proto::InitRequest BigInit(bool sync) {
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.01f;
  adam.weight_decay = 0.001f;
  return MakeInit({DenseSpec("w", {kBlocks, kBlock}, kBlock), SparseSpec("emb", 8)}, adam, 5, sync);
}

proto::PushRequest BigPush(int64_t id, int64_t trainer = 1, int64_t step = 0) {
  proto::PushRequest push;
  push.set_client_id(100 + trainer);
  push.set_push_id(id);
  push.set_trainer_id(trainer);
  push.set_step(step);
  for (int b = 0; b < kBlocks; ++b) {
    std::vector<float> g(kBlock);
    for (int64_t i = 0; i < kBlock; ++i) g[i] = std::sin(0.001f * static_cast<float>(i + b * 7 + id * 13 + trainer));
    AddDense(&push, "w", b, g);
  }
  std::vector<int64_t> ids;
  std::vector<float> rows;
  for (int64_t r = 0; r < 20000; ++r) {
    ids.push_back((r * 7919 + id) % 12000);
    for (int j = 0; j < 8; ++j) rows.push_back(std::cos(0.01f * static_cast<float>(r * 8 + j + id)));
  }
  AddRows(&push, "emb", 8, ids, rows);
  return push;
}

// Where two shards' states first differ ("" when they do not): their dense sections
// byte for byte (values, Adam's slots and step counts), and every row's values. (A
// stripe lists its rows in its hash index's order, which differs between two tables
// holding the same rows, so rows are compared by id.)
std::string FirstDifference(ParameterShard& x, ParameterShard& y) {
  const size_t dense_bytes = 3 * kBlock * kBlocks * sizeof(float);  // within the dense section
  const std::string a = Dump(x).substr(0, dense_bytes), b = Dump(y).substr(0, dense_bytes);
  std::vector<int64_t> all(12000);
  for (int64_t id = 0; id < 12000; ++id) all[id] = id;
  if (PullRows(x, "emb", all) != PullRows(y, "emb", all)) return "rows differ";
  size_t at = 0;
  while (at < std::min(a.size(), b.size()) && a[at] == b[at]) ++at;
  if (at == a.size() && at == b.size()) return "";
  return absl::StrCat("sizes ", a.size(), " and ", b.size(), ", first difference at byte ", at);
}

TEST(ParallelApply, ThreadsReallyShareAPush) {
  ApplyThreads four(4);
  EXPECT_EQ(ThreadsForDense(kBlock * kBlocks), 4);
  std::mutex mu;
  std::set<std::thread::id> seen;
  ParallelFor(8, 4, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // every helper gets to wake meanwhile
    std::lock_guard<std::mutex> l(mu);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_GE(seen.size(), 2u);
  SetApplyThreads(1);
  EXPECT_EQ(ThreadsForDense(kBlock * kBlocks), 1);
  EXPECT_EQ(ThreadsForRows(1 << 20), 1);
}

TEST(ParallelApply, ManyThreadsLeaveTheBitsOfOneOnPrimaryAndReplica) {
  ParameterShard one(0, 1), many(0, 1), replica(0, 1);
  for (ParameterShard* s : {&one, &many, &replica}) ASSERT_TRUE(s->Init(BigInit(false)).ok());
  for (int64_t id = 1; id <= 3; ++id) {
    const proto::PushRequest push = BigPush(id);
    {
      ApplyThreads t(1);
      ASSERT_TRUE(one.Push(PushFrame::FromProtoRef(push)).ok());
    }
    {
      ApplyThreads t(8);
      ASSERT_TRUE(many.Push(PushFrame::FromProtoRef(push)).ok());
    }
    {
      ApplyThreads t(3);
      ASSERT_TRUE(replica.FollowPush(PushFrame::FromProtoRef(push)).ok());
    }
  }
  ASSERT_GT(Dump(one).size(), static_cast<size_t>(3 * kBlock * kBlocks * 4));  // values and two slots
  EXPECT_EQ(FirstDifference(many, one), "") << "8 threads differ from 1";
  EXPECT_EQ(FirstDifference(replica, one), "") << "a replica on 3 threads differs from its primary";
  // And the updates did something: the values left their initial draw.
  ParameterShard fresh(0, 1);
  ASSERT_TRUE(fresh.Init(BigInit(false)).ok());
  EXPECT_NE(PullBlock(fresh, "w", 5), PullBlock(one, "w", 5));
}

TEST(ParallelApply, ASyncStepOnManyThreadsLeavesTheBitsOfOne) {
  ParameterShard one(0, 1), many(0, 1);
  for (ParameterShard* s : {&one, &many}) {
    ASSERT_TRUE(s->Init(BigInit(true)).ok());
    s->SetLiveTrainers({1, 2});
  }
  for (int64_t step = 0; step < 2; ++step) {
    for (int64_t trainer = 1; trainer <= 2; ++trainer) {
      const proto::PushRequest push = BigPush(step + 1, trainer, step);
      {
        ApplyThreads t(1);
        ASSERT_TRUE(one.Push(PushFrame::FromProtoRef(push)).ok());
      }
      ApplyThreads t(8);
      ASSERT_TRUE(many.Push(PushFrame::FromProtoRef(push)).ok());
    }
  }
  EXPECT_EQ(one.version(), 2);
  EXPECT_EQ(many.version(), 2);
  EXPECT_EQ(FirstDifference(many, one), "");
}

// ------------------------------------------------------------- local steps' changes

proto::PushRequest Changes(const std::vector<float>& d, int64_t trainer = 1, int64_t step = 0) {
  proto::PushRequest push;
  push.set_delta(true);
  push.set_trainer_id(trainer);
  push.set_step(step);
  AddDense(&push, "p", 0, d);
  return push;
}

TEST(ChangePushes, AsyncAddsEachAsItIsWithoutTheOptimizer) {
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.1f;
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {3}, 3, InitSpec::Constant(1.0f))}, adam)).ok());
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Changes({0.5f, -0.25f, 2.0f}))).ok());
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Changes({0.25f, 0.25f, -1.0f}))).ok());
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(1.75f, 1.0f, 2.0f));
  EXPECT_EQ(shard.version(), 2);
  // A gradient push afterwards is Adam's first step (its moments were never touched):
  // lr * g / |g| = 0.1 each way.
  proto::PushRequest grad;
  AddDense(&grad, "p", 0, {1.0f, -1.0f, 1.0f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(grad)).ok());
  const std::vector<float> got = PullBlock(shard, "p", 0);
  EXPECT_NEAR(got[0], 1.65f, 1e-6);
  EXPECT_NEAR(got[1], 1.1f, 1e-6);
  EXPECT_NEAR(got[2], 1.9f, 1e-6);
}

TEST(ChangePushes, SyncAveragesTheStepsChanges) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f))}, Sgd(0.5f), 7, true)).ok());
  shard.SetLiveTrainers({1, 2});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Changes({1.0f, -2.0f}, 1, 0))).ok());
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(1.0f, 1.0f));  // the step waits for trainer 2
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Changes({3.0f, 1.0f}, 2, 0))).ok());
  EXPECT_EQ(shard.version(), 1);
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(3.0f, 0.5f));  // 1 + mean
}

TEST(ChangePushes, RowsInAChangePushAreRefusedAndChangeNothing) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f)), SparseSpec("emb", 2)},
                                  Sgd(0.5f))).ok());
  proto::PushRequest push = Changes({1.0f, 1.0f});
  AddRows(&push, "emb", 2, {3}, {1.0f, 1.0f});
  const auto v = shard.Push(PushFrame::FromProtoRef(push));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("table 'emb'"));
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(1.0f, 1.0f));
  EXPECT_EQ(shard.version(), 0);
}

}  // namespace
}  // namespace pl::pserver
