// ParameterClient's shared-memory path against an in-process pserver on 127.0.0.1:
// the same updates as over gRPC, a pserver that refuses it, and one that forgot the
// region (as after a restart) without a push being lost or applied twice.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/rpc/rpc.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/shard.h"
#include "paddle_like/client/param_client.h"
#include "tests/client/one_pserver.h"

namespace pl {
namespace {

// Linear(4 -> 3): 15 dense values in one block.
class DenseModel : public Module {
 public:
  DenseModel() : Module("DenseModel") { fc = RegisterModule("fc", std::make_shared<Linear>(4, 3)); }
  std::shared_ptr<Linear> fc;
};

class OnePserver : public OnePserverTest {
 protected:
  std::unique_ptr<ParameterClient> Client(DenseModel* model, bool shared_memory = true, bool bind = false) {
    ParameterClientOptions o;
    o.bind_parameters_to_shared_memory = bind;
    o.shared_memory = shared_memory;
    return SgdClient(model, o);
  }
  // Sets every gradient of `m` to `g` and exchanges; returns the first weight after.
  static float Step(ParameterClient& c, DenseModel& m, float g) {
    m.fc->weight().MutableGrad().Fill(g);
    m.fc->bias().MutableGrad().Fill(g);
    EXPECT_TRUE(c.PushAndPull(1, {}).ok());
    return m.fc->weight().value().f32()[0];
  }
};

TEST_F(OnePserver, SharedMemoryAndGrpcApplyTheSameUpdates) {
  Start({});
  DenseModel a, b, reference;
  reference.InitParameters(9);
  const float w0 = reference.fc->weight().value().f32()[0];
  auto shm = Client(&a), grpc = Client(&b, /*shared_memory=*/false);
  ASSERT_TRUE(shm->Connect().ok());
  ASSERT_TRUE(grpc->Connect().ok());
  EXPECT_TRUE(absl::StartsWith(shm->Transports()[0], "shared memory")) << shm->Transports()[0];
  // This pserver takes no dense links either (OpenDenseLinks was not called).
  EXPECT_TRUE(absl::StartsWith(grpc->Transports()[0], "gRPC (this pserver takes no dense links"))
      << grpc->Transports()[0];
  EXPECT_EQ(service_->StatsNow().shm_regions(), 1);

  // A push through shared memory comes back with parameters that include it (one call).
  EXPECT_FLOAT_EQ(Step(*shm, a, 2.0f), w0 - 0.5f * 2.0f);
  EXPECT_FLOAT_EQ(a.fc->weight().grad().f32()[0], 0.0f);  // sent, then cleared
  // The gRPC client's push lands on the same parameters; it pulls at least a's update.
  ASSERT_TRUE(grpc->Pull({}).ok());
  EXPECT_FLOAT_EQ(b.fc->weight().value().f32()[0], w0 - 1.0f);
  Step(*grpc, b, 1.0f);
  ASSERT_TRUE(shm->Pull({}).ok());  // a plain pull through the region
  for (int i = 0; i < 12; ++i) {
    EXPECT_FLOAT_EQ(a.fc->weight().value().f32()[i], reference.fc->weight().value().f32()[i] - 1.5f) << i;
  }
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(a.fc->bias().value().f32()[i], reference.fc->bias().value().f32()[i] - 1.5f);
  EXPECT_EQ(shard_.Counters().pushes_applied, 2);
}

TEST_F(OnePserver, APserverThatRefusesSharedMemoryGetsEverythingOverGrpc) {
  pserver::SharedRegionOptions off;
  off.enabled = false;
  Start(off);
  DenseModel m, reference;
  reference.InitParameters(9);
  auto c = Client(&m);
  ASSERT_TRUE(c->Connect().ok());
  EXPECT_TRUE(absl::StrContains(c->Transports()[0], "gRPC (this pserver does not take shared memory"))
      << c->Transports()[0];
  Step(*c, m, 2.0f);  // over gRPC the pull runs beside the push: the next one sees it
  ASSERT_TRUE(c->Pull({}).ok());
  EXPECT_FLOAT_EQ(m.fc->weight().value().f32()[0], reference.fc->weight().value().f32()[0] - 1.0f);
  EXPECT_EQ(c->counters().shm_attaches, 0);
}

TEST_F(OnePserver, AForgottenRegionCostsNoPushAndIsAttachedAgain) {
  pserver::SharedRegionOptions quick;
  quick.idle_timeout = absl::ZeroDuration();  // DropIdleRegions forgets every region
  Start(quick);
  DenseModel m, reference;
  reference.InitParameters(9);
  const float w0 = reference.fc->weight().value().f32()[0];
  auto c = Client(&m);
  ASSERT_TRUE(c->Connect().ok());
  ASSERT_EQ(c->counters().shm_attaches, 1);
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 0.5f);

  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();  // as a restarted pserver would: the id is unknown now
  ASSERT_EQ(service_->StatsNow().shm_regions(), 0);
  // ABORTED for the region, so the push was not applied: it goes again over gRPC, once.
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 1.0f);
  EXPECT_EQ(shard_.Counters().pushes_applied, 2);
  // The next step offers a fresh region.
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 1.5f);
  EXPECT_EQ(c->counters().shm_attaches, 2);
  EXPECT_EQ(shard_.Counters().pushes_applied, 3);
}

// Parameters moved into the region: the same arithmetic with no copies on the
// trainer's side, through a forgotten region and the fresh one after it.
TEST_F(OnePserver, ParametersBoundToTheRegionTrainTheSameAndMoveToANewRegion) {
  pserver::SharedRegionOptions quick;
  quick.idle_timeout = absl::ZeroDuration();
  Start(quick);
  DenseModel m, reference;
  reference.InitParameters(9);
  const float* w_before = m.fc->weight().value().f32();
  auto c = Client(&m, /*shared_memory=*/true, /*bind=*/true);
  ASSERT_TRUE(c->Connect().ok());
  EXPECT_EQ(c->counters().bound_parameters, 2);  // weight and bias, each whole on the one pserver
  EXPECT_NE(m.fc->weight().value().f32(), w_before) << "the weight did not move";
  ASSERT_TRUE(c->Pull({}).ok());
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(m.fc->weight().value().f32()[i], reference.fc->weight().value().f32()[i]);

  const float w0 = reference.fc->weight().value().f32()[0];
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 0.5f);
  EXPECT_FLOAT_EQ(m.fc->weight().grad().f32()[0], 0.0f);  // cleared after the push
  EXPECT_FLOAT_EQ(Step(*c, m, 2.0f), w0 - 1.5f);

  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 2.0f);  // over gRPC, once
  EXPECT_FLOAT_EQ(Step(*c, m, 1.0f), w0 - 2.5f);  // a fresh region, the parameters moved again
  EXPECT_EQ(c->counters().shm_attaches, 2);
  EXPECT_EQ(c->counters().bound_parameters, 4);
  EXPECT_EQ(shard_.Counters().pushes_applied, 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(m.fc->bias().value().f32()[i], reference.fc->bias().value().f32()[i] - 2.5f) << i;
  }
  // The next step's gradients would land in the region an exchange is sending.
  EXPECT_TRUE(absl::IsFailedPrecondition(c->StartExchange(1)));
}

}  // namespace
}  // namespace pl
