// Status conversion, device discovery, the caching allocator and the copies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/status.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;
using testing::Down;
using testing::RandomTensor;

TEST(CudaStatus, NamesTheFailingCallAndCode) {
  Status s = FromCublas(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(handle, ...)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cublasSgemm: CUBLAS_STATUS_INVALID_VALUE");

  s = FromCuda(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("cudaMalloc: cudaErrorMemoryAllocation"));

  s = FromCuda(cudaErrorInsufficientDriver, "cudaGetDeviceCount(&n)");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);

  s = FromCudnn(CUDNN_STATUS_BAD_PARAM, "cudnnConvolutionForward(...)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM"));

  s = FromNccl(ncclInvalidArgument, "ncclAllReduce(...)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ncclAllReduce: "));

  EXPECT_TRUE(FromCuda(cudaSuccess, "x").ok());
  EXPECT_TRUE(FromCublas(CUBLAS_STATUS_SUCCESS, "x").ok());
  EXPECT_TRUE(FromCudnn(CUDNN_STATUS_SUCCESS, "x").ok());
  EXPECT_TRUE(FromNccl(ncclSuccess, "x").ok());
}

TEST(CudaStatus, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(size_t{3} << 30), "3.00 GiB");
}

TEST(CudaDevice, CountIsConsistentWithAvailability) {
  StatusOr<int> n = DeviceCount();
  if (GpuAvailable()) {
    ASSERT_TRUE(n.ok());
    EXPECT_GE(*n, 1);
    EXPECT_EQ(GpuUnavailableReason(), "");
    EXPECT_EQ(CheckDevice(*n).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(CheckDevice(*n).message()), HasSubstr("does not exist"));
  } else {
    // The machine without a GPU: a clear UNAVAILABLE naming the runtime's reason.
    EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("cudaGetDeviceCount"));
    EXPECT_THAT(GpuUnavailableReason(), HasSubstr("no usable CUDA device"));
    EXPECT_EQ(AllocateDeviceTensor({4}, DType::kFloat32, 0).status().code(), absl::StatusCode::kUnavailable);
  }
}

TEST(CachingAllocator, SizeClassesRoundUpWithBoundedWaste) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1 << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((1 << 20) + 1), (size_t{1} << 20) + (1 << 18));  // 1.25 MiB
  EXPECT_EQ(CachingAllocator::RoundSize(size_t{3} << 29), size_t{3} << 29);            // 1.5 GiB exact
  for (size_t b : {size_t{1} << 21, (size_t{1} << 21) + 7, size_t{123456789}, size_t{5} << 30}) {
    const size_t r = CachingAllocator::RoundSize(b);
    EXPECT_GE(r, b);
    EXPECT_LE(r, b + b / 4) << b;
  }
}

TEST(CachingAllocator, ReusesFreedBlocksAndKeepsStats) {
  PL_SKIP_WITHOUT_GPU();
  CachingAllocator& alloc = CachingAllocator::For(0);
  ASSERT_TRUE(alloc.EmptyCache().ok());
  const AllocatorStats before = alloc.stats();
  void* first = nullptr;
  {
    auto t = AllocateDeviceTensor({1000}, DType::kFloat32, 0);  // 4000 B -> 4096 class
    ASSERT_TRUE(t.ok()) << t.status();
    first = t->raw_data();
    EXPECT_EQ(alloc.stats().allocated_bytes, before.allocated_bytes + 4096);
  }
  EXPECT_EQ(alloc.stats().allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(alloc.stats().cached_bytes, 4096u);
  {
    // 3900 B falls in the same class: the same block comes back, no cudaMalloc.
    auto t = AllocateDeviceTensor({975}, DType::kFloat32, 0);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->raw_data(), first);
    EXPECT_EQ(alloc.stats().cache_hits, before.cache_hits + 1);
    EXPECT_EQ(alloc.stats().device_mallocs, before.device_mallocs + 1);
    EXPECT_GE(alloc.stats().peak_allocated_bytes, before.allocated_bytes + 4096);
  }
  ASSERT_TRUE(alloc.EmptyCache().ok());
  EXPECT_EQ(alloc.stats().cached_bytes, 0u);
}

TEST(CachingAllocator, AbsurdRequestIsResourceExhaustedWithSizes) {
  PL_SKIP_WITHOUT_GPU();
  auto t = AllocateDeviceTensor({int64_t{1} << 48}, DType::kFloat32, 0);  // 1 PiB
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(t.status().message());
  EXPECT_THAT(msg, HasSubstr("out of memory allocating 1024.00 TiB"));
  EXPECT_THAT(msg, HasSubstr("on GPU 0 (free "));
  EXPECT_THAT(msg, HasSubstr("float32 [281474976710656]"));
  // The failure leaves the device usable.
  EXPECT_TRUE(AllocateDeviceTensor({16}, DType::kFloat32, 0).ok());
}

TEST(DeviceCopies, RoundTripAndChecks) {
  PL_SKIP_WITHOUT_GPU();
  auto ctx = GpuContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  Tensor host = RandomTensor({3, 5}, 1);
  auto dev = ToDevice(host, 0, (*ctx)->stream());
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(dev->device(), Device::kCUDA);
  auto pinned = AllocatePinnedHostTensor({3, 5}, DType::kFloat32);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE(CopyToHost(*dev, *pinned, (*ctx)->stream()).ok());
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(pinned->f32()[i], host.f32()[i]);

  Status wrong = CopyToDevice(host, Tensor::Zeros({5, 3}), (*ctx)->stream());
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  wrong = CopyToDevice(host, RandomTensor({3, 5}, 2), (*ctx)->stream());
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("destination must be a CUDA tensor"));
  auto on = DeviceOf(*dev);
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(*on, 0);
}

}  // namespace
}  // namespace pl::cuda
