// KVWorker, the key-value face of the pserver client, against two in-process
// parameter servers: pulls of named keys, pushes of some keys only (the others do not
// move, even under momentum), handles that complete in order, the same keys seen by a
// Module-bound client, and bad input refused before anything is sent.
#include "paddle_like/client/kv_worker.h"

#include <gtest/gtest.h>

#include "tests/client/two_pservers.h"

namespace pl {
namespace {

class KVWorkerTest : public TwoPservers {
 protected:
  std::unique_ptr<KVWorker> Worker(std::vector<KeySpec> keys, OptimizerSpec optimizer) {
    ParameterClientOptions o;
    o.num_pservers = 2;
    o.optimizer = optimizer;
    o.seed = 9;
    return std::make_unique<KVWorker>(std::move(keys), o,
                                      [this]() -> StatusOr<std::vector<std::string>> { return addresses_; });
  }
  static OptimizerSpec Sgd(float lr) { return OptimizerSpec{OptimizerKind::kSGD, lr}; }

  // Pull `requests` and wait; fails the test on error.
  static std::vector<KeyValues> PullNow(KVWorker& kv, std::vector<KeyValues> requests) {
    std::vector<KeyValues> out;
    StatusOr<KVWorker::Handle> h = kv.Pull(std::move(requests), &out);
    EXPECT_TRUE(h.ok()) << h.status();
    if (h.ok()) {
      EXPECT_TRUE(kv.Wait(*h).ok());
    }
    return out;
  }
};

// Keys larger than one block (kDefaultBlockSize floats) cross both pservers.
constexpr int64_t kBig = 70000;

TEST_F(KVWorkerTest, PushThenPullGivesTheHandComputedSgdStep) {
  auto kv = Worker({KeySpec::Dense("w", {kBig}, InitSpec::Uniform(1)), KeySpec::Sparse("emb", 3, 100, InitSpec::Normal(1))},
                   Sgd(0.5f));
  ASSERT_TRUE(kv->Connect().ok());
  std::vector<KeyValues> before = PullNow(*kv, {{"w"}, {"emb", {7, 42}}});
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(before[0].values.size(), static_cast<size_t>(kBig));
  ASSERT_EQ(before[1].values.size(), 6u);
  EXPECT_NE(before[0].values[0], before[0].values[kBig - 1]);  // drawn, not zeros

  KeyValues gw{"w", {}, std::vector<float>(kBig, 0.0f)};
  gw.values[0] = 2.0f;
  gw.values[kBig - 1] = -4.0f;
  // Row 42 twice: its gradients add up. Row 7 untouched.
  KeyValues ge{"emb", {42, 42}, {1, 0, 0, 1, 0, 0}};
  StatusOr<KVWorker::Handle> pushed = kv->Push({gw, ge});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  std::vector<KeyValues> after;
  StatusOr<KVWorker::Handle> pulled = kv->Pull({{"emb", {7, 42}}, {"w"}}, &after);
  ASSERT_TRUE(pulled.ok());
  // Calls run in order: waiting for the pull means the push is done, and applied.
  ASSERT_TRUE(kv->Wait(*pulled).ok());
  ASSERT_TRUE(kv->Wait(*pushed).ok());
  ASSERT_EQ(after[0].key, "emb");
  EXPECT_FLOAT_EQ(after[1].values[0], before[0].values[0] - 0.5f * 2.0f);
  EXPECT_FLOAT_EQ(after[1].values[kBig - 1], before[0].values[kBig - 1] + 0.5f * 4.0f);
  EXPECT_FLOAT_EQ(after[1].values[1], before[0].values[1]);
  EXPECT_FLOAT_EQ(after[0].values[0], before[1].values[0]);              // row 7
  EXPECT_FLOAT_EQ(after[0].values[3], before[1].values[3] - 0.5f * 2.0f);  // row 42, twice 1
  EXPECT_FLOAT_EQ(after[0].values[4], before[1].values[4]);
  EXPECT_EQ(kv->client().counters().sparse_rows_pushed, 1);  // the two 42s travel as one row
}

// A table's policy travels with its key to the pservers: with admit_after 3 an id
// reads zeros and its pushes change nothing until its third pushed update.
TEST_F(KVWorkerTest, ATablesAdmissionPolicyReachesThePservers) {
  auto kv = Worker({KeySpec::Sparse("emb", 2, 0, InitSpec::Constant(1.0f), TablePolicy{.admit_after = 3})}, Sgd(0.5f));
  ASSERT_TRUE(kv->Connect().ok());
  auto pull = [&] { return PullNow(*kv, {{"emb", {5, 6}}})[0].values; };
  auto push = [&](std::vector<int64_t> ids) {
    StatusOr<KVWorker::Handle> h = kv->Push({KeyValues{"emb", ids, std::vector<float>(2 * ids.size(), 1.0f)}});
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE(kv->Wait(*h).ok());
  };
  EXPECT_EQ(pull(), std::vector<float>(4, 0.0f));
  push({5, 6});
  push({5});
  EXPECT_EQ(pull(), std::vector<float>(4, 0.0f));
  push({5});  // id 5's third update: its row, from the initializer, then the SGD step
  EXPECT_EQ(pull(), (std::vector<float>{0.5f, 0.5f, 0.0f, 0.0f}));
}

// The time to live travels too: the pservers' tables say it, and a row past it (the
// pservers' clocks driven here, as their RowEvictor does) reads its initializer again.
TEST_F(KVWorkerTest, ATablesTimeToLiveReachesThePservers) {
  auto kv = Worker({KeySpec::Sparse("emb", 2, 0, InitSpec::Constant(1.0f), TablePolicy{.evict_after_s = 1})}, Sgd(0.5f));
  ASSERT_TRUE(kv->Connect().ok());
  for (auto& shard : shards_) shard->tables().SetTick(1);
  StatusOr<KVWorker::Handle> h = kv->Push({KeyValues{"emb", {5, 6}, std::vector<float>(4, 1.0f)}});
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(kv->Wait(*h).ok());
  EXPECT_EQ(PullNow(*kv, {{"emb", {5, 6}}})[0].values, std::vector<float>(4, 0.5f));
  int64_t evicted = 0;
  for (auto& shard : shards_) {
    ASSERT_EQ(shard->tables().Stats().size(), 1u);
    EXPECT_EQ(shard->tables().Stats()[0].evict_after_s(), 1);
    shard->tables().SetTick(30);  // 2.9 s later
    evicted += shard->SweepRows(/*ttl_due=*/true);
  }
  EXPECT_EQ(evicted, 2);
  EXPECT_EQ(PullNow(*kv, {{"emb", {5, 6}}})[0].values, std::vector<float>(4, 1.0f));
  auto bad = Worker({KeySpec::Sparse("emb", 2, 0, InitSpec::Zeros(), TablePolicy{.evict_after_s = -2})}, Sgd(0.5f));
  Status refused = bad->Connect();
  EXPECT_NE(std::string(refused.message()).find("key 'emb' has evict_after_s -2"), std::string::npos) << refused;
}

TEST_F(KVWorkerTest, KeysLeftOutOfAPushNeitherTravelNorMove) {
  // Momentum: a zero gradient sent for "a" would still move it (v = 0.9 v).
  OptimizerSpec momentum{OptimizerKind::kMomentum, 1.0f};
  auto kv = Worker({KeySpec::Dense("a", {4}, InitSpec::Constant(1)), KeySpec::Dense("b", {kBig})}, momentum);
  ASSERT_TRUE(kv->Connect().ok());
  StatusOr<KVWorker::Handle> h = kv->Push({{"a", {}, {1, 1, 1, 1}}});
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(kv->Wait(*h).ok());
  EXPECT_EQ(kv->client().counters().bytes_pushed, 4 * 4);
  h = kv->Push({{"b", {}, std::vector<float>(kBig, 1.0f)}});
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(kv->Wait(*h).ok());
  EXPECT_EQ(kv->client().counters().bytes_pushed, 4 * 4 + kBig * 4);
  std::vector<KeyValues> v = PullNow(*kv, {{"a"}, {"b"}});
  EXPECT_FLOAT_EQ(v[0].values[0], 1.0f - 1.0f);  // one step of v = 1, never v = 0.9
  EXPECT_FLOAT_EQ(v[1].values[5], -1.0f);
  EXPECT_EQ(kv->client().counters().bytes_pulled, 4 * 4 + kBig * 4);
}

TEST_F(KVWorkerTest, PushPullReturnsValuesThatIncludeThePush) {
  auto kv = Worker({KeySpec::Dense("w", {3}, InitSpec::Constant(2)), KeySpec::Sparse("emb", 2, 0, InitSpec::Constant(1))},
                   Sgd(0.25f));
  ASSERT_TRUE(kv->Connect().ok());
  std::vector<KeyValues> out;
  StatusOr<KVWorker::Handle> h = kv->PushPull({{"w", {}, {4, 0, -4}}, {"emb", {1000000007}, {4, 8}}}, 1, &out);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(kv->Wait(*h).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(out[1].ids, (std::vector<int64_t>{1000000007}));
  EXPECT_EQ(out[1].values, (std::vector<float>{0, -1}));
}

TEST_F(KVWorkerTest, AModuleAndTheKeyApiShareParametersByName) {
  TinyModel model;
  auto client = Client(&model, 1);
  ASSERT_TRUE(client->Connect().ok());
  ASSERT_TRUE(client->Pull({{"emb.table", {3}}}).ok());
  // The model's keys, declared as it declares them.
  std::vector<KeySpec> keys;
  for (const NamedParameter& np : model.NamedParameters()) {
    const Parameter& p = *np.param;
    keys.push_back(p.kind == ParamKind::kDense ? KeySpec::Dense(np.name, p.var.shape(), p.init)
                                               : KeySpec::Sparse(np.name, p.table->dim(), p.table->num_rows(), p.init));
  }
  auto kv = Worker(keys, Sgd(0.5f));
  ASSERT_TRUE(kv->Connect().ok());
  std::vector<KeyValues> w = PullNow(*kv, {{"fc.w"}, {"emb.table", {3}}});
  EXPECT_FLOAT_EQ(w[0].values[7], model.fc->weight().value().f32()[7]);
  EXPECT_FLOAT_EQ(w[1].values[1], model.emb->table()->rows().Find(3)[1]);
  StatusOr<KVWorker::Handle> h = kv->Push({{"fc.w", {}, std::vector<float>(12, 1.0f)}});
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(kv->Wait(*h).ok());
  ASSERT_TRUE(client->Pull({}).ok());
  EXPECT_FLOAT_EQ(model.fc->weight().value().f32()[7], w[0].values[7] - 0.5f);
}

TEST_F(KVWorkerTest, BadInputIsRefusedWithItsReasonAndNothingIsSent) {
  auto kv = Worker({KeySpec::Dense("w", {3}), KeySpec::Sparse("emb", 2, 10)}, Sgd(0.1f));
  ASSERT_TRUE(kv->Connect().ok());
  std::vector<KeyValues> out;
  StatusOr<KVWorker::Handle> h = kv->Push({{"v", {}, {1, 2, 3}}});
  ASSERT_TRUE(absl::IsNotFound(h.status()));
  EXPECT_NE(h.status().message().find("no key 'v' (declared: w, emb)"), std::string::npos) << h.status();
  h = kv->Push({{"w", {}, {1, 2}}});
  EXPECT_NE(h.status().message().find("'w' holds 3 floats, 2 given"), std::string::npos) << h.status();
  h = kv->Push({{"emb", {1}, {1, 2, 3}}});
  EXPECT_NE(h.status().message().find("1 ids need 2 values, 3 given"), std::string::npos) << h.status();
  h = kv->Pull({{"emb", {10}}}, &out);
  EXPECT_TRUE(absl::IsOutOfRange(h.status())) << h.status();
  h = kv->Pull({{"w"}, {"w"}}, &out);
  EXPECT_NE(h.status().message().find("named twice"), std::string::npos) << h.status();
  h = kv->Pull({{"w", {1}}}, &out);
  EXPECT_NE(h.status().message().find("dense and travels whole"), std::string::npos) << h.status();
  EXPECT_TRUE(absl::IsNotFound(kv->Wait(12345)));
  EXPECT_EQ(kv->client().counters().pushes, 0);
  EXPECT_EQ(kv->client().counters().pulls, 0);
  // And what was good before is still there: w is untouched.
  std::vector<KeyValues> w = PullNow(*kv, {{"w"}});
  EXPECT_EQ(w[0].values, (std::vector<float>{0, 0, 0}));

  auto twice = Worker({KeySpec::Dense("w", {3}), KeySpec::Dense("w", {4})}, Sgd(0.1f));
  EXPECT_NE(twice->Connect().message().find("'w' is declared twice"), std::string::npos);
  EXPECT_FALSE(twice->Pull({{"w"}}, &out).ok());
}

TEST_F(KVWorkerTest, AHandleIsWaitedForOnce) {
  auto kv = Worker({KeySpec::Dense("w", {3})}, Sgd(0.1f));
  ASSERT_TRUE(kv->Connect().ok());
  StatusOr<KVWorker::Handle> a = kv->Push({{"w", {}, {1, 1, 1}}});
  StatusOr<KVWorker::Handle> b = kv->Push({{"w", {}, {1, 1, 1}}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(*a, *b);
  ASSERT_TRUE(kv->Wait(*b).ok());
  ASSERT_TRUE(kv->Wait(*a).ok());
  EXPECT_TRUE(absl::IsNotFound(kv->Wait(*a)));
  std::vector<KeyValues> w = PullNow(*kv, {{"w"}});
  EXPECT_FLOAT_EQ(w[0].values[2], -0.2f);
}

}  // namespace
}  // namespace pl
