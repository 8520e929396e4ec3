#include "paddle_like/optim/update_rules.h"

#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/core/flush_denormals.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/optim/optimizer.h"
#include "paddle_like/optim/optimizer_registry.h"

namespace pl {
namespace {

OptimizerSpec Spec(OptimizerKind kind, float lr) {
  OptimizerSpec s;
  s.kind = kind;
  s.learning_rate = lr;
  return s;
}

TEST(UpdateRulesTest, SgdTwoSteps) {
  float p[2] = {1.0f, -2.0f};
  const float g[2] = {0.5f, 1.0f};
  ApplyUpdate(Spec(OptimizerKind::kSGD, 0.1f), p, g, nullptr, 2, 1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.1f);
  ApplyUpdate(Spec(OptimizerKind::kSGD, 0.1f), p, g, nullptr, 2, 2);
  EXPECT_FLOAT_EQ(p[0], 0.90f);
}

TEST(UpdateRulesTest, MomentumTwoSteps) {
  auto s = Spec(OptimizerKind::kMomentum, 0.1f);
  s.Set("momentum", 0.9f);
  float p[1] = {1.0f}, v[1];
  InitSlots(s, v, 1);
  const float g[1] = {1.0f};
  ApplyUpdate(s, p, g, v, 1, 1);  // v = 1, p = 0.9
  EXPECT_FLOAT_EQ(p[0], 0.9f);
  ApplyUpdate(s, p, g, v, 1, 2);  // v = 1.9, p = 0.71
  EXPECT_FLOAT_EQ(v[0], 1.9f);
  EXPECT_FLOAT_EQ(p[0], 0.71f);
}

TEST(UpdateRulesTest, AdagradTwoSteps) {
  auto s = Spec(OptimizerKind::kAdagrad, 0.5f);
  s.Set("initial_accumulator", 0.0f);
  s.Set("epsilon", 0.0f + 1e-10f);
  float p[1] = {1.0f}, a[1];
  InitSlots(s, a, 1);
  const float g[1] = {2.0f};
  ApplyUpdate(s, p, g, a, 1, 1);  // a = 4, p = 1 - 0.5*2/2 = 0.5
  EXPECT_NEAR(p[0], 0.5f, 1e-6);
  ApplyUpdate(s, p, g, a, 1, 2);  // a = 8, p = 0.5 - 0.5*2/sqrt(8)
  EXPECT_NEAR(p[0], 0.5f - 1.0f / std::sqrt(8.0f), 1e-6);
}

TEST(UpdateRulesTest, AdamTwoSteps) {
  auto s = Spec(OptimizerKind::kAdam, 0.1f);
  float p[1] = {1.0f}, st[2];
  InitSlots(s, st, 1);
  const float g1[1] = {2.0f}, g2[1] = {-1.0f};
  ApplyUpdate(s, p, g1, st, 1, 1);
  // t=1: m=0.2, v=0.004; mhat=2, vhat=4 -> p = 1 - 0.1*2/(2+eps)
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
  ApplyUpdate(s, p, g2, st, 1, 2);
  const double m = 0.9 * 0.2 + 0.1 * -1.0, v = 0.999 * 0.004 + 0.001 * 1.0;
  const double mhat = m / (1 - 0.81), vhat = v / (1 - 0.999 * 0.999);
  EXPECT_NEAR(p[0], 0.9 - 0.1 * mhat / (std::sqrt(vhat) + 1e-8), 1e-6);
}

// A sync step's gradient is the mean of k pushes (UpdateBlock::averaged). Adam keeps v
// per push (k g^2) and divides it by k again: with k constant that is Adam on the mean
// (up to rounding); k = 1 is the plain step bit for bit; and v carried over from steps of
// 3 trainers makes a step of 2 the size Adam calibrated to 2 would take, not larger.
TEST(UpdateRulesTest, AdamKeepsItsSecondMomentPerPushOfASyncStepsMean) {
  auto rule = UpdateRule::Create(Spec(OptimizerKind::kAdam, 0.1f));
  ASSERT_TRUE(rule.ok()) << rule.status();
  auto run = [&](const std::vector<float>& grads, const std::vector<float>& averaged, float* v_out = nullptr) {
    float p[1] = {1.0f}, st[2];
    rule->InitSlots(st, 1);
    for (size_t t = 0; t < grads.size(); ++t) {
      rule->Apply(p, &grads[t], st, 1, static_cast<int64_t>(t) + 1, 1, averaged[t]);
    }
    if (v_out != nullptr) *v_out = st[1];
    return p[0];
  };
  const std::vector<float> g = {2.0f, -1.0f, 0.5f};
  // k = 1: the plain step, bit for bit (the hand computation is AdamTwoSteps').
  float plain_p[1] = {1.0f}, plain_st[2];
  rule->InitSlots(plain_st, 1);
  for (size_t t = 0; t < g.size(); ++t) rule->Apply(plain_p, &g[t], plain_st, 1, static_cast<int64_t>(t) + 1, 1);
  EXPECT_EQ(run(g, {1, 1, 1}), plain_p[0]);
  // k = 3 throughout: v holds 3 g^2, the step is Adam's on the mean.
  float v3 = 0;
  EXPECT_NEAR(run(g, {3, 3, 3}, &v3), plain_p[0], 1e-6);
  EXPECT_NEAR(v3, 3.0 * plain_st[1], 1e-9);
  // Two steps of 3 trainers, then one of 2, by hand: v = b2 v + (1 - b2) k g^2, and the
  // step divides v^ by the step's own k.
  double m = 0, v = 0, p = 1.0;
  const double ks[3] = {3, 3, 2};
  for (int t = 0; t < 3; ++t) {
    m = 0.9 * m + 0.1 * g[t];
    v = 0.999 * v + 0.001 * ks[t] * g[t] * g[t];
    const double mhat = m / (1 - std::pow(0.9, t + 1)), vhat = v / (1 - std::pow(0.999, t + 1));
    p -= 0.1 * mhat / (std::sqrt(vhat / ks[t]) + 1e-8);
  }
  EXPECT_NEAR(run(g, {3, 3, 2}), p, 1e-6);
}

// A parameter whose gradient stays zero (a pixel that is always black) has Adam's first
// moment decay by beta1 a step into the denormals, where x86 arithmetic is tens of
// times slower. Updates flush it to zero instead, and leave the caller's mode as it was.
TEST(UpdateRulesTest, AdamFlushesADecayedMomentToZeroAndRestoresTheThreadsMode) {
  auto s = Spec(OptimizerKind::kAdam, 0.1f);
  float p[1] = {1.0f}, st[2];
  InitSlots(s, st, 1);
  st[0] = 1.2e-38f;  // m: normal (FLT_MIN is 1.18e-38), but beta1 * m is not
  st[1] = 1.0f;    // v
  const float g[1] = {0.0f};
  ApplyUpdate(s, p, g, st, 1, 1000);
  EXPECT_EQ(st[0], 0.0f) << "0.9 * 1.2e-38 is a denormal, and should have been flushed";
  EXPECT_NEAR(p[0], 1.0f, 1e-6);
  // The calling thread still computes denormals.
  volatile float tiny = 2e-38f;
  EXPECT_GT(tiny * 0.5f, 0.0f);
  {
    const ScopedFlushDenormals outer;
    {
      const ScopedFlushDenormals inner;  // finds the mode set: leaves it on its way out
    }
    EXPECT_EQ(tiny * 0.5f, 0.0f);
  }
  EXPECT_GT(tiny * 0.5f, 0.0f);
}

TEST(UpdateRulesTest, ValidationNamesTheField) {
  auto s = Spec(OptimizerKind::kAdam, 0.1f);
  s.Set("beta2", 1.5f);
  Status st = ValidateOptimizerSpec(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("beta2"), std::string::npos);
  EXPECT_EQ(ParseOptimizerKind("rmsprop").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseOptimizerKind("Adam"), OptimizerKind::kAdam);
}

// A module with one sparse table to check that lazy updates touch only pushed rows.
class TableModule : public Module {
 public:
  TableModule() : Module("TableModule") { table = RegisterSparse("emb", 2, 100, InitSpec::Constant(1.0f)); }
  std::shared_ptr<SparseTable> table;
};

TEST(OptimizerTest, SparseUpdateTouchesOnlyPushedRows) {
  TableModule m;
  m.NamedParameters();
  auto opt = Optimizer::Create(&m, Spec(OptimizerKind::kAdam, 0.1f));
  ASSERT_TRUE(opt.ok());
  m.table->Row(3);
  m.table->Row(5);
  const float g[2] = {1.0f, -1.0f};
  m.table->AccumulateGrad(5, g);
  ASSERT_TRUE((*opt)->Step().ok());
  EXPECT_FLOAT_EQ(m.table->rows().Find(3)[0], 1.0f);
  EXPECT_FLOAT_EQ(m.table->rows().Find(3)[1], 1.0f);
  EXPECT_NEAR(m.table->rows().Find(5)[0], 0.9f, 1e-6);
  EXPECT_NEAR(m.table->rows().Find(5)[1], 1.1f, 1e-6);
  EXPECT_EQ(m.table->grad().size(), 0u);
  // Row 5's second update uses step 2 for bias correction, row 3's first uses step 1.
  m.table->AccumulateGrad(3, g);
  ASSERT_TRUE((*opt)->Step().ok());
  EXPECT_NEAR(m.table->rows().Find(3)[0], 0.9f, 1e-6);
}

// A table with its own optimizer (TablePolicy::optimizer) is updated by that rule, with
// that rule's state, beside the optimizer's own rule for everything else.
TEST(OptimizerTest, ATableWithItsOwnOptimizerFollowsThatRule) {
  TableModule m;
  m.table->set_policy({.optimizer = Spec(OptimizerKind::kAdam, 0.1f)});
  auto opt = Optimizer::Create(&m, Spec(OptimizerKind::kSGD, 0.5f));
  ASSERT_TRUE(opt.ok());
  const float g[2] = {1.0f, -1.0f};
  m.table->AccumulateGrad(5, g);
  ASSERT_TRUE((*opt)->Step().ok());
  // Adam's first step moves each element by lr (SGD 0.5 would give 0.5 and 1.5).
  EXPECT_NEAR(m.table->rows().Find(5)[0], 0.9f, 1e-6);
  EXPECT_NEAR(m.table->rows().Find(5)[1], 1.1f, 1e-6);
  const OptimizerState state = (*opt)->ExportState();
  ASSERT_EQ(state.rows.size(), 1u);
  EXPECT_EQ(state.rows[0].slots.size(), 2u);  // Adam's m and v, though the optimizer is SGD
  auto fresh = Optimizer::Create(&m, Spec(OptimizerKind::kSGD, 0.5f));
  Status imported = (*fresh)->ImportState(state);
  EXPECT_TRUE(imported.ok()) << imported;
  m.table->set_policy({});  // the same state no longer fits: SGD keeps no slots
  imported = (*fresh)->ImportState(state);
  EXPECT_THAT(imported.message(), ::testing::HasSubstr("'emb': 2 state slots, sgd keeps 0"));
  m.table->set_policy({.optimizer = Spec(OptimizerKind::kAdam, -1.0f)});
  m.table->AccumulateGrad(5, g);
  Status stepped = (*opt)->Step();
  EXPECT_FALSE(stepped.ok());
  EXPECT_THAT(stepped.message(), ::testing::HasSubstr("the optimizer of table 'emb'"));
}

TEST(OptimizerTest, DenseStepMatchesRuleAndClearsGrad) {
  Linear layer(2, 1);
  auto opt = Optimizer::Create(&layer, Spec(OptimizerKind::kSGD, 0.5f));
  ASSERT_TRUE(opt.ok());
  const float w0 = layer.weight().value().f32()[0];
  layer.weight().MutableGrad().f32()[0] = 2.0f;
  ASSERT_TRUE((*opt)->Step().ok());
  EXPECT_FLOAT_EQ(layer.weight().value().f32()[0], w0 - 1.0f);
  EXPECT_FLOAT_EQ(layer.weight().grad().f32()[0], 0.0f);
}

// Two Adam steps on a dense and a sparse parameter, with the state exported after the
// first and imported into a fresh optimizer: the same result as two uninterrupted steps.
TEST(OptimizerTest, ImportedStateContinuesExactly) {
  auto run = [](bool checkpoint) {
    TableModule m;
    m.NamedParameters();
    auto opt = Optimizer::Create(&m, Spec(OptimizerKind::kAdam, 0.1f));
    const float g1[2] = {1.0f, -1.0f}, g2[2] = {-3.0f, 0.5f};
    m.table->AccumulateGrad(5, g1);
    EXPECT_TRUE((*opt)->Step().ok());
    if (checkpoint) {
      const OptimizerState state = (*opt)->ExportState();
      EXPECT_EQ(state.steps, 1);
      EXPECT_EQ(state.rows.size(), 1u);
      EXPECT_EQ(state.rows[0].slots.size(), 2u);
      opt = Optimizer::Create(&m, Spec(OptimizerKind::kAdam, 0.5f));
      Status s = (*opt)->ImportState(state);
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_FLOAT_EQ((*opt)->spec().learning_rate, 0.1f);
    }
    m.table->AccumulateGrad(5, g2);
    m.table->AccumulateGrad(7, g2);
    EXPECT_TRUE((*opt)->Step().ok());
    const OptimizerState end = (*opt)->ExportState();
    EXPECT_EQ(end.rows[0].steps.i64()[0], 2);  // id 5
    EXPECT_EQ(end.rows[0].steps.i64()[1], 1);  // id 7
    return std::vector<float>{m.table->rows().Find(5)[0], m.table->rows().Find(5)[1],
                              m.table->rows().Find(7)[0]};
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(OptimizerTest, ImportStateRefusesBadStateAndChangesNothing) {
  Linear layer(2, 1);
  auto opt = Optimizer::Create(&layer, Spec(OptimizerKind::kAdagrad, 0.1f));
  layer.weight().MutableGrad().f32()[0] = 2.0f;
  ASSERT_TRUE((*opt)->Step().ok());
  OptimizerState bad = (*opt)->ExportState();
  ASSERT_EQ(bad.dense.size(), 1u);  // only w had a gradient
  bad.dense.push_back(bad.dense[0]);
  bad.dense[0].slots[0] = Tensor::Zeros({3, 1});
  bad.dense[1].name = "nope";
  Status s = (*opt)->ImportState(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);  // the first problem's code
  EXPECT_NE(s.message().find("slot 0 of 'w': expected [2, 1] float32, got [3, 1] float32"), std::string::npos) << s;
  EXPECT_NE(s.message().find("'nope' is not a dense parameter"), std::string::npos) << s;
  bad = (*opt)->ExportState();
  bad.spec.kind = OptimizerKind::kAdam;
  EXPECT_EQ((*opt)->ImportState(bad).code(), absl::StatusCode::kInvalidArgument);
  const OptimizerState after = (*opt)->ExportState();
  EXPECT_EQ(after.spec.kind, OptimizerKind::kAdagrad);
  EXPECT_FLOAT_EQ(after.dense[0].slots[0].f32()[0], 0.1f + 4.0f);  // accumulator a0 + g^2 kept
}

// A restart (values restored without their moments): Adam takes m uncorrected while v
// keeps its correction, so the first step is 0.1 lr sign(g) rather than lr sign(g), and
// the steps ramp up; once m's correction is 1 in float, the element is plain Adam again,
// bit for bit. Every hand value below is the formula in adam.cc's header.
TEST(UpdateRulesTest, AdamAfterARestartRampsUpAndThenIsPlainAdam) {
  auto rule = UpdateRule::Create(Spec(OptimizerKind::kAdam, 0.1f));
  ASSERT_TRUE(rule.ok()) << rule.status();
  float p[2] = {1.0f, -1.0f}, st[4] = {7.0f, 7.0f, 7.0f, 7.0f};
  rule->RestartSlots(st, 2);
  EXPECT_EQ(st[0], 0.0f);
  EXPECT_TRUE(std::signbit(st[2])) << "v carries the restart's mark";
  const float g1[2] = {2.0f, -0.5f}, g2[2] = {-1.0f, 0.25f};
  rule->Apply(p, g1, st, 2, /*step=*/1, 2);
  // t=1: m = 0.1 g, v^ = g^2: the step is 0.1 * 0.1 * sign(g).
  EXPECT_NEAR(p[0], 1.0f - 0.01f, 1e-6);
  EXPECT_NEAR(p[1], -1.0f + 0.01f, 1e-6);
  rule->Apply(p, g2, st, 2, /*step=*/2, 2);
  for (int i = 0; i < 2; ++i) {
    const double m = 0.9 * 0.1 * g1[i] + 0.1 * g2[i];
    const double v = 0.999 * 0.001 * g1[i] * g1[i] + 0.001 * g2[i] * g2[i];
    const double before = (i == 0 ? 1.0 : -1.0) - 0.01 * (g1[i] > 0 ? 1 : -1);
    EXPECT_NEAR(p[i], before - 0.1 * m / (std::sqrt(v / (1 - 0.999 * 0.999)) + 1e-8), 1e-6) << i;
    EXPECT_TRUE(std::signbit(st[2 + i])) << i;
  }
  // Plain Adam from the same zero moments would have moved element 0 by lr at t=1.
  float plain_p[1] = {1.0f}, plain_st[2];
  rule->InitSlots(plain_st, 1);
  rule->Apply(plain_p, g1, plain_st, 1, 1, 1);
  EXPECT_NEAR(plain_p[0], 0.9f, 1e-6);

  // Once 1 / (1 - b1^t) is 1 in float the mark goes, and from then on the element is
  // plain Adam: the same state stepped either way gives the same bits.
  int64_t t = 3;
  for (; t < 400 && std::signbit(st[2]); ++t) rule->Apply(p, g2, st, 2, t, 2);
  ASSERT_FALSE(std::signbit(st[2])) << "still marked after " << t << " steps";
  EXPECT_GT(t, 100);
  EXPECT_GE(st[3], 0.0f);
  float q[2] = {p[0], p[1]}, qst[4] = {st[0], st[1], st[2], st[3]};
  rule->Apply(p, g1, st, 2, t, 2);
  ApplyUpdate(Spec(OptimizerKind::kAdam, 0.1f), q, g1, qst, 2, t);
  EXPECT_EQ(p[0], q[0]);
  EXPECT_EQ(p[1], q[1]);
}

// An optimizer without a restart of its own starts its state over.
TEST(UpdateRulesTest, ARestartWithoutARuleOfItsOwnIsTheInitialState) {
  auto rule = UpdateRule::Create(Spec(OptimizerKind::kAdagrad, 0.1f));
  ASSERT_TRUE(rule.ok()) << rule.status();
  float restarted[3] = {5, 5, 5}, initial[3];
  rule->RestartSlots(restarted, 3);
  rule->InitSlots(initial, 3);
  EXPECT_THAT(restarted, ::testing::ElementsAreArray(initial));
}

// The pserver updates a block in the pieces it received: for every rule that must
// equal the update of the whole block (slots of the whole block, strided).
TEST(UpdateRulesTest, ABlockUpdatedInPartsEqualsTheBlockUpdatedWhole) {
  const int64_t n = 37, split = 11;
  for (OptimizerKind kind : {OptimizerKind::kSGD, OptimizerKind::kMomentum, OptimizerKind::kAdagrad,
                             OptimizerKind::kAdam}) {
    OptimizerSpec spec = Spec(kind, 0.1f);
    spec.weight_decay = 0.01f;
    const int slots = NumSlots(kind);
    std::vector<float> whole(n), parts(n), grad(n);
    std::vector<float> whole_state(std::max(1, slots) * n), parts_state(std::max(1, slots) * n);
    InitSlots(spec, whole_state.data(), n);
    InitSlots(spec, parts_state.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      whole[i] = parts[i] = 0.1f * static_cast<float>(i) - 1.0f;
      grad[i] = 0.3f - 0.02f * static_cast<float>(i);
    }
    for (int64_t step = 1; step <= 3; ++step) {
      ApplyUpdate(spec, whole.data(), grad.data(), whole_state.data(), n, step);
      ApplyUpdate(spec, parts.data(), grad.data(), parts_state.data(), split, step, n);
      ApplyUpdate(spec, parts.data() + split, grad.data() + split, parts_state.data() + split, n - split, step, n);
    }
    // Equal up to rounding: vector lanes and the scalar tail fall on other elements.
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(parts[i], whole[i], 1e-6) << OptimizerName(kind) << " element " << i;
    for (size_t i = 0; i < whole_state.size(); ++i) {
      ASSERT_NEAR(parts_state[i], whole_state[i], 1e-6 * (1 + std::fabs(whole_state[i]))) << OptimizerName(kind);
    }
  }
}

}  // namespace
}  // namespace pl
