// ParameterShard in process: init, async updates, sparse rows, malformed pushes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/core/runtime.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

// Placement (paddle_like/dist/sharding.h): a parameter's blocks go round the pservers,
// so a big matrix loads each within one block of the others.
TEST(Sharding, ABigParametersBlocksGoRoundThePserversEvenly) {
  for (const int P : {1, 2, 3, 4, 7}) {
    for (const char* name : {"fc1.weight", "fc2.weight", "w"}) {
      std::vector<int> blocks_on(P, 0);
      const int first = ShardOfDenseBlock(name, 0, P);
      for (int b = 0; b < 23; ++b) {
        const int shard = ShardOfDenseBlock(name, b, P);
        ASSERT_EQ(shard, (first + b) % P) << name << " block " << b << " of " << P << " pservers";
        ++blocks_on[shard];
      }
      const auto [least, most] = std::minmax_element(blocks_on.begin(), blocks_on.end());
      EXPECT_LE(*most - *least, 1) << name << " over " << P << " pservers";
    }
  }
  // The start depends on the name, so small parameters do not all crowd onto pserver 0.
  std::set<int> starts;
  for (int i = 0; i < 16; ++i) starts.insert(ShardOfDenseBlock(absl::StrCat("bias", i), 0, 4));
  EXPECT_GE(starts.size(), 3u);
}

TEST(ShardInit, ValuesEqualALocalModuleDrawAndInitIsIdempotent) {
  Linear linear(5, 7);
  linear.InitParameters(42);
  const auto specs = ParamSpecsOf(linear, /*block_size=*/8);
  const int P = 3;
  std::vector<std::unique_ptr<ParameterShard>> shards;
  for (int i = 0; i < P; ++i) {
    shards.push_back(std::make_unique<ParameterShard>(i, P));
    auto r = shards[i]->Init(MakeInit(specs, Sgd(0.1f), 42));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->created());
  }
  int64_t total = 0;
  for (auto& np : linear.NamedParameters()) {
    const Tensor& v = np.param->var.value();
    for (int64_t b = 0; b < NumBlocks(v.numel(), 8); ++b) {
      const int owner = ShardOfDenseBlock(np.name, b, P);
      std::vector<float> got = PullBlock(*shards[owner], np.name, b);
      const int64_t n = std::min<int64_t>(8, v.numel() - b * 8);
      ASSERT_EQ(got.size(), n);
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(got[j], v.f32()[b * 8 + j]) << np.name << " " << b * 8 + j;
      total += n;
    }
  }
  EXPECT_EQ(total, 5 * 7 + 7);
  int64_t held = 0;
  for (auto& s : shards) held += s->Counters().dense_elements;
  EXPECT_EQ(held, total);

  // A second Init (another trainer) changes nothing.
  const std::string before = Dump(*shards[0]);
  auto again = shards[0]->Init(MakeInit(specs, Sgd(0.1f), 42));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
  EXPECT_EQ(Dump(*shards[0]), before);

  // Same name, other shape: refused, naming both.
  auto other = MakeInit({DenseSpec("w", {6, 7}, 8)}, Sgd(0.1f), 42);
  other.mutable_params(0)->set_init_kind(specs[0].init_kind());
  other.mutable_params(0)->set_init_scale(specs[0].init_scale());
  auto bad = shards[0]->Init(other);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("[5, 7]"));
  EXPECT_THAT(bad.status().message(), HasSubstr("[6, 7]"));
  // Another optimizer: refused too.
  auto bad_opt = shards[0]->Init(MakeInit(specs, Sgd(0.2f), 42));
  EXPECT_EQ(bad_opt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Dump(*shards[0]), before);
}

TEST(ShardInit, BadRequestsAndUninitialisedShard) {
  ParameterShard shard(0, 1);
  proto::PushRequest push;
  AddDense(&push, "w", 0, {1.0f});
  // NOT_FOUND, which makes a trainer initialise the shard again (ParameterClient).
  EXPECT_EQ(shard.Push(PushFrame::FromProtoRef(push)).status().code(), absl::StatusCode::kNotFound);
  OptimizerSpec zero_lr = Sgd(0.1f);
  zero_lr.learning_rate = 0;
  auto r = shard.Init(MakeInit({DenseSpec("w", {4}, 4)}, zero_lr));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("learning_rate"));
  r = shard.Init(MakeInit({DenseSpec("w", {4, 0}, 4)}, Sgd(0.1f)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'w'"));
  EXPECT_FALSE(shard.initialized());
}

// A deferred push is answered once queued; the applier applies it, in order, and a
// refused one is refused at once and never reaches the queue.
TEST(ShardAsync, DeferredPushesAreAppliedInOrderAndBadOnesRefusedAtOnce) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {4}, 4, InitSpec::Constant(1.0f))}, Sgd(0.1f))).ok());
  std::vector<proto::PushRequest> pushes(5);  // the frames point into them until applied
  for (proto::PushRequest& push : pushes) {
    push.set_defer_apply(true);
    AddDense(&push, "p", 0, {1, 2, 3, 4});
    ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  }
  proto::PushRequest bad;
  bad.set_defer_apply(true);
  AddDense(&bad, "p", 0, {1, std::nanf(""), 3, 4});
  EXPECT_EQ(shard.Push(PushFrame::FromProtoRef(bad)).status().code(), absl::StatusCode::kInvalidArgument);
  shard.WaitForQueuedPushes();
  EXPECT_EQ(shard.version(), 5);
  EXPECT_EQ(shard.Counters().pushes_applied, 5);
  EXPECT_EQ(shard.Counters().pushes_rejected, 1);
  std::vector<float> got = PullBlock(shard, "p", 0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], 1 - 0.5f * (i + 1), 1e-5);
}

// A large sparse push is applied stripe by stripe, on several threads (RowsByStripe):
// the result must be that of its rows applied one by one in the message's order, bit for
// bit, repeated ids included (Adam: each update of a row depends on the one before).
TEST(ShardAsync, ABigSparsePushEqualsItsRowsAppliedOneByOneInOrder) {
  OptimizerSpec adam{OptimizerKind::kAdam, 0.01f};
  auto make = [&] {
    auto shard = std::make_unique<ParameterShard>(0, 1);
    EXPECT_TRUE(shard->Init(MakeInit({SparseSpec("emb", 4, 0, InitSpec::Uniform(0.5f))}, adam)).ok());
    return shard;
  };
  auto whole = make(), one_by_one = make();
  std::vector<int64_t> ids;
  std::vector<float> grads;
  for (int i = 0; i < 20000; ++i) {
    ids.push_back((static_cast<int64_t>(i) * 7919) % 9000);  // each id about twice
    for (int j = 0; j < 4; ++j) grads.push_back(std::sin(0.01f * static_cast<float>(i * 4 + j)));
  }
  proto::PushRequest big;
  AddRows(&big, "emb", 4, ids, grads);
  ASSERT_TRUE(whole->Push(PushFrame::FromProtoRef(big)).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    proto::PushRequest one;
    AddRows(&one, "emb", 4, {ids[i]}, std::vector<float>(grads.begin() + 4 * i, grads.begin() + 4 * i + 4));
    ASSERT_TRUE(one_by_one->Push(PushFrame::FromProtoRef(one)).ok());
  }
  std::vector<int64_t> all(9000);
  for (int64_t id = 0; id < 9000; ++id) all[id] = id;
  const std::vector<float> a = PullRows(*whole, "emb", all), b = PullRows(*one_by_one, "emb", all);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(ShardAsync, ShutdownAppliesWhatIsQueued) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(0.0f))}, Sgd(1.0f))).ok());
  std::vector<proto::PushRequest> pushes(2);
  for (proto::PushRequest& push : pushes) {
    push.set_defer_apply(true);
    AddDense(&push, "p", 0, {1, 1});
    ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  }
  shard.Shutdown();
  EXPECT_EQ(shard.version(), 2);
  proto::PushRequest late;
  late.set_defer_apply(true);
  AddDense(&late, "p", 0, {1, 1});
  EXPECT_EQ(shard.Push(PushFrame::FromProtoRef(late)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ShardAsync, SgdAppliesEachPushOnArrival) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {4}, 4, InitSpec::Constant(1.0f))}, Sgd(0.1f))).ok());
  proto::PushRequest push;
  AddDense(&push, "p", 0, {1, 2, 3, 4});
  auto v = shard.Push(PushFrame::FromProtoRef(push));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::ElementsAre(1 - 0.1f * 1, 1 - 0.1f * 2, 1 - 0.1f * 3,
                                                                 1 - 0.1f * 4));
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  std::vector<float> got = PullBlock(shard, "p", 0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], 1 - 0.2f * (i + 1), 1e-6);
  EXPECT_EQ(shard.version(), 2);
  EXPECT_EQ(shard.Counters().pushes_applied, 2);
}

OptimizerSpec Adam(float lr) {
  OptimizerSpec o;
  o.kind = OptimizerKind::kAdam;
  o.learning_rate = lr;
  return o;
}

TEST(ShardAsync, AdamUsesThePerBlockStepCount) {
  // Constant gradient 0.5: m = 0.05, v = 0.00025 after step 1, so the bias-corrected
  // step is lr * 0.5 / sqrt(0.25) = lr; after step 2 m-hat = 0.095/0.19 = 0.5 and
  // v-hat = 0.00049975/0.001999 = 0.25: again exactly lr.
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {3}, 3, InitSpec::Constant(1.0f))}, Adam(0.1f))).ok());
  proto::PushRequest push;
  AddDense(&push, "p", 0, {0.5f, 0.5f, 0.5f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  for (float x : PullBlock(shard, "p", 0)) EXPECT_NEAR(x, 0.9f, 1e-5);
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
  for (float x : PullBlock(shard, "p", 0)) EXPECT_NEAR(x, 0.8f, 1e-5);
}

TEST(ShardSparse, RowsAreCreatedByTheirFirstPushAndUpdatedLazily) {
  const int P = 2;
  ParameterShard shard(1, P);
  ASSERT_TRUE(shard.Init(MakeInit({SparseSpec("emb", 3)}, Adam(0.1f), /*seed=*/9)).ok());
  const std::vector<int64_t> ids = OwnedIds(1, P, 3);
  // A pull reads the table's deterministic initialiser and creates no row (issue 40: a
  // million never-seen ids must not become a million rows).
  std::vector<float> rows = PullRows(shard, "emb", {ids[0], ids[1]});
  for (int r = 0; r < 2; ++r) {
    float want[3];
    InitializeValues(InitSpec::Uniform(0.5f), RowStreamSeed(9, "emb", ids[r]), want, 3);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(rows[r * 3 + j], want[j]);
  }
  EXPECT_EQ(shard.Counters().sparse_rows, 0);
  EXPECT_EQ(shard.Counters().sparse_rows_pulled, 2);
  EXPECT_EQ(PullRows(shard, "emb", {ids[0], ids[1]}), rows) << "the same values, pulled again";

  // Push to ids[0] twice; ids[2] (never pulled) once, with the second push.
  proto::PushRequest first;
  AddRows(&first, "emb", 3, {ids[0]}, {0.5f, 0.5f, 0.5f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(first)).ok());
  proto::PushRequest second;
  AddRows(&second, "emb", 3, {ids[0], ids[2]}, {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(second)).ok());
  std::vector<float> after = PullRows(shard, "emb", ids);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(after[j], rows[j] - 0.2f, 1e-5);      // two Adam steps of lr each
    EXPECT_EQ(after[3 + j], rows[3 + j]);             // never pushed: still its initial values
    float init2[3];
    InitializeValues(InitSpec::Uniform(0.5f), RowStreamSeed(9, "emb", ids[2]), init2, 3);
    EXPECT_NEAR(after[6 + j], init2[j] - 0.1f, 1e-5);  // its own step 1, not the table's
  }
  EXPECT_EQ(shard.Counters().sparse_rows, 2);  // the two pushed rows only
  EXPECT_EQ(shard.Counters().sparse_rows_pushed, 3);
}

// Issue 40: pulls of ids never seen take no memory, however many: 200,000 of them leave
// the table empty, and each reads what its row will start with.
TEST(ShardSparse, PullsOfNeverSeenIdsMakeNoRows) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({SparseSpec("emb", 8)}, Sgd(0.1f), /*seed=*/5)).ok());
  std::vector<int64_t> ids(200000);
  for (int64_t i = 0; i < static_cast<int64_t>(ids.size()); ++i) ids[i] = i * 7 + 3;
  const std::vector<float> got = PullRows(shard, "emb", ids);
  ASSERT_EQ(got.size(), ids.size() * 8);
  EXPECT_EQ(shard.Counters().sparse_rows, 0);
  float want[8];
  InitializeValues(InitSpec::Uniform(0.5f), RowStreamSeed(5, "emb", ids[12345]), want, 8);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(got[12345 * 8 + j], want[j]);
}

struct BadPush {
  const char* what;
  std::function<void(proto::PushRequest*)> add;
  absl::StatusCode code;
  std::string fragment;
};

TEST(ShardValidation, EveryMalformedPushIsRefusedAndChangesNothing) {
  const int P = 2;
  ParameterShard shard(0, P);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("w", {80}, 8), SparseSpec("emb", 2, 1000)}, Sgd(0.1f))).ok());
  int owned = -1, foreign = -1;
  for (int b = 0; b < 10; ++b) (ShardOfDenseBlock("w", b, P) == 0 ? owned : foreign) = b;
  ASSERT_GE(owned, 0);
  ASSERT_GE(foreign, 0);
  const int64_t mine = OwnedIds(0, P, 1)[0];
  const int64_t theirs = OwnedIds(1, P, 1)[0];
  PullRows(shard, "emb", {mine});  // a row exists, so its bytes are in the dump
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> ok8(8, 1.0f);
  std::vector<BadPush> cases = {
      {"unknown param", [&](auto* r) { AddDense(r, "nope", 0, ok8); }, absl::StatusCode::kNotFound, "'nope'"},
      {"unknown table", [&](auto* r) { AddRows(r, "nada", 2, {mine}, {1, 1}); }, absl::StatusCode::kNotFound, "'nada'"},
      {"foreign block", [&](auto* r) { AddDense(r, "w", foreign, ok8); }, absl::StatusCode::kInvalidArgument,
       absl::StrCat("block ", foreign, " belongs to pserver 1")},
      {"block out of range", [&](auto* r) { AddDense(r, "w", 10, ok8); }, absl::StatusCode::kInvalidArgument,
       "outside [0, 10)"},
      {"wrong size", [&](auto* r) { AddDense(r, "w", owned, std::vector<float>(7, 1)); },
       absl::StatusCode::kInvalidArgument, absl::StrCat("'w' block ", owned, ": expected 8 gradient values, got 7")},
      {"nan", [&](auto* r) { auto g = ok8; g[3] = nan; AddDense(r, "w", owned, g); },
       absl::StatusCode::kInvalidArgument, absl::StrCat("non-finite value (nan) at index ", owned * 8 + 3)},
      {"inf", [&](auto* r) { auto g = ok8; g[5] = -inf; AddDense(r, "w", owned, g); },
       absl::StatusCode::kInvalidArgument, "(-inf)"},
      {"sparse nan", [&](auto* r) { AddRows(r, "emb", 2, {mine}, {1, nan}); }, absl::StatusCode::kInvalidArgument,
       absl::StrCat("row id ", mine, " element 1")},
      {"foreign row", [&](auto* r) { AddRows(r, "emb", 2, {theirs}, {1, 1}); }, absl::StatusCode::kInvalidArgument,
       absl::StrCat("row id ", theirs, " belongs to pserver 1")},
      {"row out of range", [&](auto* r) { AddRows(r, "emb", 2, {-4}, {1, 1}); }, absl::StatusCode::kInvalidArgument,
       "outside [0, 1000)"},
      {"sparse size", [&](auto* r) { AddRows(r, "emb", 2, {mine}, {1, 1, 1}); }, absl::StatusCode::kInvalidArgument,
       "need 2 gradient values, got 3"},
      {"ragged bytes", [&](auto* r) { AddDense(r, "w", owned, ok8); r->mutable_dense()->rbegin()->mutable_values()->push_back('x'); },
       absl::StatusCode::kInvalidArgument, "not a whole number"},
  };
  const std::string before = Dump(*&shard);
  for (const BadPush& c : cases) {
    proto::PushRequest push;
    AddDense(&push, "w", owned, ok8);        // a valid part first: it must not be applied
    AddRows(&push, "emb", 2, {mine}, {1, 1});
    c.add(&push);
    auto v = shard.Push(PushFrame::FromProtoRef(push));
    EXPECT_EQ(v.status().code(), c.code) << c.what << ": " << v.status();
    EXPECT_THAT(v.status().message(), HasSubstr(c.fragment)) << c.what;
    EXPECT_EQ(Dump(shard), before) << c.what << " changed the shard";
  }
  EXPECT_EQ(shard.Counters().pushes_rejected, static_cast<int64_t>(cases.size()));
  EXPECT_EQ(shard.version(), 0);

  // Pulls are validated whole too: a bad id creates no row.
  proto::PullRequest pull;
  auto* m = pull.add_sparse();
  m->set_table("emb");
  m->add_ids(OwnedIds(0, P, 2)[1]);
  m->add_ids(theirs);
  proto::PullResponse resp;
  EXPECT_EQ(shard.Pull(pull, absl::InfiniteFuture(), &resp).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dump(shard), before);
}

// A replica applies what its primary's stream carries as it is: the primary refused
// non-finite gradients already, and a replica that refused one the primary had applied
// would differ from it from then on. A push that does not fit the replica is refused.
TEST(ShardValidation, AReplicaAppliesItsPrimarysPushesWithoutCheckingTheirValues) {
  const float inf = std::numeric_limits<float>::infinity();
  ParameterShard primary(0, 1), replica(0, 1);
  for (ParameterShard* s : {&primary, &replica}) {
    ASSERT_TRUE(s->Init(MakeInit({DenseSpec("p", {4}, 4, InitSpec::Constant(1.0f))}, Sgd(0.1f))).ok());
  }
  proto::PushRequest push;
  AddDense(&push, "p", 0, {1, inf, 3, 4});
  EXPECT_EQ(primary.Push(PushFrame::FromProtoRef(push)).status().code(), absl::StatusCode::kInvalidArgument);
  auto v = replica.FollowPush(PushFrame::FromProtoRef(push));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  const std::vector<float> got = PullBlock(replica, "p", 0);
  EXPECT_FLOAT_EQ(got[0], 0.9f);
  EXPECT_EQ(got[1], -inf);

  proto::PushRequest misfit;
  AddDense(&misfit, "p", 0, {1, 2, 3});
  EXPECT_THAT(replica.FollowPush(PushFrame::FromProtoRef(misfit)).status().message(),
              HasSubstr("expected 4 gradient values, got 3"));
  EXPECT_EQ(replica.version(), 1);
}

TEST(ShardConcurrency, ParallelPushesToManyBlocksAllLand) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("w", {64}, 4, InitSpec::Zeros()), SparseSpec("e", 2, 0, InitSpec::Zeros())},
                                  Sgd(1.0f))).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        proto::PushRequest push;
        for (int b = 0; b < 16; ++b) AddDense(&push, "w", b, {1, 1, 1, 1});
        AddRows(&push, "e", 2, {t, 100 + k}, {1, 1, 1, 1});
        ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b = 0; b < 16; ++b) {
    for (float x : PullBlock(shard, "w", b)) EXPECT_EQ(x, -200.0f);
  }
  EXPECT_THAT(PullRows(shard, "e", {0, 100}), ::testing::ElementsAre(-50, -50, -4, -4));
  EXPECT_EQ(shard.version(), 200);
}

}  // namespace
}  // namespace pl::pserver

namespace pl::pserver {
namespace {
using namespace ::pl::pserver::testing;

TEST(ShardMemory, StoredStateCostsLittleMoreThanItsRawBytes) {
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.01f;
  const int64_t before = ResidentBytes();
  ParameterShard shard(0, 1);
  // 2M dense elements with Adam: value + 2 slots = 24 MB raw.
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("w", {2 << 20}, 1 << 16), SparseSpec("e", 16)}, adam)).ok());
  const int64_t dense_raw = (2 << 20) * 3 * 4;
  const int64_t after_dense = ResidentBytes();
  EXPECT_LE(after_dense - before, dense_raw * 13 / 10) << "dense: " << after_dense - before << " bytes for "
                                                       << dense_raw << " raw";
  // 200k sparse rows of dim 16 with Adam: 192 bytes of floats per row.
  const int64_t rows = 200000;
  for (int64_t start = 0; start < rows; start += 10000) {
    proto::PullRequest pull;
    auto* m = pull.add_sparse();
    m->set_table("e");
    for (int64_t id = start; id < start + 10000; ++id) m->add_ids(id);
    proto::PullResponse resp;
    ASSERT_TRUE(shard.Pull(pull, absl::InfiniteFuture(), &resp).ok());
  }
  const int64_t sparse_raw = rows * 16 * 3 * 4;
  const int64_t after_sparse = ResidentBytes();
  EXPECT_LE(after_sparse - after_dense, sparse_raw * 2) << "sparse: " << after_sparse - after_dense
                                                        << " bytes for " << sparse_raw << " raw";
  std::printf("dense %.2fx raw, sparse %.2fx raw\n", double(after_dense - before) / dense_raw,
              double(after_sparse - after_dense) / sparse_raw);
}

}  // namespace
}  // namespace pl::pserver
