// ParameterClient's dense link (paddle_like/dist/dense_link.h) against an in-process
// pserver on 127.0.0.1 that takes links, as one on another host would: the updates are
// the hand-computed ones, a link that breaks costs no push and applies none twice, and
// a pserver that takes no links gets everything over gRPC.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "paddle_like/rpc/rpc.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/shard.h"
#include "tests/client/one_pserver.h"

namespace pl {
namespace {

// Linear(256 -> 96) and Linear(96 -> 3): several blocks, spans that lanes split.
class TwoLayers : public Module {
 public:
  TwoLayers() : Module("TwoLayers") {
    fc1 = RegisterModule("fc1", std::make_shared<Linear>(256, 96));
    fc2 = RegisterModule("fc2", std::make_shared<Linear>(96, 3));
  }
  std::vector<const Variable*> params() { return {&fc1->weight(), &fc1->bias(), &fc2->weight(), &fc2->bias()}; }
  std::shared_ptr<Linear> fc1, fc2;
};

class LinkedPserver : public OnePserverTest {
 public:  // ThreeStepsThroughTheLink uses them
  using OnePserverTest::SgdClient;
  void Start(pserver::SharedRegionOptions options, bool links = true) { OnePserverTest::Start(options, links); }
  // A trainer as on another host: no shared memory; `lanes` per direction (0: gRPC).
  std::unique_ptr<ParameterClient> Client(TwoLayers* model, int lanes) {
    ParameterClientOptions o;
    o.shared_memory = false;
    o.dense_link_lanes = lanes;
    return SgdClient(model, o);
  }
  // The same with --wire_dtype bfloat16.
  std::unique_ptr<ParameterClient> Bf16Client(TwoLayers* model, int lanes) {
    ParameterClientOptions o;
    o.shared_memory = false;
    o.dense_link_lanes = lanes;
    o.wire_dtype = WireDtype::kBfloat16;
    return SgdClient(model, o);
  }
  // Every gradient of `m` set to g, then a push and a pull of values that include it.
  static Status Step(ParameterClient& c, TwoLayers& m, float g) {
    for (const Variable* p : m.params()) p->MutableGrad().Fill(g);
    return c.PushThenPull(1, {});
  }
  // Every value of `m` is the reference's less `shift`.
  static void ExpectShifted(TwoLayers& m, TwoLayers& reference, float shift) {
    const std::vector<const Variable*> got = m.params(), want = reference.params();
    for (size_t k = 0; k < got.size(); ++k) {
      const Tensor& a = got[k]->value();
      const Tensor& b = want[k]->value();
      for (int64_t i = 0; i < a.numel(); ++i) {
        ASSERT_FLOAT_EQ(a.f32()[i], b.f32()[i] - shift) << "parameter " << k << " value " << i;
      }
    }
  }
};

TEST_F(LinkedPserver, ALinkCarriesTheSameUpdatesAsGrpc) {
  Start({});
  TwoLayers a, b, reference;
  reference.InitParameters(9);
  auto linked = Client(&a, 3), grpc = Client(&b, 0);
  ASSERT_TRUE(linked->Connect().ok());
  ASSERT_TRUE(grpc->Connect().ok());
  EXPECT_TRUE(absl::StartsWith(linked->Transports()[0], "dense link (3 lanes each way")) << linked->Transports()[0];
  EXPECT_EQ(grpc->Transports()[0], "gRPC");
  EXPECT_EQ(service_->StatsNow().dense_links(), 1);
  EXPECT_EQ(service_->StatsNow().shm_regions(), 0);

  // The push's gradients go over the link; the values that come back include it.
  ASSERT_TRUE(linked->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(a, reference, 0.0f));
  ASSERT_TRUE(Step(*linked, a, 2.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(a, reference, 1.0f));
  EXPECT_FLOAT_EQ(a.fc1->weight().grad().f32()[0], 0.0f);  // sent, then cleared
  ASSERT_TRUE(Step(*linked, a, 1.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(a, reference, 1.5f));
  // A push of its own, then a pull of its own, both through the link.
  for (const Variable* p : a.params()) p->MutableGrad().Fill(1.0f);
  ASSERT_TRUE(linked->Push(1).ok());
  ASSERT_TRUE(linked->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(a, reference, 2.0f));
  // PushAndPull: the push goes up while the pull comes down (as over gRPC, the values
  // may or may not include the push); the next pull has it.
  for (const Variable* p : a.params()) p->MutableGrad().Fill(2.0f);
  ASSERT_TRUE(linked->PushAndPull(1, {}).ok());
  ASSERT_TRUE(linked->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(a, reference, 3.0f));
  // gRPC sees the same parameters.
  ASSERT_TRUE(grpc->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(b, reference, 3.0f));
  EXPECT_EQ(shard_.Counters().pushes_applied, 4);
  EXPECT_EQ(linked->counters().retries, 0);
}

TEST_F(LinkedPserver, ABrokenLinkCostsNoPushAppliesNoneTwiceAndIsOpenedAgain) {
  pserver::SharedRegionOptions quick;
  quick.idle_timeout = absl::ZeroDuration();  // DropIdleRegions forgets every region
  Start(quick);
  TwoLayers m, reference;
  reference.InitParameters(9);
  auto c = Client(&m, 2);
  ASSERT_TRUE(c->Connect().ok());
  ASSERT_TRUE(Step(*c, m, 1.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 0.5f));

  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();  // the region and its link are gone, its lanes shut down
  ASSERT_EQ(service_->StatsNow().dense_links(), 0);
  // The gradients cannot land: the push goes again over gRPC, and is applied once.
  ASSERT_TRUE(Step(*c, m, 1.0f).ok());
  EXPECT_TRUE(absl::StartsWith(c->Transports()[0], "gRPC")) << c->Transports()[0];
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.0f));
  EXPECT_EQ(shard_.Counters().pushes_applied, 2);
  // The next call asks for a fresh link and uses it.
  ASSERT_TRUE(c->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.0f));
  ASSERT_TRUE(Step(*c, m, 1.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.5f));
  EXPECT_EQ(c->counters().shm_attaches, 2);
  EXPECT_EQ(service_->StatsNow().dense_links(), 1);
  EXPECT_TRUE(absl::StartsWith(c->Transports()[0], "dense link")) << c->Transports()[0];
  EXPECT_EQ(shard_.Counters().pushes_applied, 3);

  // The same while a push and a pull run at once: both fail, and the push goes over
  // gRPC once, the pull after it.
  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();
  for (const Variable* p : m.params()) p->MutableGrad().Fill(1.0f);
  ASSERT_TRUE(c->PushAndPull(1, {}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 2.0f));
  EXPECT_EQ(shard_.Counters().pushes_applied, 4);
  ASSERT_TRUE(c->Pull({}).ok());
  EXPECT_TRUE(absl::StartsWith(c->Transports()[0], "dense link")) << c->Transports()[0];
}

// The shard moves (a failover: the master names another address) after the link sent a
// push's gradients straight from the tensors: the push reaches the new pserver over gRPC
// with those gradients, not with whatever the dropped region held.
TEST_F(LinkedPserver, APushWhoseShardMovesGoesToTheNewPserverWithItsOwnGradients) {
  Start({});
  pserver::ParameterShard moved_shard(0, 1);
  pserver::PserverService moved(&moved_shard, nullptr, "", {});
  ASSERT_TRUE(moved.OpenDenseLinks("127.0.0.1").ok());
  int port = 0;
  auto moved_server = rpc::StartServer(rpc::ServerOptions(), {&moved}, &port);
  ASSERT_TRUE(moved_server.ok()) << moved_server.status();

  TwoLayers m, reference;
  reference.InitParameters(9);
  auto c = Client(&m, 2);
  ASSERT_TRUE(c->Connect().ok());
  ASSERT_TRUE(Step(*c, m, 1.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 0.5f));

  // The old pserver stops answering gRPC; its link still takes the gradients.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
  address_ = absl::StrCat("127.0.0.1:", port);
  ASSERT_TRUE(Step(*c, m, 1.0f).ok());
  // The new pserver had no parameters: this trainer's Init made them and gave it its
  // copy (which had learned the first step), and it applied this push on top.
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.0f));
  EXPECT_EQ(moved_shard.Counters().pushes_applied, 1);
  moved_shard.Shutdown();
  (*moved_server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

// Three steps of one trainer through the link in `sync` mode, or async with deferred
// pushes; every value then moved by 3 × 0.5 × 1.
void ThreeStepsThroughTheLink(LinkedPserver* t, bool sync) {
  TwoLayers m, reference;
  reference.InitParameters(9);
  ParameterClientOptions o;
  o.shared_memory = false;
  o.dense_link_lanes = 2;
  o.sync = sync;
  o.defer_apply = !sync;
  auto c = t->SgdClient(&m, o);
  c->set_trainer_id(1);
  ASSERT_TRUE(c->Connect().ok());
  ASSERT_TRUE(absl::StartsWith(c->Transports()[0], "dense link")) << c->Transports()[0];
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(LinkedPserver::Step(*c, m, 1.0f).ok()) << "step " << step;
  // Deferred pushes are applied moments after they are answered: a last pull sees all.
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(c->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(LinkedPserver::ExpectShifted(m, reference, 1.5f));
  EXPECT_EQ(c->counters().retries, 0);
}

// Sync mode: a push, then the pull of the completed step, each through the link.
TEST_F(LinkedPserver, SyncStepsGoThroughTheLink) {
  Start({});
  ASSERT_NO_FATAL_FAILURE(ThreeStepsThroughTheLink(this, /*sync=*/true));
  EXPECT_EQ(shard_.Counters().pushes_applied, 3);
}

// Deferred pushes: the pserver copies the gradients out of its region before it
// answers, so the next push's bytes cannot overwrite one still queued.
TEST_F(LinkedPserver, DeferredPushesGoThroughTheLink) {
  Start({});
  ASSERT_NO_FATAL_FAILURE(ThreeStepsThroughTheLink(this, /*sync=*/false));
  EXPECT_EQ(shard_.Counters().pushes_applied, 3);
}

// A pserver whose links are at their memory cap refuses another trainer, which trains
// on over gRPC and asks again later: once room is free, it gets a link.
TEST_F(LinkedPserver, ATrainerRefusedForWantOfRoomAsksAgainOnceThereIsRoom) {
  pserver::SharedRegionOptions capped;
  capped.max_link_bytes = 300000;               // one TwoLayers link (~204 KB), not two
  capped.idle_timeout = absl::ZeroDuration();  // DropIdleRegions forgets every region
  Start(capped);
  TwoLayers first_model, second_model;
  auto first = Client(&first_model, 2);
  ASSERT_TRUE(first->Connect().ok());
  ASSERT_TRUE(absl::StartsWith(first->Transports()[0], "dense link")) << first->Transports()[0];

  ParameterClientOptions o;
  o.shared_memory = false;
  o.dense_link_lanes = 2;
  o.link_retry_after = absl::Milliseconds(100);
  auto second = SgdClient(&second_model, o);
  ASSERT_TRUE(second->Connect().ok());
  EXPECT_TRUE(absl::StrContains(second->Transports()[0], "past their cap of")) << second->Transports()[0];
  ASSERT_TRUE(Step(*second, second_model, 1.0f).ok());  // over gRPC meanwhile

  first.reset();  // that trainer leaves; its region goes with the idle ones
  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();
  ASSERT_EQ(service_->StatsNow().dense_links(), 0);
  absl::SleepFor(absl::Milliseconds(150));  // past link_retry_after
  ASSERT_TRUE(second->Pull({}).ok());
  EXPECT_TRUE(absl::StartsWith(second->Transports()[0], "dense link")) << second->Transports()[0];
  EXPECT_EQ(service_->StatsNow().dense_links(), 1);
  ASSERT_TRUE(Step(*second, second_model, 1.0f).ok());
  EXPECT_EQ(shard_.Counters().pushes_applied, 2);
}

// --wire_dtype bfloat16 over a link: pulls are the pserver's values rounded, pushes
// lose nothing over time (error feedback), both in half the bytes; a pipelined exchange
// goes through it too, and when the link breaks a push goes over gRPC once, with the
// gradients the region held.
TEST_F(LinkedPserver, BfloatOverTheLinkHalvesTheBytesAndLosesNothing) {
  pserver::SharedRegionOptions quick;
  quick.idle_timeout = absl::ZeroDuration();  // DropIdleRegions forgets every region
  Start(quick);
  TwoLayers exact, rounded, reference;
  reference.InitParameters(9);
  auto c32 = Client(&exact, 0), c16 = Bf16Client(&rounded, 2);
  ASSERT_TRUE(c32->Connect().ok());
  ASSERT_TRUE(c16->Connect().ok());
  EXPECT_TRUE(absl::StartsWith(c16->Transports()[0], "dense link (2 lanes each way")) << c16->Transports()[0];
  EXPECT_TRUE(absl::EndsWith(c16->Transports()[0], ", bfloat16)")) << c16->Transports()[0];
  EXPECT_EQ(service_->StatsNow().dense_links(), 1);

  ASSERT_TRUE(c32->Pull({}).ok());
  ASSERT_TRUE(c16->Pull({}).ok());
  const std::vector<const Variable*> got = rounded.params(), want = exact.params();
  int64_t values = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    for (int64_t i = 0; i < got[k]->value().numel(); ++i) {
      uint16_t h;
      float expect;
      EncodeBf16(want[k]->value().f32() + i, 1, &h);
      DecodeBf16(&h, 1, &expect);
      ASSERT_EQ(got[k]->value().f32()[i], expect) << "parameter " << k << " value " << i;
    }
    values += got[k]->value().numel();
  }
  EXPECT_EQ(c16->counters().bytes_pulled * 2, c32->counters().bytes_pulled);

  // 1 + 2^-9 is 1 in bfloat16; over 100 pushes the residuals carry what rounding dropped.
  const float w0 = exact.fc1->weight().value().f32()[0];
  const float g = 1.0f + 1.0f / 512;
  for (int k = 0; k < 100; ++k) {
    rounded.fc1->weight().MutableGrad().f32()[0] = g;
    ASSERT_TRUE(c16->Push(1).ok());
  }
  EXPECT_EQ(c16->counters().bytes_pushed, 100 * values * 2);
  EXPECT_EQ(c16->counters().retries, 0);
  EXPECT_EQ(service_->StatsNow().dense_links(), 1);
  ASSERT_TRUE(c32->Pull({}).ok());
  // Without feedback the pserver would have applied 100 x 1.0: off by 0.5 x 100 x 2^-9.
  EXPECT_NEAR(exact.fc1->weight().value().f32()[0], w0 - 0.5f * 100 * g, 0.5f / 128);

  // A pipelined exchange (gradients of 1, exact in bfloat16) through the link. Its norm
  // is hundreds of times the one-element pushes above, which the pserver's NormGuard
  // would refuse as an attack; that guard is not what this test is about.
  shard_.norm_guard().set_options({/*max_norm=*/0, /*max_ratio=*/0});
  const float b0 = exact.fc2->bias().value().f32()[0];
  ASSERT_EQ(b0, 0.0f);
  for (const Variable* p : rounded.params()) p->MutableGrad().Fill(1.0f);
  ASSERT_TRUE(c16->StartExchange(1).ok());
  ASSERT_TRUE(c16->FinishExchange().ok());
  ASSERT_TRUE(c32->Pull({}).ok());
  EXPECT_EQ(exact.fc2->bias().value().f32()[0], b0 - 0.5f);
  // A push and then a pull that includes it (two calls over a bfloat16 link).
  for (const Variable* p : rounded.params()) p->MutableGrad().Fill(1.0f);
  ASSERT_TRUE(c16->PushThenPull(1, {}).ok());
  // Biases start at 0 and move by whole halves: exact in bfloat16 too.
  EXPECT_EQ(rounded.fc2->bias().value().f32()[0], b0 - 1.0f);

  // The link breaks: the next push cannot land, goes over gRPC once, and is applied once.
  absl::SleepFor(absl::Milliseconds(2));
  service_->DropIdleRegions();
  const int64_t applied = shard_.Counters().pushes_applied;
  for (const Variable* p : rounded.params()) p->MutableGrad().Fill(2.0f);
  ASSERT_TRUE(c16->Push(1).ok());
  EXPECT_EQ(shard_.Counters().pushes_applied, applied + 1);
  ASSERT_TRUE(c32->Pull({}).ok());
  EXPECT_EQ(exact.fc2->bias().value().f32()[0], b0 - 2.0f);
  // And the next call has a link again.
  ASSERT_TRUE(c16->Pull({}).ok());
  EXPECT_TRUE(absl::EndsWith(c16->Transports()[0], ", bfloat16)")) << c16->Transports()[0];
}

TEST_F(LinkedPserver, APserverThatTakesNoLinksGetsEverythingOverGrpc) {
  Start({}, /*links=*/false);
  TwoLayers m, reference;
  reference.InitParameters(9);
  auto c = Client(&m, 2);
  ASSERT_TRUE(c->Connect().ok());
  EXPECT_TRUE(absl::StrContains(c->Transports()[0], "gRPC (this pserver takes no dense links")) << c->Transports()[0];
  ASSERT_TRUE(Step(*c, m, 2.0f).ok());  // over gRPC the pull runs beside the push
  ASSERT_TRUE(c->Pull({}).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.0f));
  EXPECT_EQ(c->counters().shm_attaches, 0);
}

// Only a trainer holding the region's tokens gets a lane: a stranger that connects and
// says nothing, or presents a wrong token, is closed unread, and holds up no one.
TEST_F(LinkedPserver, StrangersOnTheLinkPortAreClosedAndDelayNoOne) {
  Start({});
  const int port = service_->dense_link_port();
  ASSERT_GT(port, 0);
  auto silent = rpc::BulkConnection::Dial("127.0.0.1", port, absl::Seconds(5), nullptr, "");
  ASSERT_TRUE(silent.ok()) << silent.status();
  auto wrong = rpc::BulkConnection::Dial("127.0.0.1", port, absl::Seconds(5), nullptr, "");
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  const std::string junk(rpc::kBulkTokenBytes + pserver::kDenseLinkPreambleBytes, 'x');
  ASSERT_TRUE((*wrong)->Write(junk.data(), junk.size(), absl::Seconds(1)).ok());

  TwoLayers m, reference;
  reference.InitParameters(9);
  auto c = Client(&m, 2);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(c->Connect().ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(900)) << "the link waited for a stranger";
  EXPECT_TRUE(absl::StartsWith(c->Transports()[0], "dense link")) << c->Transports()[0];
  ASSERT_TRUE(Step(*c, m, 2.0f).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectShifted(m, reference, 1.0f));
  // Both strangers are closed (the one that wrote is reset): reading fails at once,
  // not at the read's own 5 s limit.
  for (auto* conn : {&*silent, &*wrong}) {
    char byte;
    const Status read = (**conn).Read(&byte, 1, absl::Seconds(5));
    EXPECT_TRUE(absl::IsUnavailable(read)) << read;
    EXPECT_EQ(read.message().find("timed out"), std::string::npos) << read;
  }
}

}  // namespace
}  // namespace pl
