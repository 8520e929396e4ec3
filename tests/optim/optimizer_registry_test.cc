// The optimizer registry: the built-ins' definitions, the checks every spec goes
// through, --optimizer_args parsing and both forms of the wire message.
#include "paddle_like/optim/optimizer_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/optim/update_rules.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OptimizerRegistry, BuiltinsAreRegisteredWithTheirSlotsAndDefaults) {
  EXPECT_THAT(OptimizerNames(), ::testing::IsSupersetOf({"adagrad", "adam", "momentum", "sgd"}));
  auto adam = FindOptimizer("adam");
  ASSERT_TRUE(adam.ok());
  EXPECT_THAT((*adam)->slots, ElementsAre("m", "v"));
  EXPECT_EQ(OptimizerSpec{OptimizerKind::kAdam}.ToString(), "adam(lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-08, wd=0)");
  EXPECT_EQ(NumSlots(OptimizerKind::kSGD), 0);
  EXPECT_EQ(NumSlots(OptimizerKind::kMomentum), 1);
  // Adagrad's accumulator starts at initial_accumulator.
  OptimizerSpec adagrad{OptimizerKind::kAdagrad};
  adagrad.Set("initial_accumulator", 0.5f);
  float a[3];
  InitSlots(adagrad, a, 3);
  EXPECT_THAT(a, ElementsAre(0.5f, 0.5f, 0.5f));
}

TEST(OptimizerRegistry, UnknownNamesAndForeignHyperParametersAreNamed) {
  auto unknown = FindOptimizer("rmsprop");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown optimizer 'rmsprop' (known: adagrad, adam, momentum, sgd"));
  OptimizerSpec sgd{OptimizerKind::kSGD, 0.1f};
  sgd.Set("momentum", 0.9f);
  Status s = ValidateOptimizerSpec(sgd);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("optimizer sgd has no hyper-parameter 'momentum'"));
  OptimizerDef nameless;
  EXPECT_EQ(RegisterOptimizer(nameless).code(), absl::StatusCode::kInvalidArgument);
  OptimizerDef again = *FindOptimizer("sgd").value();
  EXPECT_EQ(RegisterOptimizer(again).code(), absl::StatusCode::kAlreadyExists);
}

TEST(OptimizerRegistry, ParsesOptimizerArgs) {
  OptimizerSpec adam{OptimizerKind::kAdam, 0.1f};
  ASSERT_TRUE(ParseHyperParams(" beta2=0.99, epsilon = 1e-6 ", &adam).ok());
  EXPECT_EQ(adam.ToString(), "adam(lr=0.1, beta1=0.9, beta2=0.99, epsilon=1e-06, wd=0)");
  EXPECT_TRUE(ParseHyperParams("", &adam).ok());
  Status bad = ParseHyperParams("beta2", &adam);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("'beta2' is not name=number"));
}

TEST(OptimizerWire, RoundTripsByNameAndStillReadsTheOldForm) {
  OptimizerSpec adam{OptimizerKind::kAdam, 0.1f};
  adam.Set("epsilon", 1e-3f);
  adam.weight_decay = 0.01f;
  proto::OptimizerConfig c = OptimizerToProto(adam);
  EXPECT_EQ(c.name(), "adam");
  EXPECT_EQ(c.hyper_params().size(), 3u);
  auto back = OptimizerFromProto(c);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), adam.ToString());

  // The form written before the registry (and kept in older checkpoints).
  proto::OptimizerConfig old;
  old.set_kind(1);
  old.set_learning_rate(0.5f);
  old.set_momentum(0.8f);
  old.set_beta1(0.9f);
  old.set_beta2(0.999f);
  old.set_epsilon(1e-8f);
  old.set_initial_accumulator(0.1f);
  auto momentum = OptimizerFromProto(old);
  ASSERT_TRUE(momentum.ok()) << momentum.status();
  EXPECT_EQ(momentum->kind, OptimizerKind::kMomentum);
  EXPECT_EQ(momentum->ToString(), "momentum(lr=0.5, momentum=0.8, wd=0)");
  old.set_kind(4);
  EXPECT_THAT(OptimizerFromProto(old).status().message(), HasSubstr("optimizer kind 4 is unknown"));

  proto::OptimizerConfig bad_range = c;
  (*bad_range.mutable_hyper_params())["beta1"] = 1.0f;
  EXPECT_THAT(OptimizerFromProto(bad_range).status().message(), HasSubstr("beta1 = 1: must be in [0, 1)"));
}

}  // namespace
}  // namespace pl
