// The click model's GPU runner (trainer/step_backend.cc, GpuEmbeddingTowerBackend)
// against its CPU twin: the same batch gives the same loss, the same dense gradients of
// the tower and the same sparse row gradients, one summed row per distinct id (ids
// repeat within and across samples, so the segmented sum is exercised). Skips without
// a GPU.
#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cuda/gpu_test_util.h"
#include "trainer/models.h"
#include "trainer/step_backend.h"

namespace pl {
namespace {

float Tolerance(float x) { return 1e-5f + 1e-4f * std::fabs(x); }

TEST(EmbeddingTowerBackendTest, TheGpuStepGivesTheCpuStepsLossAndGradients) {
  PL_SKIP_WITHOUT_GPU();
  ModelOptions o;
  o.seed = 3;
  o.ctr_fields = 6;
  o.ctr_embedding_dim = 4;
  o.ctr_num_rows = 40;
  auto model = MakeExampleModel("ctr", o);
  ASSERT_TRUE(model.ok()) << model.status();
  ExampleModel& m = **model;
  constexpr int64_t kBatch = 32;
  Tensor ids(Shape{kBatch, o.ctr_fields}, DType::kInt64);
  Tensor labels(Shape{kBatch}, DType::kFloat32);
  std::mt19937 rng(7);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.i64()[i] = static_cast<int64_t>(rng() % 40);
  for (int64_t i = 0; i < kBatch; ++i) labels.f32()[i] = static_cast<float>(rng() % 2);
  const ExampleSet batch{ids, labels};
  std::ostringstream log;

  // The CPU step first: it creates the rows the batch touches, which the GPU then reads.
  auto cpu = MakeStepBackend("cpu", m, log);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  m.module().ZeroGrad();
  auto cpu_step = (*cpu)->ComputeGradients(m, batch);
  ASSERT_TRUE(cpu_step.ok()) << cpu_step.status();
  std::map<std::string, std::vector<float>> dense;
  SparseRows rows;
  for (const NamedParameter& np : m.module().NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      const Tensor& g = np.param->var.grad();
      dense[np.name].assign(g.f32(), g.f32() + g.numel());
    } else {
      rows = np.param->table->grad();
    }
  }
  ASSERT_EQ(dense.size(), 4u);  // fc1 and fc2, weight and bias
  ASSERT_GT(rows.size(), 0u);
  m.module().ZeroGrad();

  auto gpu = MakeStepBackend("gpu", m, log);
  ASSERT_TRUE(gpu.ok()) << gpu.status() << "\n" << log.str();
  auto gpu_step = (*gpu)->ComputeGradients(m, batch);
  ASSERT_TRUE(gpu_step.ok()) << gpu_step.status();
  ASSERT_TRUE((*gpu)->ExportGradients().ok());
  EXPECT_NEAR(gpu_step->loss, cpu_step->loss, 1e-5f);
  EXPECT_EQ(gpu_step->samples, kBatch);

  for (const NamedParameter& np : m.module().NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      const Tensor& g = np.param->var.grad();
      const std::vector<float>& want = dense[np.name];
      ASSERT_EQ(static_cast<size_t>(g.numel()), want.size()) << np.name;
      for (int64_t i = 0; i < g.numel(); ++i) {
        ASSERT_NEAR(g.f32()[i], want[i], Tolerance(want[i])) << np.name << " [" << i << "]";
      }
    } else {
      const SparseRows& got = np.param->table->grad();
      ASSERT_EQ(got.size(), rows.size()) << "distinct ids with a gradient";
      for (int64_t id : rows.ids()) {
        const float* g = got.Find(id);
        const float* want = rows.Find(id);
        ASSERT_NE(g, nullptr) << "no gradient row for id " << id;
        for (int64_t j = 0; j < rows.dim(); ++j) {
          ASSERT_NEAR(g[j], want[j], Tolerance(want[j])) << "row " << id << " [" << j << "]";
        }
      }
    }
  }
}

// Without a GPU, --device gpu names why; --device auto falls back to the CPU.
TEST(EmbeddingTowerBackendTest, WithoutAGpuTheClickModelSaysWhyOrFallsBack) {
  if (cuda::GpuAvailable()) GTEST_SKIP() << "a GPU is present";
  ModelOptions o;
  auto model = MakeExampleModel("ctr", o);
  ASSERT_TRUE(model.ok());
  std::ostringstream log;
  auto gpu = MakeStepBackend("gpu", **model, log);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(std::string(gpu.status().message()).find("--device gpu"), std::string::npos) << gpu.status();
  auto fallback = MakeStepBackend("auto", **model, log);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ((*fallback)->name(), "cpu");
}

}  // namespace
}  // namespace pl
