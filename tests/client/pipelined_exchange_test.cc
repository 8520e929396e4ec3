// PipelinedExchange between hosts: the pull of an exchange travels beside its push (the
// two directions of a dense link or a gRPC connection at once), so a step hides one
// transfer's time, not two. Shown without timing: the pserver holds the push's
// acknowledgement, and the pull must reach it meanwhile.
#include <gtest/gtest.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/client/pipelined_exchange.h"
#include "paddle_like/nn/nn.h"
#include "pserver/store/replication_hook.h"
#include "tests/client/one_pserver.h"

namespace pl {
namespace {

// A replication layer with no backups that holds each push's acknowledgement (the shard
// has applied the push by then) while told to.
class AckGate : public pserver::ReplicationHook {
 public:
  Status CheckPrimary() const override { return absl::OkStatus(); }
  StatusOr<int64_t> ForwardPush(const PushFrame&) override { return position_.fetch_add(1) + 1; }
  StatusOr<int64_t> ForwardInit(const proto::InitRequest&) override { return position_.fetch_add(1) + 1; }
  StatusOr<int64_t> ForwardStepComplete(int) override { return position_.fetch_add(1) + 1; }
  StatusOr<int64_t> ForwardEviction(const proto::SparseRowsMsg&, bool) override {
    return position_.fetch_add(1) + 1;
  }
  int64_t last_position() const override { return position_.load(); }
  Status WaitAcked(int64_t, absl::Time deadline) override {
    absl::MutexLock l(&mu_);
    if (holding_) ++held_acks_;
    mu_.AwaitWithDeadline(absl::Condition(this, &AckGate::Open), deadline);
    return absl::OkStatus();
  }

  void Hold(bool hold) {
    absl::MutexLock l(&mu_);
    holding_ = hold;
  }
  // Acknowledgements held so far.
  int held_acks() {
    absl::MutexLock l(&mu_);
    return held_acks_;
  }

 private:
  bool Open() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !holding_; }

  std::atomic<int64_t> position_{0};
  absl::Mutex mu_;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  int held_acks_ ABSL_GUARDED_BY(mu_) = 0;
};

class PipelinedBetweenHosts : public OnePserverTest, public ::testing::WithParamInterface<int> {
 protected:
  // The pserver, with gate_ holding its acknowledgements when told, and a client for
  // `model` as from another host: a dense link of GetParam() lanes each way, or gRPC (0).
  std::unique_ptr<ParameterClient> StartAndConnect(Linear* model, bool swap_gradients) {
    shard_.SetReplicationHook(&gate_);
    Start({}, /*links=*/true);
    ParameterClientOptions o;
    o.shared_memory = false;
    o.dense_link_lanes = GetParam();
    o.swap_gradients_in_exchange = swap_gradients;
    auto client = SgdClient(model, o);
    EXPECT_TRUE(client->Connect().ok());
    return client;
  }

  AckGate gate_;  // outlives the server, which TearDown stops
};

// lanes: a dense link of that many lanes each way; 0: gRPC alone.
TEST_P(PipelinedBetweenHosts, ThePullTravelsBesideThePushAndEachPushIsAppliedOnce) {
  const int lanes = GetParam();
  AckGate& gate = gate_;
  Linear model(256, 96), reference(256, 96);
  reference.InitParameters(9);
  std::unique_ptr<ParameterClient> client;
  ASSERT_NO_FATAL_FAILURE(client = StartAndConnect(&model, /*swap_gradients=*/false));
  EXPECT_TRUE(absl::StartsWith(client->Transports()[0], lanes > 0 ? "dense link" : "gRPC"))
      << client->Transports()[0];
  PipelinedExchange exchange(client.get());
  ASSERT_TRUE(exchange.PullNow().ok());

  gate.Hold(true);
  const int64_t pulls_before = shard_.Counters().pulls;
  model.weight().MutableGrad().Fill(1.0f);
  model.bias().MutableGrad().Fill(1.0f);
  ASSERT_TRUE(exchange.Submit(1).ok());  // returns while the exchange runs
  // Pushed and then pulled, the pull would wait for the push's acknowledgement.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((gate.held_acks() == 0 || shard_.Counters().pulls == pulls_before) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(gate.held_acks(), 1) << "the push never reached the shard";
  EXPECT_EQ(shard_.Counters().pulls, pulls_before + 1) << "the pull waited for the push's acknowledgement";
  gate.Hold(false);

  ASSERT_TRUE(exchange.Drain().ok());
  ASSERT_TRUE(exchange.PullNow().ok());
  EXPECT_EQ(shard_.Counters().pushes_applied, 1);
  for (const auto& [got, want] : {std::pair{&model.weight(), &reference.weight()}, {&model.bias(), &reference.bias()}}) {
    for (int64_t i = 0; i < got->value().numel(); ++i) {
      ASSERT_FLOAT_EQ(got->value().f32()[i], want->value().f32()[i] - 0.5f) << i;  // SGD at 0.5, gradient 1
    }
  }
  EXPECT_EQ(client->counters().retries, 0);
}

// swap_gradients_in_exchange (pl-trainer on the CPU): Submit hands the gradient tensors
// to the exchange and gives the model zeroed ones, so the next step's backward pass
// accumulates while the push is in flight without touching what it sends; the two
// sets alternate, each zeroed before it comes back.
TEST_P(PipelinedBetweenHosts, SwappedGradientsTravelWhileTheNextStepAccumulatesIntoZeroedOnes) {
  AckGate& gate = gate_;
  Linear model(256, 96), reference(256, 96);
  reference.InitParameters(9);
  std::unique_ptr<ParameterClient> client;
  ASSERT_NO_FATAL_FAILURE(client = StartAndConnect(&model, /*swap_gradients=*/true));
  PipelinedExchange exchange(client.get());
  ASSERT_TRUE(exchange.PullNow().ok());
  auto expect_values = [&](float shift) {
    for (const auto& [got, want] :
         {std::pair{&model.weight(), &reference.weight()}, {&model.bias(), &reference.bias()}}) {
      for (int64_t i = 0; i < got->value().numel(); ++i) {
        ASSERT_FLOAT_EQ(got->value().f32()[i], want->value().f32()[i] - shift) << i;
      }
    }
  };
  auto expect_zero_grads = [&] {
    for (const Variable* v : {&model.weight(), &model.bias()}) {
      for (int64_t i = 0; i < v->grad().numel(); ++i) ASSERT_EQ(v->grad().f32()[i], 0.0f) << i;
    }
  };

  gate.Hold(true);  // the push stays in flight until released
  model.weight().MutableGrad().Fill(1.0f);
  model.bias().MutableGrad().Fill(1.0f);
  const float* first = model.weight().grad().f32();
  ASSERT_TRUE(exchange.Submit(1).ok());
  const float* second = model.weight().grad().f32();
  EXPECT_NE(second, first);
  ASSERT_NO_FATAL_FAILURE(expect_zero_grads());
  // The next step's backward pass, while the push of 1 travels.
  model.weight().MutableGrad().Fill(3.0f);
  model.bias().MutableGrad().Fill(3.0f);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (gate.held_acks() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(gate.held_acks(), 1) << "the push never reached the shard";
  gate.Hold(false);
  ASSERT_TRUE(exchange.Drain().ok());
  ASSERT_TRUE(exchange.PullNow().ok());
  ASSERT_NO_FATAL_FAILURE(expect_values(0.5f));  // SGD at 0.5 of the gradient 1 only

  // The first set comes back, zeroed, while the 3s go.
  ASSERT_TRUE(exchange.Submit(1).ok());
  EXPECT_EQ(model.weight().grad().f32(), first);
  ASSERT_NO_FATAL_FAILURE(expect_zero_grads());
  ASSERT_TRUE(exchange.Drain().ok());
  ASSERT_TRUE(exchange.PullNow().ok());
  ASSERT_NO_FATAL_FAILURE(expect_values(2.0f));
  EXPECT_EQ(shard_.Counters().pushes_applied, 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, PipelinedBetweenHosts, ::testing::Values(2, 0),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param > 0 ? absl::StrCat("DenseLink", info.param, "Lanes") : std::string("Grpc");
                         });

}  // namespace
}  // namespace pl
