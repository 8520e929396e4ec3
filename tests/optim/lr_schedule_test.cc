// Learning-rate schedules (paddle_like/optim/lr_schedule.h) against hand-computed rates:
// the factor functions, the rates the single-process Optimizer and a real pserver
// shard apply, their trip through the wire format and an exported optimizer state
// (what checkpoints hold), and bad schedules named by field.
#include "paddle_like/optim/lr_schedule.h"

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

LrSchedule Step(int64_t step_size, double gamma) {
  LrSchedule s;
  s.kind = LrSchedule::Kind::kStep;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}

OptimizerSpec SgdWith(const LrSchedule& schedule, float lr = 0.1f) {
  OptimizerSpec spec{OptimizerKind::kSGD, lr};
  Status s = EncodeLrSchedule(schedule, &spec);
  EXPECT_TRUE(s.ok()) << s;
  return spec;
}

TEST(LrSchedule, FactorsMatchHandComputedValues) {
  const LrSchedule step = Step(2, 0.5);  // torch StepLR(step_size=2, gamma=0.5)
  EXPECT_THAT((std::vector<double>{step.Factor(0), step.Factor(1), step.Factor(2), step.Factor(3), step.Factor(4)}),
              ::testing::ElementsAre(1.0, 1.0, 0.5, 0.5, 0.25));

  LrSchedule cosine;  // CosineAnnealingLR(T_max=4, eta_min=0)
  cosine.kind = LrSchedule::Kind::kCosine;
  cosine.t_max = 4;
  EXPECT_NEAR(cosine.Factor(0), 1.0, 1e-12);
  EXPECT_NEAR(cosine.Factor(1), (1 + std::cos(M_PI / 4)) / 2, 1e-12);  // 0.853553
  EXPECT_NEAR(cosine.Factor(2), 0.5, 1e-12);
  EXPECT_NEAR(cosine.Factor(4), 0.0, 1e-12);
  EXPECT_NEAR(cosine.Factor(9), 0.0, 1e-12);  // held at the end, no restart
  cosine.eta_min_factor = 0.1;
  EXPECT_NEAR(cosine.Factor(2), 0.1 + 0.9 * 0.5, 1e-12);

  LrSchedule exp;
  exp.kind = LrSchedule::Kind::kExponential;
  exp.gamma = 0.9;
  EXPECT_NEAR(exp.Factor(3), 0.729, 1e-12);

  LrSchedule table;  // LambdaLR tabulated: 1 until step 10, down to 0.5 at 20
  table.kind = LrSchedule::Kind::kPiecewise;
  table.points = {{10, 1.0}, {20, 0.5}};
  EXPECT_EQ(table.Factor(0), 1.0);
  EXPECT_EQ(table.Factor(15), 0.75);
  EXPECT_EQ(table.Factor(99), 0.5);

  LrSchedule warm;  // linear warm-up over 3 updates from 0.1, then constant
  warm.warmup_steps = 3;
  warm.warmup_factor = 0.1;
  EXPECT_NEAR(warm.Factor(0), 0.1, 1e-12);
  EXPECT_NEAR(warm.Factor(1), 0.4, 1e-12);
  EXPECT_NEAR(warm.Factor(2), 0.7, 1e-12);
  EXPECT_EQ(warm.Factor(3), 1.0);
  LrSchedule warm_step = Step(2, 0.5);  // both multiply
  warm_step.warmup_steps = 2;
  EXPECT_NEAR(warm_step.Factor(1), 0.5, 1e-12);
  EXPECT_NEAR(warm_step.Factor(2), 0.5, 1e-12);
}

// SGD, lr 0.1 halved every 2 updates, gradient 1 from p = 1:
//   0.9, 0.8 (lr 0.1), 0.75, 0.7 (lr 0.05), 0.675 (lr 0.025)
const std::vector<float> kStepLrValues = {0.9f, 0.8f, 0.75f, 0.7f, 0.675f};

TEST(LrSchedule, TheSingleProcessOptimizerAppliesItAndItsStateCarriesIt) {
  Linear layer(1, 1);
  layer.weight().value().f32()[0] = 1.0f;
  auto opt = Optimizer::Create(&layer, SgdWith(Step(2, 0.5)));
  ASSERT_TRUE(opt.ok()) << opt.status();
  for (int i = 0; i < 3; ++i) {
    layer.weight().MutableGrad().f32()[0] = 1.0f;
    ASSERT_TRUE((*opt)->Step().ok());
    EXPECT_NEAR(layer.weight().value().f32()[0], kStepLrValues[i], 1e-6) << "update " << i + 1;
  }
  // A resumed run: a fresh optimizer without a schedule takes the saved state, spec
  // (schedule included) and step counts, and goes on at the scheduled rate.
  const OptimizerState saved = (*opt)->ExportState();
  auto resumed = Optimizer::Create(&layer, OptimizerSpec{OptimizerKind::kSGD, 0.1f});
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->ImportState(saved).ok());
  EXPECT_THAT((*resumed)->spec().ToString(), HasSubstr("schedule=step(step_size=2, gamma=0.5)"));
  for (int i = 3; i < 5; ++i) {
    layer.weight().MutableGrad().f32()[0] = 1.0f;
    ASSERT_TRUE((*resumed)->Step().ok());
    EXPECT_NEAR(layer.weight().value().f32()[0], kStepLrValues[i], 1e-6) << "update " << i + 1;
  }
}

TEST(LrSchedule, APserverShardAppliesItByTheShardsStep) {
  const OptimizerSpec spec = SgdWith(Step(2, 0.5));
  // The pservers get the spec over the wire.
  auto wired = OptimizerFromProto(OptimizerToProto(spec));
  ASSERT_TRUE(wired.ok()) << wired.status();
  EXPECT_EQ(wired->ToString(), spec.ToString());
  pserver::ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f))}, *wired)).ok());
  for (int i = 0; i < 5; ++i) {
    proto::PushRequest push;
    AddDense(&push, "p", 0, {1.0f, 2.0f});
    ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
    const float expected = kStepLrValues[i];
    EXPECT_THAT(PullBlock(shard, "p", 0),
                ::testing::Pointwise(::testing::FloatNear(1e-6), {expected, 1.0f - 2.0f * (1.0f - expected)}))
        << "update " << i + 1;
  }
}

TEST(LrSchedule, EncodedSchedulesRoundTripAndBadOnesAreNamed) {
  LrSchedule table;
  table.kind = LrSchedule::Kind::kPiecewise;
  table.points = {{0, 1.0}, {100, 0.25}};
  table.warmup_steps = 10;
  table.warmup_factor = 0.5;
  OptimizerSpec spec{OptimizerKind::kAdam, 1e-3f};
  ASSERT_TRUE(EncodeLrSchedule(table, &spec).ok());
  auto back = DecodeLrSchedule(spec);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), "piecewise(0:1, 100:0.25) + warmup(10 from 0.5)");
  EXPECT_TRUE(ValidateOptimizerSpec(spec).ok());
  // Re-encoding replaces; a constant schedule removes every key.
  ASSERT_TRUE(EncodeLrSchedule(LrSchedule{}, &spec).ok());
  EXPECT_TRUE(spec.hyper.empty());
  EXPECT_EQ(spec.ToString(), (OptimizerSpec{OptimizerKind::kAdam, 1e-3f}).ToString());

  auto message = [](const LrSchedule& s) {
    OptimizerSpec spec;
    return std::string(EncodeLrSchedule(s, &spec).message());
  };
  EXPECT_THAT(message(Step(0, 0.5)), HasSubstr("step_size must be in [1, 2^24), got 0"));
  EXPECT_THAT(message(Step(2, -1)), HasSubstr("gamma must be a finite number >= 0"));
  LrSchedule down;
  down.kind = LrSchedule::Kind::kPiecewise;
  down.points = {{5, 1.0}, {5, 0.5}};
  EXPECT_THAT(message(down), HasSubstr("steps must ascend: 5 then 5"));
  // Keys set by hand (--optimizer_args) are checked by the optimizer's validation.
  OptimizerSpec by_hand{OptimizerKind::kSGD, 0.1f};
  by_hand.Set("lr.kind", 1).Set("lr.gamma", 0.5f);
  EXPECT_THAT(ValidateOptimizerSpec(by_hand).message(), HasSubstr("lr.step_size is missing"));
  by_hand.Set("lr.step_size", 3).Set("lr.t_max", 7);
  EXPECT_THAT(ValidateOptimizerSpec(by_hand).message(), HasSubstr("lr.t_max is not a key of the step("));
  by_hand.hyper.erase("lr.t_max");
  EXPECT_TRUE(ValidateOptimizerSpec(by_hand).ok());
  by_hand.Set("lr.kind", 9);
  EXPECT_THAT(ValidateOptimizerSpec(by_hand).message(), HasSubstr("lr.kind 9 is not constant (0)"));
}

}  // namespace
}  // namespace pl
