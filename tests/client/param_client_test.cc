// ParameterClient against two in-process parameter servers on 127.0.0.1: placement,
// one request per pserver, sparse rows only as touched, and the overlapped
// push-then-pull of async training.
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/pipelined_exchange.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/client/two_pservers.h"

namespace pl {
namespace {

TEST_F(TwoPservers, PullGivesEveryTrainerTheSameDeterministicParameters) {
  TinyModel a, b;
  a.InitParameters(9);
  auto ca = Client(&a, 1), cb = Client(&b, 2);
  ASSERT_TRUE(ca->Connect().ok());
  ASSERT_TRUE(cb->Connect().ok());
  ASSERT_TRUE(cb->Pull({{"emb.table", {3, 42}}}).ok());
  // b never initialised its own parameters: what it holds came from the pservers, and
  // equals a's local draw from the same seed.
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_FLOAT_EQ(b.fc->weight().value().f32()[i], a.fc->weight().value().f32()[i]) << i;
  }
  EXPECT_EQ(b.emb->table()->rows().size(), 2u);  // exactly the rows asked for
  EXPECT_FLOAT_EQ(b.emb->table()->rows().Find(42)[1], a.emb->table()->Row(42)[1]);
  EXPECT_EQ(cb->counters().sparse_rows_pulled, 2);
}

TEST_F(TwoPservers, PushAndPullAppliesThePushAndInstallsTheNextRows) {
  TinyModel m;
  auto c = Client(&m, 1);
  ASSERT_TRUE(c->Connect().ok());
  ASSERT_TRUE(c->Pull({{"emb.table", {5}}}).ok());
  const float w0 = m.fc->weight().value().f32()[0];
  const float r0 = m.emb->table()->rows().Find(5)[0];
  m.fc->weight().MutableGrad().f32()[0] = 2.0f;
  const float g[2] = {1.0f, 0.0f};
  m.emb->table()->AccumulateGrad(5, g);

  ASSERT_TRUE(c->PushAndPull(/*num_samples=*/1, {{"emb.table", {5, 7}}}).ok());
  // The gradients left with the push; the tables now hold the next step's rows.
  EXPECT_FLOAT_EQ(m.fc->weight().grad().f32()[0], 0.0f);
  EXPECT_EQ(m.emb->table()->grad().size(), 0u);
  EXPECT_EQ(m.emb->table()->rows().size(), 2u);
  EXPECT_TRUE(m.emb->table()->rows().Contains(7));
  EXPECT_EQ(c->counters().sparse_rows_pushed, 1);
  // Whether or not that pull saw the push (async), the next one does: SGD, lr 0.5.
  ASSERT_TRUE(c->Pull({{"emb.table", {5}}}).ok());
  EXPECT_FLOAT_EQ(m.fc->weight().value().f32()[0], w0 - 0.5f * 2.0f);
  EXPECT_FLOAT_EQ(m.emb->table()->rows().Find(5)[0], r0 - 0.5f * 1.0f);
}

// Async staleness: a's gradients were computed on what it pulled before b pushed
// twice, so a's push lands two updates later than its parameters; b, pulling right
// before each push, saw none.
TEST_F(TwoPservers, StalenessCountsOtherTrainersUpdatesBetweenAPullAndItsPush) {
  DenseModel a, b;
  auto ca = Client(&a, 1), cb = Client(&b, 2);
  ASSERT_TRUE(ca->Connect().ok());
  ASSERT_TRUE(cb->Connect().ok());
  ASSERT_TRUE(ca->Pull({}).ok());
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(cb->Pull({}).ok());
    b.fc->weight().MutableGrad().f32()[0] = 1.0f;
    ASSERT_TRUE(cb->Push(1).ok());
    EXPECT_EQ(cb->last_staleness(), 0.0) << "push " << k;
  }
  a.fc->weight().MutableGrad().f32()[0] = 1.0f;
  ASSERT_TRUE(ca->Push(1).ok());
  EXPECT_EQ(ca->last_staleness(), 2.0);
  ASSERT_TRUE(ca->Pull({}).ok());
  ASSERT_TRUE(ca->Push(1).ok());
  EXPECT_EQ(ca->last_staleness(), 0.0);
}

// The pipelined exchange: the model's parameters change only at Submit/Drain, its
// gradients leave at Submit (the next step may write new ones at once), and the
// pservers apply them exactly once; through shared memory and over gRPC, with pushes
// applied on arrival and deferred.
TEST_F(TwoPservers, PipelinedExchangeSendsGradientsAndInstallsParametersBetweenSteps) {
  ASSERT_TRUE(PipelinedExchange::Supports(*std::make_unique<DenseModel>()));
  EXPECT_FALSE(PipelinedExchange::Supports(*std::make_unique<TinyModel>()));  // it has a sparse table
  int64_t applied_before = 0;
  for (const bool shm : {true, false}) {
    for (const bool defer : {false, true}) {
      SCOPED_TRACE(absl::StrCat("shared memory ", shm, ", defer_apply ", defer));
      DenseModel model;
      ParameterClientOptions o;
      o.num_pservers = 2;
      o.optimizer.kind = OptimizerKind::kSGD;
      o.optimizer.learning_rate = 0.5f;
      o.seed = 9;
      o.defer_apply = defer;
      o.shared_memory = shm;
      ParameterClient client(&model, o, [this]() -> StatusOr<std::vector<std::string>> { return addresses_; });
      ASSERT_TRUE(client.Connect().ok());
      EXPECT_EQ(client.counters().shm_attaches, shm ? 2 : 0);
      PipelinedExchange exchange(&client);
      ASSERT_TRUE(exchange.PullNow().ok());
      const float* w = model.fc->weight().value().f32();
      const float w0 = w[0], w5 = w[5];  // what earlier rounds left

      model.fc->weight().MutableGrad().f32()[0] = 2.0f;
      ASSERT_TRUE(exchange.Submit(1).ok());
      EXPECT_FLOAT_EQ(model.fc->weight().grad().f32()[0], 0.0f);  // handed over
      EXPECT_FLOAT_EQ(w[0], w0);                                  // not installed yet
      model.fc->weight().MutableGrad().f32()[5] = 4.0f;           // the next step, meanwhile
      ASSERT_TRUE(exchange.Submit(1).ok());  // installs the first exchange's values
      if (!defer && shm) {
        EXPECT_FLOAT_EQ(w[0], w0 - 0.5f * 2.0f);  // one call: the values after the push
      } else {
        // Over gRPC the pull travelled beside the push (or the push waits to be
        // applied): the values from before it or after it, nothing else.
        EXPECT_TRUE(w[0] == w0 || w[0] == w0 - 0.5f * 2.0f) << w[0] << " from " << w0;
      }
      EXPECT_FLOAT_EQ(w[5], w5);
      ASSERT_TRUE(exchange.Drain().ok());
      for (auto& shard : shards_) shard->WaitForQueuedPushes();
      EXPECT_EQ(client.counters().pushes, 2);
      const int64_t applied = shards_[0]->Counters().pushes_applied + shards_[1]->Counters().pushes_applied;
      EXPECT_EQ(applied - applied_before, 4);  // 2 each
      applied_before = applied;
      ASSERT_TRUE(exchange.PullNow().ok());
      EXPECT_FLOAT_EQ(w[0], w0 - 0.5f * 2.0f);
      EXPECT_FLOAT_EQ(w[5], w5 - 0.5f * 4.0f);
    }
  }
}

TEST_F(TwoPservers, AnUnreachablePserverIsAnErrorNamingItAfterTheRetries) {
  TinyModel m;
  ParameterClientOptions o;
  o.num_pservers = 2;
  o.give_up_after = absl::Milliseconds(300);
  o.call_timeout = absl::Milliseconds(200);
  std::vector<std::string> addresses = {addresses_[0], "127.0.0.1:1"};
  ParameterClient c(&m, o, [&]() -> StatusOr<std::vector<std::string>> { return addresses; });
  Status s = c.Connect();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pserver 1 (127.0.0.1:1)"), std::string::npos) << s;
}

}  // namespace
}  // namespace pl

namespace pl {
namespace {

// --wire_dtype bfloat16 over gRPC: pulls are the pservers' values rounded, in half the
// bytes; a gradient that bfloat16 cannot hold (1 + 2^-9 rounds to 1) still arrives in
// full over many pushes, through error feedback.
TEST_F(TwoPservers, BfloatWireHalvesTheBytesAndItsPushesLoseNothingOverTime) {
  auto make = [this](Module* m, WireDtype wire) {
    ParameterClientOptions o;
    o.num_pservers = 2;
    o.optimizer.kind = OptimizerKind::kSGD;
    o.optimizer.learning_rate = 0.01f;
    o.seed = 9;
    o.shared_memory = false;  // as between hosts
    o.wire_dtype = wire;
    return std::make_unique<ParameterClient>(m, o,
                                             [this]() -> StatusOr<std::vector<std::string>> { return addresses_; });
  };
  DenseModel exact, rounded;
  auto c32 = make(&exact, WireDtype::kFloat32);
  auto c16 = make(&rounded, WireDtype::kBfloat16);
  ASSERT_TRUE(c32->Connect().ok());
  ASSERT_TRUE(c16->Connect().ok());
  ASSERT_TRUE(c32->Pull({}).ok());
  ASSERT_TRUE(c16->Pull({}).ok());
  const float* w32 = exact.fc->weight().value().f32();
  const float* w16 = rounded.fc->weight().value().f32();
  for (int i = 0; i < 12; ++i) {
    uint16_t h;
    float expect;
    EncodeBf16(w32 + i, 1, &h);
    DecodeBf16(&h, 1, &expect);
    EXPECT_EQ(w16[i], expect) << i;
  }
  EXPECT_EQ(c16->counters().bytes_pulled * 2, c32->counters().bytes_pulled);

  const float w0 = w32[0];
  const float g = 1.0f + 1.0f / 512;
  for (int k = 0; k < 100; ++k) {
    rounded.fc->weight().MutableGrad().f32()[0] = g;
    ASSERT_TRUE(c16->Push(1).ok());
  }
  EXPECT_EQ(c16->counters().bytes_pushed, 100 * (12 + 3) * 2);
  ASSERT_TRUE(c32->Pull({}).ok());
  // Without feedback the pservers would have applied 100 x 1.0: off by 0.01 x 0.195.
  EXPECT_NEAR(w32[0], w0 - 0.01f * 100 * g, 0.01f * (1.0f / 128));
}

}  // namespace
}  // namespace pl
