// The NCCL average across the visible GPUs, and the host merge of sparse gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/nccl_communicator.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using testing::Down;
using testing::Up;

TEST(NcclCommunicator, AveragesBuffersAcrossVisibleGpus) {
  PL_SKIP_WITHOUT_GPU();
  auto comm = NcclCommunicator::Create();
  ASSERT_TRUE(comm.ok()) << comm.status();
  const int n = (*comm)->size();
  std::vector<std::unique_ptr<GpuContext>> ctxs;
  std::vector<Tensor> buffers;
  std::vector<cudaStream_t> streams;
  const int64_t count = 1 << 12;
  for (int i = 0; i < n; ++i) {
    auto ctx = GpuContext::Create((*comm)->devices()[i]);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    // Device i holds i + 1 + j / count: the mean is (n + 1) / 2 + j / count.
    Tensor h({count}, DType::kFloat32);
    for (int64_t j = 0; j < count; ++j) h.f32()[j] = static_cast<float>(i + 1) + static_cast<float>(j) / count;
    buffers.push_back(Up(**ctx, h));
    streams.push_back((*ctx)->stream());
    ctxs.push_back(std::move(*ctx));
  }
  ASSERT_TRUE((*comm)->AllReduceAverage(buffers, streams).ok());
  for (int i = 0; i < n; ++i) {
    Tensor h = Down(*ctxs[i], buffers[i]);
    for (int64_t j = 0; j < count; j += 511) {
      EXPECT_NEAR(h.f32()[j], (n + 1) / 2.0f + static_cast<float>(j) / count, 1e-5f) << "GPU " << i << " elem " << j;
    }
  }
  if (n == 1) GTEST_LOG_(INFO) << "only one GPU visible: the average is the identity";
  // Mismatched inputs are refused before any collective starts.
  std::vector<Tensor> fewer(buffers.begin(), buffers.end() - 1);
  EXPECT_EQ((*comm)->AllReduceAverage(fewer, streams).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MergeSparseGradients, AccumulatesPerIdWithoutDensifying) {
  SparseRows a(2), b(2), out(2);
  float* r = a.FindOrInsert(7);
  r[0] = 1;
  r[1] = 2;
  r = a.FindOrInsert(1000000007);
  r[0] = 4;
  r[1] = 4;
  r = b.FindOrInsert(7);
  r[0] = 3;
  r[1] = 6;
  ASSERT_TRUE(MergeSparseGradients({&a, &b}, 0.5f, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out.Find(7)[0], 2.0f);
  EXPECT_FLOAT_EQ(out.Find(7)[1], 4.0f);
  EXPECT_FLOAT_EQ(out.Find(1000000007)[0], 2.0f);
  SparseRows wrong(3);
  Status s = MergeSparseGradients({&a, &wrong}, 1.0f, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("part 1 has rows of dim 3"));
}

}  // namespace
}  // namespace pl::cuda
