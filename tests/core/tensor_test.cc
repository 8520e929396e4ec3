#include "paddle_like/core/tensor.h"

#include <gtest/gtest.h>

namespace pl {
namespace {

TEST(TensorTest, ReshapeSharesStorageAndInfersOneDim) {
  Tensor t = Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = t.Reshape({3, -1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3, 2}));
  r->f32()[0] = 42;
  EXPECT_EQ(t.f32()[0], 42);
}

TEST(TensorTest, ReshapeToWrongSizeNamesBothShapes) {
  Tensor t = Tensor::Zeros({2, 3});
  auto r = t.Reshape({4, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("[2, 3]"), std::string::npos);
  EXPECT_NE(r.status().message().find("[4, 2]"), std::string::npos);
}

TEST(TensorTest, SliceViewsRows) {
  Tensor t = Tensor::FromVector({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.f32()[0], 3);
  EXPECT_EQ(s.matrix()(1, 1), 6);
}

TEST(TensorTest, CloneIsDeep) {
  Tensor t = Tensor::FromVector({2}, {1, 2});
  Tensor c = t.Clone();
  c.f32()[0] = 9;
  EXPECT_EQ(t.f32()[0], 1);
}

TEST(TensorTest, StorageWrapRunsReleaseOnce) {
  int released = 0;
  float buf[4] = {1, 2, 3, 4};
  {
    auto s = Storage::Wrap(buf, sizeof(buf), Device::kCPU, [&] { ++released; });
    Tensor a = Tensor::FromStorage(s, {2, 2}, DType::kFloat32);
    Tensor b = a;
    EXPECT_EQ(b.matrix()(1, 0), 3);
  }
  EXPECT_EQ(released, 1);
}

}  // namespace
}  // namespace pl
