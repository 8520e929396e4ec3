#include "paddle_like/nn/embedding.h"

#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/shape_ops.h"
#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::RandomTensor;

std::vector<float> RowOf(SparseRows& rows, int64_t id) {
  const float* r = rows.Find(id);
  return r ? std::vector<float>(r, r + rows.dim()) : std::vector<float>();
}

TEST(EmbeddingTest, RecordsNothingWhileGradIsOff) {
  Embedding emb(10, 3);
  emb.InitParameters(5);
  Variable ids(Tensor::FromIds({2}, {4, 7}));
  {
    NoGradScope no_grad;
    auto y = emb.Forward(ids);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_FALSE(y->requires_grad());
    EXPECT_TRUE(y->node()->inputs.empty());
    EXPECT_EQ(y->value().f32()[3], emb.table()->Row(7)[0]);  // the lookup itself still runs
  }
  auto y = emb.Forward(ids);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(y->requires_grad());
}

TEST(EmbeddingTest, GathersTableRows) {
  Embedding emb(10, 3);
  emb.InitParameters(5);
  Variable ids(Tensor::FromIds({2, 2}, {4, 7, 7, 0}));
  auto y = emb.Forward(ids);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(y->requires_grad());
  EXPECT_FALSE(ids.requires_grad());
  const int64_t expect_ids[] = {4, 7, 7, 0};
  for (int p = 0; p < 4; ++p) {
    const float* row = emb.table()->Row(expect_ids[p]);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(y->value().f32()[p * 3 + j], row[j]);
  }
  EXPECT_EQ(emb.table()->rows().size(), 3u);  // rows 4, 7, 0 were created on touch
}

TEST(EmbeddingTest, RankOneIdsGiveBatchByDim) {
  Embedding emb(10, 4);
  auto y = emb.Forward(Variable(Tensor::FromIds({3}, {1, 2, 3})));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->shape(), (Shape{3, 4}));
}

TEST(EmbeddingTest, GradientLandsOnlyOnTouchedRowsAndRepeatsAccumulate) {
  Embedding emb(1000, 2);
  Variable ids(Tensor::FromIds({2, 3}, {5, 9, 5, 5, 42, 9}));
  auto y = emb.Forward(ids);
  ASSERT_TRUE(y.ok());
  // seed[p] = (p, 10 p): row 5 appears at positions 0, 2, 3; row 9 at 1, 5; row 42 at 4.
  std::vector<float> seed;
  for (int p = 0; p < 6; ++p) seed.insert(seed.end(), {float(p), 10.0f * p});
  ASSERT_TRUE(y->Backward(Tensor::FromVector({2, 3, 2}, seed)).ok());
  SparseRows& g = emb.table()->grad();
  EXPECT_THAT(g.ids(), ::testing::UnorderedElementsAre(5, 9, 42));
  EXPECT_THAT(RowOf(g, 5), ::testing::ElementsAre(5.0f, 50.0f));
  EXPECT_THAT(RowOf(g, 9), ::testing::ElementsAre(6.0f, 60.0f));
  EXPECT_THAT(RowOf(g, 42), ::testing::ElementsAre(4.0f, 40.0f));
  EXPECT_EQ(g.values().size(), 3u * 2);  // no dense (1000, 2) gradient
  emb.ZeroGrad();
  EXPECT_EQ(emb.table()->grad().size(), 0u);
}

// Embedding -> Flatten -> Linear: the table's sparse gradient against central
// differences taken on the table's rows.
TEST(EmbeddingTest, GradientThroughDownstreamLayersMatchesFiniteDifferences) {
  Embedding emb(50, 3);
  emb.InitParameters(2);
  Flatten flat;
  Linear fc(6, 2);
  fc.InitParameters(3);
  Variable ids(Tensor::FromIds({2, 2}, {3, 17, 17, 8}));
  const Tensor weights = RandomTensor({2, 2}, 4);
  auto objective = [&]() -> StatusOr<Variable> {
    PL_ASSIGN_OR_RETURN(Variable e, emb.Forward(ids));
    PL_ASSIGN_OR_RETURN(Variable f, flat.Forward(e));
    return fc.Forward(f);
  };
  auto value = [&]() {
    auto out = objective();
    double s = 0;
    for (int i = 0; i < 4; ++i) s += double(out->value().f32()[i]) * weights.f32()[i];
    return s;
  };
  auto out = objective();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->Backward(weights).ok());
  const float step = 1e-2f;
  for (int64_t id : {3, 17, 8}) {
    const std::vector<float> analytic = RowOf(emb.table()->grad(), id);
    ASSERT_EQ(analytic.size(), 3u);
    for (int j = 0; j < 3; ++j) {
      float* row = emb.table()->rows().Find(id);
      const float saved = row[j];
      row[j] = saved + step;
      const double up = value();
      row[j] = saved - step;
      const double down = value();
      emb.table()->rows().Find(id)[j] = saved;
      EXPECT_NEAR(analytic[j], (up - down) / (2 * step), 1e-3) << "id " << id << " col " << j;
    }
  }
  EXPECT_EQ(emb.table()->grad().size(), 3u);
}

TEST(EmbeddingTest, OutOfRangeIdNamesTheLayerAndTheId) {
  Embedding emb(10, 4);
  auto y = emb.Forward(Variable(Tensor::FromIds({2, 2}, {1, 2, 12, 3})));
  EXPECT_STATUS(y.status(), absl::StatusCode::kOutOfRange, "Embedding(num_rows=10, dim=4)",
                "id 12", "position 2");
  EXPECT_STATUS(emb.Forward(Variable(Tensor::FromIds({1}, {-1}))).status(),
                absl::StatusCode::kOutOfRange, "Embedding(num_rows=10", "id -1");
  EXPECT_EQ(emb.table()->rows().size(), 0u);  // nothing created by a failed call
}

TEST(EmbeddingTest, FloatIdsAreRejected) {
  Embedding emb(10, 4);
  EXPECT_STATUS(emb.Forward(Variable(Tensor::Zeros({2, 3}))).status(),
                absl::StatusCode::kInvalidArgument, "Embedding(num_rows=10, dim=4)", "int64",
                "float32 [2, 3]");
}

TEST(EmbeddingTest, RowsAreDeterministicAcrossInstances) {
  Embedding a(100, 4), b(100, 4);
  a.InitParameters(9);
  b.InitParameters(9);
  Variable ids(Tensor::FromIds({2}, {77, 3}));
  auto ya = a.Forward(ids), yb = b.Forward(ids);
  ASSERT_TRUE(ya.ok() && yb.ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ya->value().f32()[i], yb->value().f32()[i]);
}

}  // namespace
}  // namespace pl
