// Every GPU op against its CPU twin (paddle_like/nn) on random inputs, forward and
// backward.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/activation_ops.h"
#include "cuda/conv_ops.h"
#include "cuda/dropout_ops.h"
#include "cuda/embedding_ops.h"
#include "cuda/linear_ops.h"
#include "cuda/loss_ops.h"
#include "cuda/pool_ops.h"
#include "paddle_like/nn/nn.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;
using testing::AllClose;
using testing::Down;
using testing::Empty;
using testing::RandomTensor;
using testing::Up;

class GpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PL_SKIP_WITHOUT_GPU();
    auto ctx = GpuContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }
  std::unique_ptr<GpuContext> ctx_;
};

TEST_F(GpuOpsTest, GemmHandlesRowMajorTransposes) {
  // C (2, 3) = A^T B^T with A stored (4, 2) and B stored (3, 4).
  Tensor a = RandomTensor({4, 2}, 1), b = RandomTensor({3, 4}, 2);
  Tensor expect = Tensor::Zeros({2, 3});
  expect.matrix() = a.matrix().transpose() * b.matrix().transpose();
  Tensor c = Empty(*ctx_, {2, 3});
  ASSERT_TRUE(Gemm(*ctx_, true, true, 2, 3, 4, 1.0f, Up(*ctx_, a).f32(), Up(*ctx_, b).f32(), 0.0f, c.f32(),
                   GemmPrecision::kFloat32)
                  .ok());
  EXPECT_TRUE(AllClose(Down(*ctx_, c), expect));
}

TEST_F(GpuOpsTest, LinearMatchesCpu) {
  Linear cpu(7, 5);
  cpu.bias().value().flat() = RandomTensor({5}, 3).flat();
  Tensor x = RandomTensor({4, 7}, 4), gy = RandomTensor({4, 5}, 5);
  Variable xv(x, /*requires_grad=*/true);
  auto y = cpu.Forward(xv);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Backward(gy).ok());

  Tensor dx = Empty(*ctx_, {4, 7}), dw = Empty(*ctx_, {7, 5}), db = Empty(*ctx_, {5}), yd = Empty(*ctx_, {4, 5});
  Tensor xd = Up(*ctx_, x), wd = Up(*ctx_, cpu.weight().value()), bd = Up(*ctx_, cpu.bias().value());
  ASSERT_TRUE(LinearForward(*ctx_, xd, wd, bd, yd).ok());
  ASSERT_TRUE(LinearBackward(*ctx_, xd, wd, Up(*ctx_, gy), dx, dw, db, false).ok());
  EXPECT_TRUE(AllClose(Down(*ctx_, yd), y->value()));
  EXPECT_TRUE(AllClose(Down(*ctx_, dx), xv.grad()));
  EXPECT_TRUE(AllClose(Down(*ctx_, dw), cpu.weight().grad()));
  EXPECT_TRUE(AllClose(Down(*ctx_, db), cpu.bias().grad()));

  // Accumulating adds a second copy.
  ASSERT_TRUE(LinearBackward(*ctx_, xd, wd, Up(*ctx_, gy), Tensor(), dw, db, true).ok());
  Tensor twice = cpu.weight().grad().Clone();
  twice.flat() *= 2.0f;
  EXPECT_TRUE(AllClose(Down(*ctx_, dw), twice));

  Status bad = LinearForward(*ctx_, Up(*ctx_, RandomTensor({4, 6}, 9)), wd, bd, yd);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("x must be [batch, 7], got [4, 6]"));
}

void CheckConv(GpuContext& ctx, int64_t c, int64_t o, int64_t k, int64_t stride, int64_t pad) {
  Conv2D cpu(c, o, k, k, stride, pad);
  cpu.bias().value().flat() = RandomTensor({o}, 11).flat();
  Tensor x = RandomTensor({2, c, 9, 8}, 12);
  Variable xv(x, true);
  auto y = cpu.Forward(xv);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor gy = RandomTensor(y->shape(), 13);
  ASSERT_TRUE(y->Backward(gy).ok());

  ConvShape s{2, c, 9, 8, o, k, k, stride, pad};
  auto plan = ConvPlan::Create(ctx, s);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ((*plan)->shape().y_shape(), y->shape());
  Tensor xd = Up(ctx, x), wd = Up(ctx, cpu.weight().value()), bd = Up(ctx, cpu.bias().value());
  Tensor yd = Empty(ctx, s.y_shape()), dx = Empty(ctx, s.x_shape()), dw = Empty(ctx, s.w_shape()),
         db = Empty(ctx, {o}), gyd = Up(ctx, gy);
  ASSERT_TRUE((*plan)->Forward(ctx, xd, wd, bd, yd).ok());
  ASSERT_TRUE((*plan)->BackwardData(ctx, wd, gyd, dx).ok());
  ASSERT_TRUE((*plan)->BackwardFilter(ctx, xd, gyd, dw, false).ok());
  ASSERT_TRUE((*plan)->BackwardBias(ctx, gyd, db, false).ok());
  EXPECT_TRUE(AllClose(Down(ctx, yd), y->value(), 1e-4f, 1e-4f)) << s.ToString();
  EXPECT_TRUE(AllClose(Down(ctx, dx), xv.grad(), 1e-4f, 1e-4f)) << s.ToString();
  EXPECT_TRUE(AllClose(Down(ctx, dw), cpu.weight().grad(), 1e-4f, 1e-4f)) << s.ToString();
  EXPECT_TRUE(AllClose(Down(ctx, db), cpu.bias().grad(), 1e-4f, 1e-4f)) << s.ToString();
}

TEST_F(GpuOpsTest, Conv2DMatchesCpu) {
  CheckConv(*ctx_, 3, 4, 3, 2, 1);
  CheckConv(*ctx_, 2, 5, 5, 1, 2);
  CheckConv(*ctx_, 1, 3, 3, 1, 0);
}

TEST_F(GpuOpsTest, ConvPlanRejectsShapesWithoutOutput) {
  auto plan = ConvPlan::Create(*ctx_, ConvShape{1, 1, 2, 2, 1, 5, 5, 1, 0});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("no output"));
}

TEST_F(GpuOpsTest, MaxPoolMatchesCpu) {
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 1}}) {
    MaxPool2D cpu(k, s);
    Tensor x = RandomTensor({2, 3, 9, 7}, 21);
    Variable xv(x, true);
    auto y = cpu.Forward(xv);
    ASSERT_TRUE(y.ok()) << y.status();
    Tensor gy = RandomTensor(y->shape(), 22);
    ASSERT_TRUE(y->Backward(gy).ok());

    auto plan = MaxPoolPlan::Create(x.shape(), k, s);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ((*plan)->y_shape(), y->shape());
    Tensor xd = Up(*ctx_, x), yd = Empty(*ctx_, y->shape()), dx = Empty(*ctx_, x.shape());
    ASSERT_TRUE((*plan)->Forward(*ctx_, xd, yd).ok());
    ASSERT_TRUE((*plan)->Backward(*ctx_, xd, yd, Up(*ctx_, gy), dx).ok());
    EXPECT_TRUE(AllClose(Down(*ctx_, yd), y->value(), 0, 0)) << "kernel " << k << " stride " << s;
    EXPECT_TRUE(AllClose(Down(*ctx_, dx), xv.grad(), 1e-6f, 1e-6f)) << "kernel " << k << " stride " << s;
  }
}

TEST_F(GpuOpsTest, ActivationsMatchCpu) {
  using Fn = StatusOr<Variable> (*)(const Variable&);
  const std::pair<Activation, Fn> cases[] = {
      {Activation::kRelu, &ApplyRelu}, {Activation::kSigmoid, &ApplySigmoid}, {Activation::kTanh, &ApplyTanh}};
  for (auto [act, fn] : cases) {
    Tensor x = RandomTensor({3, 50}, 31, -6.0f, 6.0f), gy = RandomTensor({3, 50}, 32);
    Variable xv(x, true);
    auto y = fn(xv);
    ASSERT_TRUE(y.ok());
    ASSERT_TRUE(y->Backward(gy).ok());
    Tensor yd = Empty(*ctx_, x.shape()), dx = Up(*ctx_, Tensor::Filled(x.shape(), 1.0f));
    ASSERT_TRUE(ActivationForward(act, Up(*ctx_, x), yd, ctx_->stream()).ok());
    ASSERT_TRUE(ActivationBackward(act, yd, Up(*ctx_, gy), dx, /*accumulate=*/true, ctx_->stream()).ok());
    Tensor expect_dx = xv.grad().Clone();
    expect_dx.flat().array() += 1.0f;
    EXPECT_TRUE(AllClose(Down(*ctx_, yd), y->value(), 2e-6f, 2e-6f)) << ActivationName(act);
    EXPECT_TRUE(AllClose(Down(*ctx_, dx), expect_dx, 2e-6f, 2e-6f)) << ActivationName(act);
  }
}

TEST_F(GpuOpsTest, DropoutDrawsTheCpuMasks) {
  Dropout cpu(0.4f, /*seed=*/77);
  cpu.Train(true);
  Tensor x = RandomTensor({8, 300}, 41), gy = RandomTensor({8, 300}, 42);
  for (uint64_t call = 0; call < 2; ++call) {
    Variable xv(x, true);
    auto y = cpu.Forward(xv);  // call `call` of the layer
    ASSERT_TRUE(y.ok());
    ASSERT_TRUE(y->Backward(gy).ok());
    auto mask = MakeDropoutMask(0.4f, 77, call);
    ASSERT_TRUE(mask.ok());
    Tensor yd = Empty(*ctx_, x.shape()), dx = Empty(*ctx_, x.shape());
    ASSERT_TRUE(DropoutForward(*mask, Up(*ctx_, x), yd, ctx_->stream()).ok());
    ASSERT_TRUE(DropoutBackward(*mask, Up(*ctx_, gy), dx, false, ctx_->stream()).ok());
    EXPECT_TRUE(AllClose(Down(*ctx_, yd), y->value(), 0, 0)) << "call " << call;
    EXPECT_TRUE(AllClose(Down(*ctx_, dx), xv.grad(), 0, 0)) << "call " << call;
  }
  EXPECT_EQ(MakeDropoutMask(1.0f, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuOpsTest, SoftmaxCrossEntropyMatchesCpu) {
  Tensor logits = RandomTensor({37, 10}, 51, -4.0f, 4.0f);
  std::vector<int64_t> ids(37);
  for (int i = 0; i < 37; ++i) ids[i] = (i * 7) % 10;
  Tensor labels = Tensor::FromIds({37}, ids);
  Variable lv(logits, true);
  auto loss = SoftmaxCrossEntropy(lv, labels);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(loss->Backward().ok());

  Tensor grad = Empty(*ctx_, {37, 10});
  auto r = SoftmaxCrossEntropy(Up(*ctx_, logits), Up(*ctx_, labels), grad, ctx_->stream());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->loss, loss->value().f32()[0], 1e-5);
  EXPECT_EQ(r->correct, CountCorrect(logits, labels));
  EXPECT_TRUE(AllClose(Down(*ctx_, grad), lv.grad(), 1e-6f, 1e-4f));

  ids[3] = 10;
  auto bad = SoftmaxCrossEntropy(Up(*ctx_, logits), Up(*ctx_, Tensor::FromIds({37}, ids)), Tensor(),
                                 ctx_->stream());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("1 of 37 labels"));
}

TEST_F(GpuOpsTest, SigmoidBinaryCrossEntropyMatchesCpu) {
  Tensor logits = RandomTensor({29, 1}, 61, -30.0f, 30.0f);
  Tensor labels = RandomTensor({29}, 62, 0.0f, 1.0f);
  Variable lv(logits, true);
  auto loss = SigmoidBinaryCrossEntropy(lv, labels);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(loss->Backward().ok());
  Tensor grad = Empty(*ctx_, {29, 1});
  auto r = SigmoidBinaryCrossEntropy(Up(*ctx_, logits), Up(*ctx_, labels), grad, ctx_->stream());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->loss, loss->value().f32()[0], 1e-4);
  EXPECT_EQ(r->correct, CountCorrect(logits, labels));
  EXPECT_TRUE(AllClose(Down(*ctx_, grad), lv.grad(), 1e-6f, 1e-4f));
}

TEST_F(GpuOpsTest, EmbeddingGatherAndSparseGradientMatchCpu) {
  Embedding cpu(1000, 6);
  cpu.NamedParameters();  // gives the table its full name (rows are seeded by it)
  const std::vector<int64_t> ids = {5, 999, 5, 42, 0, 42, 5, 17};
  Tensor idt = Tensor::FromIds({8}, ids);
  auto y = cpu.Forward(Variable(idt));
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor gy = RandomTensor({8, 6}, 71);
  ASSERT_TRUE(y->Backward(gy).ok());

  SparseIndex index = BuildSparseIndex(ids.data(), 8);
  EXPECT_EQ(index.unique_ids, (std::vector<int64_t>{5, 999, 42, 0, 17}));
  EXPECT_EQ(index.offsets, (std::vector<int64_t>{0, 3, 4, 6, 7, 8}));
  EXPECT_EQ(index.positions, (std::vector<int64_t>{0, 2, 6, 1, 3, 5, 4, 7}));

  auto dindex = UploadSparseIndex(index, 0, ctx_->stream());
  ASSERT_TRUE(dindex.ok()) << dindex.status();
  auto rows = GatherTableRows(cpu.table().get(), index, 0, ctx_->stream());
  ASSERT_TRUE(rows.ok()) << rows.status();
  Tensor out = Empty(*ctx_, {8, 6});
  ASSERT_TRUE(EmbeddingGather(*rows, *dindex, out, ctx_->stream()).ok());
  EXPECT_TRUE(AllClose(Down(*ctx_, out), y->value(), 0, 0));

  Tensor grad_rows = Empty(*ctx_, {5, 6});
  ASSERT_TRUE(EmbeddingGradient(Up(*ctx_, gy), *dindex, grad_rows, false, ctx_->stream()).ok());
  SparseTable fresh("t", 6, 1000, InitSpec::Zeros());
  ASSERT_TRUE(AccumulateTableGradient(grad_rows, index, &fresh, ctx_->stream()).ok());
  // Only the 5 touched rows, each equal to the CPU layer's accumulated row.
  ASSERT_EQ(fresh.grad().size(), 5u);
  for (int64_t id : index.unique_ids) {
    const float* want = cpu.table()->grad().Find(id);
    const float* got = fresh.grad().Find(id);
    ASSERT_NE(want, nullptr);
    ASSERT_NE(got, nullptr);
    for (int d = 0; d < 6; ++d) EXPECT_FLOAT_EQ(got[d], want[d]) << "id " << id << " dim " << d;
  }
}

TEST_F(GpuOpsTest, BiasOpsBroadcastOverChannels) {
  Tensor y = Tensor::Zeros({2, 3, 2, 2});
  Tensor b = Tensor::FromVector({3}, {1.0f, 2.0f, 3.0f});
  Tensor yd = Up(*ctx_, y);
  ASSERT_TRUE(BiasAdd(yd, Up(*ctx_, b), ctx_->stream()).ok());
  Tensor db = Empty(*ctx_, {3});
  ASSERT_TRUE(BiasGrad(yd, db, false, ctx_->stream()).ok());
  Tensor h = Down(*ctx_, db);
  EXPECT_FLOAT_EQ(h.f32()[0], 8.0f);  // 2 images x 4 pixels x 1
  EXPECT_FLOAT_EQ(h.f32()[1], 16.0f);
  EXPECT_FLOAT_EQ(h.f32()[2], 24.0f);
  Status bad = BiasAdd(yd, Up(*ctx_, Tensor::Zeros({4})), ctx_->stream());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("b must be a float32 CUDA tensor of shape [3]"));
}

}  // namespace
}  // namespace pl::cuda
