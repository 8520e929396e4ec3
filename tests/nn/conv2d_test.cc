#include "paddle_like/nn/conv2d.h"

#include <omp.h>

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, stride, pad;
};

// Direct convolution, the definition the im2col path must reproduce.
Tensor NaiveConv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t pad) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t O = w.dim(0), KH = w.dim(2), KW = w.dim(3);
  const int64_t Ho = (H + 2 * pad - KH) / stride + 1, Wo = (W + 2 * pad - KW) / stride + 1;
  Tensor y({N, O, Ho, Wo}, DType::kFloat32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double s = b.f32()[o];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t ih = i * stride - pad + ki, iw = j * stride - pad + kj;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x.f32()[((n * C + c) * H + ih) * W + iw] *
                     w.f32()[((o * C + c) * KH + ki) * KW + kj];
              }
          y.f32()[((n * O + o) * Ho + i) * Wo + j] = static_cast<float>(s);
        }
  return y;
}

class Conv2DTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DTest, ForwardMatchesDirectConvolution) {
  const ConvCase c = GetParam();
  Conv2D conv(c.c, c.o, c.kh, c.kw, c.stride, c.pad);
  conv.InitParameters(3);
  conv.bias().value().flat() = RandomTensor({c.o}, 4).flat();
  Variable x(RandomTensor({c.n, c.c, c.h, c.w}, 5));
  auto y = conv.Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor ref = NaiveConv(x.value(), conv.weight().value(), conv.bias().value(), c.stride, c.pad);
  ASSERT_EQ(y->shape(), ref.shape());
  for (int64_t i = 0; i < ref.numel(); ++i) {
    ASSERT_NEAR(y->value().f32()[i], ref.f32()[i], 1e-4f) << i;
  }
}

TEST_P(Conv2DTest, GradientsMatchFiniteDifferences) {
  const ConvCase c = GetParam();
  Conv2D conv(c.c, c.o, c.kh, c.kw, c.stride, c.pad);
  conv.InitParameters(8);
  conv.bias().value().flat() = RandomTensor({c.o}, 9).flat();
  Variable x(RandomTensor({c.n, c.c, c.h, c.w}, 10), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return conv.Forward(v[0]); }, {x},
                       {conv.weight(), conv.bias()});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2DTest,
    ::testing::Values(ConvCase{1, 1, 4, 4, 1, 3, 3, 1, 0},   // batch 1, valid
                      ConvCase{2, 3, 5, 4, 2, 3, 2, 2, 1},   // H != W, stride 2, pad 1
                      ConvCase{3, 2, 6, 5, 3, 3, 3, 1, 1},   // "same" padding, odd batch
                      ConvCase{2, 2, 7, 6, 2, 2, 3, 3, 2},   // stride 3, pad > kernel/2
                      ConvCase{4, 1, 3, 8, 2, 1, 1, 2, 0}),  // 1x1 kernel, stride 2
    [](const ::testing::TestParamInfo<ConvCase>& info) {
      const ConvCase& c = info.param;
      return absl::StrCat("n", c.n, "c", c.c, "h", c.h, "w", c.w, "o", c.o, "k", c.kh, "x", c.kw,
                          "s", c.stride, "p", c.pad);
    });

// A batch large enough to take the threaded path (above the serial cut-off), with
// the tutorial's 5x5 "same" geometry: forward against the reference, and every
// gradient against the sum of single-example (serial) backward passes.
TEST(Conv2DBatchTest, ThreadedBatchMatchesPerExampleSums) {
  const int64_t N = 9, C = 2, H = 12, W = 10, O = 8;
  Conv2D conv(C, O, 5, 5, 1, 2);
  conv.InitParameters(1);
  conv.bias().value().flat() = RandomTensor({O}, 3).flat();
  Variable x(RandomTensor({N, C, H, W}, 2), true);
  auto y = conv.Forward(x);
  ASSERT_TRUE(y.ok());
  Tensor ref = NaiveConv(x.value(), conv.weight().value(), conv.bias().value(), 1, 2);
  for (int64_t i = 0; i < ref.numel(); ++i) ASSERT_NEAR(y->value().f32()[i], ref.f32()[i], 1e-4f);

  const Tensor seed = RandomTensor(y->shape(), 4);
  conv.ZeroGrad();
  ASSERT_TRUE(y->Backward(seed).ok());
  const Tensor dw = conv.weight().grad().Clone(), db = conv.bias().grad().Clone();
  const Tensor dx = x.grad().Clone();

  conv.ZeroGrad();  // now accumulate one example at a time
  for (int64_t n = 0; n < N; ++n) {
    Variable xn(x.value().Slice(n, n + 1).Clone(), true);
    auto yn = conv.Forward(xn);
    ASSERT_TRUE(yn.ok());
    ASSERT_TRUE(yn->Backward(seed.Slice(n, n + 1).Clone()).ok());
    for (int64_t i = 0; i < xn.value().numel(); ++i) {
      ASSERT_NEAR(dx.f32()[n * C * H * W + i], xn.grad().f32()[i], 1e-4f) << n << " " << i;
    }
  }
  for (int64_t i = 0; i < dw.numel(); ++i) {
    ASSERT_NEAR(dw.f32()[i], conv.weight().grad().f32()[i], 1e-3f) << i;
  }
  for (int64_t o = 0; o < O; ++o) ASSERT_NEAR(db.f32()[o], conv.bias().grad().f32()[o], 1e-3f);
  // With the centre tap of w, dW[o, c, 2, 2] = sum over n, h, w of gy[n, o] * x[n, c].
  double centre = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < H * W; ++p)
      centre += double(seed.f32()[n * O * H * W + p]) * x.value().f32()[n * C * H * W + p];
  EXPECT_NEAR(dw.f32()[12], centre, 1e-3);
}

TEST(Conv2DBatchTest, WeightGradientIsBitIdenticalForAnyThreadCount) {
  Conv2D conv(3, 8, 3, 3, 1, 1);
  conv.InitParameters(5);
  Variable x(RandomTensor({20, 3, 9, 7}, 6));
  auto grads_with = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    conv.ZeroGrad();
    auto y = conv.Forward(x);
    EXPECT_TRUE(y.ok());
    EXPECT_TRUE(y->Backward(RandomTensor(y->shape(), 7)).ok());
    omp_set_num_threads(saved);
    return std::vector<float>(conv.weight().grad().f32(),
                              conv.weight().grad().f32() + conv.weight().grad().numel());
  };
  const std::vector<float> one = grads_with(1);
  EXPECT_EQ(one, grads_with(2));
  EXPECT_EQ(one, grads_with(3));
}

TEST(Conv2DErrorTest, WrongChannelsNameTheConfigAndShape) {
  Conv2D conv(3, 8, 5, 5, 1, 2);
  EXPECT_STATUS(conv.Forward(Variable(Tensor::Zeros({2, 4, 8, 8}))).status(),
                absl::StatusCode::kInvalidArgument,
                "Conv2D(in=3, out=8, kernel=5x5, stride=1, padding=2)", "[N, 3, H, W]",
                "[2, 4, 8, 8]");
  EXPECT_STATUS(conv.Forward(Variable(Tensor::Zeros({2, 192}))).status(),
                absl::StatusCode::kInvalidArgument, "Conv2D(in=3", "[2, 192]");
}

TEST(Conv2DErrorTest, InputSmallerThanKernel) {
  Conv2D conv(1, 1, 5, 3);
  EXPECT_STATUS(conv.Forward(Variable(Tensor::Zeros({1, 1, 4, 9}))).status(),
                absl::StatusCode::kInvalidArgument, "kernel=5x3", "[1, 1, 4, 9]",
                "smaller than the kernel");
}

TEST(Conv2DErrorTest, BadConfigIsReportedNotCrashed) {
  Conv2D conv(1, 4, 3, 3, /*stride=*/0);
  EXPECT_STATUS(conv.Forward(Variable(Tensor::Zeros({1, 1, 4, 4}))).status(),
                absl::StatusCode::kInvalidArgument, "stride=0", "must be positive");
}

}  // namespace
}  // namespace pl
