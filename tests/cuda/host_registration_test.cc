// HostRegistration and GpuModel's page-locked copies: large buffers are locked, small
// ones are not, a moved buffer moves its registration, and a model whose CPU buffers
// are locked computes bit for bit what a pageable one computes.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/gpu_model.h"
#include "cuda/host_registration.h"
#include "paddle_like/nn/nn.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using testing::RandomTensor;

// Whether the driver sees `p` as page-locked host memory it was asked to lock.
bool IsRegistered(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

TEST(HostRegistration, LocksLargeBuffersFollowsMovesAndUnlocksOnDestruction) {
  PL_SKIP_WITHOUT_GPU();
  std::vector<float> big(1 << 16), moved(1 << 16), small(16);
  {
    HostRegistration reg;
    EXPECT_TRUE(reg.Ensure(0, big.data(), big.size() * 4));
    EXPECT_TRUE(reg.Ensure(0, big.data(), big.size() * 4));  // already: no second lock
    EXPECT_FALSE(reg.Ensure(1, small.data(), small.size() * 4));
    EXPECT_TRUE(IsRegistered(big.data()));
    EXPECT_FALSE(IsRegistered(small.data()));
    EXPECT_EQ(reg.registered_bytes(), big.size() * 4);

    EXPECT_TRUE(reg.Ensure(0, moved.data(), moved.size() * 4));  // slot 0's buffer moved
    EXPECT_FALSE(IsRegistered(big.data()));
    EXPECT_TRUE(IsRegistered(moved.data()));
    EXPECT_EQ(reg.registered_bytes(), moved.size() * 4);
  }
  EXPECT_FALSE(IsRegistered(moved.data()));
}

// fc1's weight (256 KiB) and gradient are locked; the biases and fc2 stay pageable.
std::shared_ptr<Sequential> Mlp(uint64_t seed) {
  auto m = std::make_shared<Sequential>();
  m->Add("fc1", std::make_shared<Linear>(256, 256)).Add("relu", std::make_shared<ReLU>())
      .Add("fc2", std::make_shared<Linear>(256, 4));
  m->InitParameters(seed);
  return m;
}

TEST(GpuModel, PageLockedCopiesComputeWhatPageableOnesDo) {
  PL_SKIP_WITHOUT_GPU();
  auto locked_net = Mlp(5), pageable_net = Mlp(5);
  GpuModelOptions o;
  auto locked = GpuModel::Create(locked_net.get(), o);
  o.pin_host_buffers = false;
  auto pageable = GpuModel::Create(pageable_net.get(), o);
  ASSERT_TRUE(locked.ok()) << locked.status();
  ASSERT_TRUE(pageable.ok()) << pageable.status();
  Tensor x = RandomTensor({8, 256}, 2);
  Tensor labels = Tensor::FromIds({8}, {0, 1, 2, 3, 0, 1, 2, 3});
  for (int step = 0; step < 3; ++step) {
    // A pull overwrites the CPU values in place; both models upload them.
    Tensor fresh = RandomTensor({256, 256}, 10 + step, -0.1f, 0.1f);
    for (auto* net : {locked_net.get(), pageable_net.get()}) {
      auto w = net->FindParameter("fc1.w");
      ASSERT_TRUE(w.ok()) << w.status();
      std::copy(fresh.f32(), fresh.f32() + fresh.numel(), (*w)->var.value().f32());
    }
    for (auto* gpu : {locked->get(), pageable->get()}) {
      ASSERT_TRUE(gpu->CopyParametersToDevice().ok());
      ASSERT_TRUE(gpu->TrainStep(x, labels).ok());
      ASSERT_TRUE(gpu->CopyGradientsToHost().ok());
      ASSERT_TRUE(gpu->ZeroGrad().ok());
    }
    auto a = locked_net->NamedParameters(), b = pageable_net->NamedParameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const Tensor& ga = a[i].param->var.grad();
      const Tensor& gb = b[i].param->var.grad();
      ASSERT_EQ(ga.numel(), gb.numel());
      EXPECT_EQ(0, std::memcmp(ga.raw_data(), gb.raw_data(), ga.bytes())) << a[i].name << " step " << step;
    }
  }
  EXPECT_EQ((*locked)->pinned_host_bytes(), 2u * 256 * 256 * 4);  // fc1.w's value and gradient
  EXPECT_EQ((*pageable)->pinned_host_bytes(), 0u);
  auto w = locked_net->FindParameter("fc1.w");
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(IsRegistered((*w)->var.value().raw_data()));
  locked->reset();
  EXPECT_FALSE(IsRegistered((*w)->var.value().raw_data()));
}

}  // namespace
}  // namespace pl::cuda
