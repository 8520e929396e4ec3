// Adding an optimizer is its own definition plus one RegisterOptimizer call: "signum"
// (sign of a momentum average) is defined entirely in this file, then trained by the
// same code as the built-ins — a real pserver shard (through the wire format, dense
// blocks and lazily updated sparse rows) and the single-process Optimizer — and
// checked against hand-computed values.
//
//   signum: m = beta m + (1 - beta) g;  p -= lr * sign(m)     (one slot m, from 0)
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/optim/optimizer.h"
#include "paddle_like/optim/optimizer_registry.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

// ---- The whole optimizer. ----
enum { kBeta };

void ApplySignum(const OptimizerParams& o, const UpdateBlock& b) {
  const float beta = o.hyper[kBeta];
  for (int64_t i = 0; i < b.n; ++i) {
    float& m = b.state[i];
    m = beta * m + (1 - beta) * (b.grad[i] + o.weight_decay * b.param[i]);
    b.param[i] -= o.learning_rate * static_cast<float>((m > 0) - (m < 0));
  }
}

OptimizerDef SignumOptimizer() {
  OptimizerDef d;
  d.name = "signum";
  d.help = "m = beta m + (1 - beta) g; p -= lr sign(m)";
  d.hyper_params = {{"beta", 0.9f, HyperParam::Range::kUnitInterval}};
  d.slots = {"m"};
  d.apply = ApplySignum;
  return d;
}
// ---- End of the optimizer. ----

// The one registration (once per process: the registry refuses a second).
void RegisterSignum() {
  static const Status registered = RegisterOptimizer(SignumOptimizer());
  ASSERT_TRUE(registered.ok()) << registered;
}

OptimizerSpec Signum(float lr, float beta) {
  OptimizerSpec s;
  s.kind = OptimizerKind("signum");
  s.learning_rate = lr;
  s.Set("beta", beta);
  return s;
}

TEST(ToyOptimizer, IsFoundByNameAndUnknownNamesListIt) {
  RegisterSignum();
  auto kind = ParseOptimizerKind("Signum");
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(*kind, OptimizerKind("signum"));
  EXPECT_EQ(NumSlots(*kind), 1);
  auto unknown = ParseOptimizerKind("rmsprop");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("adagrad, adam, momentum, sgd, signum"));
  // Its hyper-parameters are checked by name and range like the built-ins'.
  Status bad_range = ValidateOptimizerSpec(Signum(0.1f, 1.5f));
  EXPECT_EQ(bad_range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_range.message(), HasSubstr("beta = 1.5"));
  OptimizerSpec foreign = Signum(0.1f, 0.5f);
  foreign.Set("beta1", 0.9f);
  EXPECT_THAT(ValidateOptimizerSpec(foreign).message(), HasSubstr("has no hyper-parameter 'beta1'"));
  EXPECT_EQ(Signum(0.1f, 0.5f).ToString(), "signum(lr=0.1, beta=0.5, wd=0)");
}

TEST(ToyOptimizer, TravelsTheWireFormat) {
  RegisterSignum();
  auto back = OptimizerFromProto(OptimizerToProto(Signum(0.25f, 0.5f)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), "signum(lr=0.25, beta=0.5, wd=0)");
  proto::OptimizerConfig unknown;
  unknown.set_name("rmsprop");
  EXPECT_THAT(OptimizerFromProto(unknown).status().message(), HasSubstr("signum"));
}

// beta = 0.5, lr = 0.1, from p = 1:
//   g = 0.5:  m = 0.25            p = 1 - 0.1 = 0.9
//   g = -0.2: m = 0.125 - 0.1 = 0.025 (still > 0: the state carries over)   p = 0.8
// (plain sign SGD would have stepped back up to 1.0.)
TEST(ToyOptimizer, PserverShardAppliesItToBlocksAndLazyRows) {
  RegisterSignum();
  pserver::ParameterShard shard(0, 1);
  ASSERT_TRUE(shard
                  .Init(MakeInit({DenseSpec("p", {3}, 3, InitSpec::Constant(1.0f)),
                                  SparseSpec("emb", 2, 0, InitSpec::Constant(1.0f))},
                                 Signum(0.1f, 0.5f)))
                  .ok());
  proto::PushRequest first;
  AddDense(&first, "p", 0, {0.5f, -0.5f, 0.0f});
  AddRows(&first, "emb", 2, {7}, {0.5f, -0.5f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(first)).ok());
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::Pointwise(::testing::FloatNear(1e-6), {0.9f, 1.1f, 1.0f}));

  proto::PushRequest second;
  AddDense(&second, "p", 0, {-0.2f, 0.2f, -0.2f});
  AddRows(&second, "emb", 2, {7, 9}, {-0.2f, 0.2f, -0.2f, 0.2f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(second)).ok());
  // Element 2 saw g = 0 then -0.2: m = -0.1, p = 1 + 0.1.
  EXPECT_THAT(PullBlock(shard, "p", 0), ::testing::Pointwise(::testing::FloatNear(1e-6), {0.8f, 1.2f, 1.1f}));
  // Row 7 has its own state (two updates); row 9, new, starts from m = 0.
  EXPECT_THAT(PullRows(shard, "emb", {7, 9}),
              ::testing::Pointwise(::testing::FloatNear(1e-6), {0.8f, 1.2f, 1.1f, 0.9f}));
}

TEST(ToyOptimizer, SingleProcessOptimizerStepsIt) {
  RegisterSignum();
  Linear layer(1, 1);
  layer.weight().value().f32()[0] = 1.0f;
  layer.bias().value().f32()[0] = 0.0f;
  auto opt = Optimizer::Create(&layer, Signum(0.1f, 0.5f));
  ASSERT_TRUE(opt.ok()) << opt.status();
  layer.weight().MutableGrad().f32()[0] = 0.5f;
  ASSERT_TRUE((*opt)->Step().ok());
  EXPECT_NEAR(layer.weight().value().f32()[0], 0.9f, 1e-6);
  layer.weight().MutableGrad().f32()[0] = -0.2f;
  ASSERT_TRUE((*opt)->Step().ok());
  EXPECT_NEAR(layer.weight().value().f32()[0], 0.8f, 1e-6);
  // The state is exported under the definition's single slot.
  const OptimizerState st = (*opt)->ExportState();
  ASSERT_EQ(st.dense.size(), 1u);  // b never had a gradient
  EXPECT_EQ(st.dense[0].name, "w");
  EXPECT_EQ(st.dense[0].step, 2);
  ASSERT_EQ(st.dense[0].slots.size(), 1u);
  EXPECT_NEAR(st.dense[0].slots[0].f32()[0], 0.025f, 1e-6);
}

}  // namespace
}  // namespace pl
