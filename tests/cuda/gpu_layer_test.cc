// The GPU layer registry (cuda/gpu_layer.h), host-only: a layer type registered with its
// own GPU hook is built by GpuModel like the built-ins, and an unsupported type is named
// with the types that are supported (new ones included).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/gpu_layer.h"
#include "cuda/gpu_model.h"
#include "paddle_like/nn/nn.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;

// A parameter-free layer type known only to this test (an identity, on both sides).
class Double : public Layer {
 public:
  Double() : Layer("Double") {}
  StatusOr<Variable> Forward(const Variable& x) override { return x; }
};

class DoubleGpuLayer : public GpuLayer {
 public:
  std::string Describe() const override { return "Double"; }
  Status Forward(const GpuLayerRun&, const Tensor& in, bool, Tensor* out) override {
    *out = in;
    return absl::OkStatus();
  }
  Status Backward(const GpuLayerRun&, const Tensor&, const Tensor&, const Tensor& g, bool, Tensor* dx) override {
    *dx = g;
    return absl::OkStatus();
  }
};

int built = 0;
StatusOr<std::unique_ptr<GpuLayer>> MakeDouble(Layer&, GpuLayerBuilder&) {
  ++built;
  return std::unique_ptr<GpuLayer>(new DoubleGpuLayer);
}

TEST(GpuLayerRegistry, ANewLayerTypeRegistersItsOwnHook) {
  ASSERT_TRUE(RegisterGpuLayer("Double", MakeDouble).ok());
  EXPECT_EQ(RegisterGpuLayer("Double", MakeDouble).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterGpuLayer("Linear", MakeDouble).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(GpuLayerTypes().front(), "Linear");
  EXPECT_EQ(GpuLayerTypes().back(), "Double");

  // GpuModel builds it (the layers are built before any device is looked for).
  Sequential m;
  m.Add("fc", std::make_shared<Linear>(4, 4)).Add("x2", std::make_shared<Double>());
  (void)GpuModel::Create(&m, 0);
  EXPECT_EQ(built, 1);

  Sequential bad;
  bad.Add("emb", std::make_shared<Embedding>(10, 4));
  auto gpu = GpuModel::Create(&bad, 0);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(gpu.status().message(), HasSubstr("layer 'emb' (Embedding) cannot run on the GPU (supported: "
                                                "Linear, Conv2D, MaxPool2D, ReLU, Sigmoid, Tanh, Dropout, "
                                                "Flatten, Reshape, Double)"));
  EXPECT_EQ(FindGpuLayer("Embedding").status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace pl::cuda
