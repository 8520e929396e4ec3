// The optimizer kernels against ApplyUpdate (update_rules.h), several steps, with
// weight decay, on the same slot-major state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/optimizer_ops.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;
using testing::AllClose;
using testing::Down;
using testing::RandomTensor;
using testing::Up;

TEST(GpuOptimizer, EveryRuleMatchesApplyUpdate) {
  PL_SKIP_WITHOUT_GPU();
  auto ctx = GpuContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  for (OptimizerKind kind : {OptimizerKind::kSGD, OptimizerKind::kMomentum, OptimizerKind::kAdagrad,
                             OptimizerKind::kAdam}) {
    OptimizerSpec spec;
    spec.kind = kind;
    spec.learning_rate = 0.05f;
    spec.weight_decay = 0.01f;
    const int64_t n = 1000;
    Tensor p = RandomTensor({n}, 1);
    Tensor state({std::max<int64_t>(NumSlots(kind) * n, 1)}, DType::kFloat32);
    InitSlots(spec, state.f32(), n);
    Tensor pd = Up(**ctx, p);
    auto sd = InitSlotsOnDevice(spec, n, 0, (*ctx)->stream());
    ASSERT_TRUE(sd.ok()) << sd.status();
    for (int64_t step = 1; step <= 4; ++step) {
      Tensor g = RandomTensor({n}, 10 + step);
      ApplyUpdate(spec, p.f32(), g.f32(), state.f32(), n, step);
      ASSERT_TRUE(ApplyUpdateOnDevice(spec, pd, Up(**ctx, g), *sd, step, (*ctx)->stream()).ok());
    }
    EXPECT_TRUE(AllClose(Down(**ctx, pd), p, 1e-6f, 1e-5f)) << OptimizerName(kind);
    if (NumSlots(kind) > 0) {
      Tensor cpu_state = state.Slice(0, NumSlots(kind) * n);
      EXPECT_TRUE(AllClose(Down(**ctx, *sd), cpu_state, 1e-6f, 1e-5f)) << OptimizerName(kind);
    }
  }
}

TEST(GpuOptimizer, RejectsMismatchedStateAndBadSpec) {
  PL_SKIP_WITHOUT_GPU();
  auto ctx = GpuContext::Create(0);
  ASSERT_TRUE(ctx.ok());
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdam;
  Tensor p = Up(**ctx, RandomTensor({10}, 1)), g = Up(**ctx, RandomTensor({10}, 2));
  Tensor small = Up(**ctx, Tensor::Zeros({10}));
  Status s = ApplyUpdateOnDevice(spec, p, g, small, 1, (*ctx)->stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("adam needs 20 state values for 10 parameters, got 10"));
  spec.learning_rate = -1;
  s = ApplyUpdateOnDevice(spec, p, g, small, 1, (*ctx)->stream());
  EXPECT_THAT(std::string(s.message()), HasSubstr("learning_rate"));
}

}  // namespace
}  // namespace pl::cuda
