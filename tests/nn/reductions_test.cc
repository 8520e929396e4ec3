// Reductions along a dimension, argmax, softmax and log-softmax: forward values worked
// out by hand, gradients against finite differences, errors naming op and shape.
#include "paddle_like/nn/reductions.h"

#include <cmath>

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::DistinctValues;
using testing::ExpectGradientsMatch;
using testing::RandomTensor;

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }
std::vector<int64_t> Ids(const Tensor& t) { return std::vector<int64_t>(t.i64(), t.i64() + t.numel()); }

// a = [[[0, 1, 2], [3, 4, 5]]] reshaped as (2, 3): rows [0 1 2] and [3 4 5].
Variable Iota23() { return Variable(Tensor::FromVector({2, 3}, {0, 1, 2, 3, 4, 5})); }

TEST(ReductionsTest, SumAndMeanAlongEachDim) {
  auto s0 = functional::SumDim(Iota23(), 0);
  ASSERT_TRUE(s0.ok()) << s0.status();
  EXPECT_EQ(s0->shape(), Shape({3}));
  EXPECT_EQ(Values(s0->value()), std::vector<float>({3, 5, 7}));
  auto s1 = functional::SumDim(Iota23(), -1, /*keepdim=*/true);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->shape(), Shape({2, 1}));
  EXPECT_EQ(Values(s1->value()), std::vector<float>({3, 12}));
  auto m1 = functional::MeanDim(Iota23(), 1);
  ASSERT_TRUE(m1.ok());
  EXPECT_EQ(Values(m1->value()), std::vector<float>({1, 4}));
  // A middle dim of a rank-3 tensor: (2, 2, 2), sum over dim 1.
  Variable c(Tensor::FromVector({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  auto s = functional::SumDim(c, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape(), Shape({2, 2}));
  EXPECT_EQ(Values(s->value()), std::vector<float>({4, 6, 12, 14}));
}

TEST(ReductionsTest, MaxDimGivesValuesFirstIndicesAndRoutesTheGradient) {
  Variable a(Tensor::FromVector({2, 3}, {1, 5, 5, 7, 2, 7}), true);
  auto r = functional::MaxDim(a, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Values(r->values.value()), std::vector<float>({5, 7}));
  EXPECT_EQ(r->indices.dtype(), DType::kInt64);
  EXPECT_EQ(Ids(r->indices), std::vector<int64_t>({1, 0}));  // the first maximum on ties
  ASSERT_TRUE(r->values.Backward(Tensor::FromVector({2}, {10, 20})).ok());
  EXPECT_EQ(Values(a.grad()), std::vector<float>({0, 10, 0, 20, 0, 0}));
  auto k = functional::MaxDim(a, 0, /*keepdim=*/true);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->values.shape(), Shape({1, 3}));
  EXPECT_EQ(Ids(k->indices), std::vector<int64_t>({1, 0, 1}));
}

TEST(ReductionsTest, ArgMaxAlongADimAndOverTheFlattenedTensor) {
  const Tensor t = Tensor::FromVector({2, 3}, {1, 9, 3, 8, 2, 9});
  auto d1 = functional::ArgMax(t, 1);
  ASSERT_TRUE(d1.ok());
  EXPECT_EQ(Ids(*d1), std::vector<int64_t>({1, 2}));
  auto d0 = functional::ArgMax(t, -2, /*keepdim=*/true);
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->shape(), Shape({1, 3}));
  EXPECT_EQ(Ids(*d0), std::vector<int64_t>({1, 0, 1}));
  auto flat = functional::ArgMax(t, std::nullopt);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->rank(), 0);
  EXPECT_EQ(flat->i64()[0], 1);
  auto keep = functional::ArgMax(t, std::nullopt, true);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->shape(), Shape({1, 1}));
  auto ints = functional::ArgMax(Tensor::FromIds({3}, {4, -1, 6}), 0);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(ints->i64()[0], 2);
  // A NaN is the maximum, as in torch.
  auto nan = functional::ArgMax(Tensor::FromVector({3}, {1, NAN, 2}), 0);
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ(nan->i64()[0], 1);
}

TEST(ReductionsTest, SoftmaxAndLogSoftmaxValues) {
  // Along dim 0 of (2, 1): softmax([0, ln 3]) = [1/4, 3/4].
  Variable a(Tensor::FromVector({2, 1}, {0.0f, std::log(3.0f)}));
  auto p = functional::Softmax(a, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->value().f32()[0], 0.25f, 1e-6);
  EXPECT_NEAR(p->value().f32()[1], 0.75f, 1e-6);
  auto lp = functional::LogSoftmax(a, 0);
  ASSERT_TRUE(lp.ok());
  EXPECT_NEAR(lp->value().f32()[0], std::log(0.25f), 1e-6);
  EXPECT_NEAR(lp->value().f32()[1], std::log(0.75f), 1e-6);
  // Large inputs stay finite (max subtracted).
  Variable big(Tensor::FromVector({1, 2}, {1000.0f, 1000.0f}));
  auto pb = functional::Softmax(big, -1);
  auto lb = functional::LogSoftmax(big, -1);
  ASSERT_TRUE(pb.ok() && lb.ok());
  EXPECT_FLOAT_EQ(pb->value().f32()[0], 0.5f);
  EXPECT_NEAR(lb->value().f32()[1], -std::log(2.0f), 1e-6);
}

TEST(ReductionsTest, GradientsMatchFiniteDifferences) {
  Variable a(RandomTensor({2, 3, 4}, 7), true);
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    ExpectGradientsMatch([dim](const std::vector<Variable>& v) { return functional::SumDim(v[0], dim); }, {a});
    ExpectGradientsMatch([dim](const std::vector<Variable>& v) { return functional::MeanDim(v[0], dim, true); }, {a});
    ExpectGradientsMatch([dim](const std::vector<Variable>& v) { return functional::Softmax(v[0], dim); }, {a});
    ExpectGradientsMatch([dim](const std::vector<Variable>& v) { return functional::LogSoftmax(v[0], dim); }, {a});
  }
  Variable d(DistinctValues({3, 4}, 3), true);  // no ties within a step
  ExpectGradientsMatch([](const std::vector<Variable>& v) -> StatusOr<Variable> {
    PL_ASSIGN_OR_RETURN(auto r, functional::MaxDim(v[0], 1));
    return r.values;
  }, {d});
}

TEST(ReductionsTest, ErrorsNameTheOpAndTheShape) {
  Variable a(RandomTensor({2, 3}, 1));
  EXPECT_STATUS(functional::SumDim(a, 2).status(), absl::StatusCode::kInvalidArgument,
                "sum(dim=2)", "out of range for shape [2, 3]");
  EXPECT_STATUS(functional::Softmax(a, -3).status(), absl::StatusCode::kInvalidArgument, "softmax(dim=-3)");
  EXPECT_STATUS(functional::MaxDim(Variable(Tensor({2, 0}, DType::kFloat32)), 1).status(),
                absl::StatusCode::kInvalidArgument, "max(dim=1)", "is empty");
  EXPECT_STATUS(functional::MeanDim(Variable(Tensor::FromIds({2}, {1, 2})), 0).status(),
                absl::StatusCode::kInvalidArgument, "mean(dim=0)", "float32");
}

}  // namespace
}  // namespace pl
