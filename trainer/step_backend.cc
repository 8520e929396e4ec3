#include "trainer/step_backend.h"

#ifdef PL_WITH_CUDA
#include "absl/strings/str_cat.h"
#include "cuda/allocator.h"
#include "cuda/cuda_libraries.h"
#include "cuda/device.h"
#include "cuda/embedding_ops.h"
#include "cuda/gpu_model.h"
#include "cuda/optimizer_ops.h"
#endif

namespace pl {
namespace {

class CpuBackend : public StepBackend {
 public:
  std::string name() const override { return "cpu"; }
  StatusOr<StepStats> ComputeGradients(ExampleModel& model, const ExampleSet& batch) override {
    return pl::ComputeGradients(model, batch);
  }
  Status ExportGradients() override { return absl::OkStatus(); }
  Status ImportParameters() override { return absl::OkStatus(); }
  Status ApplyOptimizer(Optimizer& opt) override { return opt.Step(); }
  Status ExportParameters() override { return absl::OkStatus(); }
};

#ifdef PL_WITH_CUDA
class GpuBackend : public StepBackend {
 public:
  explicit GpuBackend(std::unique_ptr<cuda::GpuModel> gpu) : gpu_(std::move(gpu)) {}
  std::string name() const override { return "gpu " + std::to_string(gpu_->device()); }
  StatusOr<StepStats> ComputeGradients(ExampleModel& model, const ExampleSet& batch) override {
    PL_ASSIGN_OR_RETURN(cuda::StepResult r, gpu_->TrainStep(batch.inputs, batch.labels));
    StepStats s;
    s.loss = r.loss;
    s.correct = r.correct;
    s.samples = r.examples;
    return s;
  }
  Status ExportGradients() override {
    PL_RETURN_IF_ERROR(gpu_->CopyGradientsToHost());
    return gpu_->ZeroGrad();
  }
  Status ImportParameters() override { return gpu_->CopyParametersToDevice(); }
  Status ApplyOptimizer(Optimizer& opt) override {
    if (cuda::HasGpuOptimizer(opt.spec().kind.name())) return gpu_->ApplyOptimizer(opt.spec());
    // An optimizer without a GPU update (cuda/optimizer_ops.h) steps the CPU copy.
    if (!gpu_->has_gradients()) return absl::OkStatus();
    PL_RETURN_IF_ERROR(gpu_->CopyParametersToHost());
    PL_RETURN_IF_ERROR(gpu_->CopyGradientsToHost());
    PL_RETURN_IF_ERROR(gpu_->ZeroGrad());
    PL_RETURN_IF_ERROR(opt.Step());
    return gpu_->CopyParametersToDevice();
  }
  Status ExportParameters() override { return gpu_->CopyParametersToHost(); }

 protected:
  std::unique_ptr<cuda::GpuModel> gpu_;
};

// A click model on the GPU: the rows a batch touches go up in one gather (U distinct
// rows, pulled into the table by the exchange before the step), the lookup and the
// dense tower run on the device, and the rows' gradients come back sparse, one summed
// row per distinct id, into the table's gradient that the exchange pushes.
class GpuEmbeddingTowerBackend : public GpuBackend {
 public:
  GpuEmbeddingTowerBackend(std::unique_ptr<cuda::GpuModel> tower, EmbeddingTower parts)
      : GpuBackend(std::move(tower)), parts_(parts) {}
  std::string name() const override { return "gpu " + std::to_string(gpu_->device()) + " (embedding + tower)"; }
  StatusOr<StepStats> ComputeGradients(ExampleModel&, const ExampleSet& batch) override {
    const Tensor& ids = batch.inputs;
    if (ids.dtype() != DType::kInt64 || ids.rank() != 2 || ids.dim(1) != parts_.fields) {
      return absl::InvalidArgumentError(absl::StrCat("expects int64 ids of shape [batch, ", parts_.fields, "], got ",
                                                     DTypeName(ids.dtype()), " ", ids.ShapeString()));
    }
    const int device = gpu_->device();
    cudaStream_t stream = gpu_->context().stream();
    const int64_t batch_size = ids.dim(0), lookups = ids.numel(), dim = parts_.embedding->dim();
    SparseTable* table = parts_.embedding->table().get();
    const cuda::SparseIndex index = cuda::BuildSparseIndex(ids.i64(), lookups);
    PL_ASSIGN_OR_RETURN(Tensor rows, cuda::GatherTableRows(table, index, device, stream));
    PL_ASSIGN_OR_RETURN(cuda::DeviceSparseIndex on_device, cuda::UploadSparseIndex(index, device, stream));
    PL_ASSIGN_OR_RETURN(Tensor looked_up, cuda::AllocateDeviceTensor(Shape{lookups, dim}, DType::kFloat32, device));
    PL_RETURN_IF_ERROR(cuda::EmbeddingGather(rows, on_device, looked_up, stream));
    PL_ASSIGN_OR_RETURN(Tensor x, looked_up.Reshape(Shape{batch_size, parts_.fields * dim}));
    Tensor dx;
    PL_ASSIGN_OR_RETURN(cuda::StepResult r,
                        gpu_->TrainStepFromDevice(x, batch.labels, cuda::GpuLoss::kSigmoidBinaryCrossEntropy, &dx));
    PL_ASSIGN_OR_RETURN(Tensor gy, dx.Reshape(Shape{lookups, dim}));
    PL_ASSIGN_OR_RETURN(Tensor grad_rows,
                        cuda::AllocateDeviceTensor(Shape{static_cast<int64_t>(index.unique_ids.size()), dim},
                                                   DType::kFloat32, device));
    PL_RETURN_IF_ERROR(cuda::EmbeddingGradient(gy, on_device, grad_rows, /*accumulate=*/false, stream));
    PL_RETURN_IF_ERROR(cuda::AccumulateTableGradient(grad_rows, index, table, stream));
    StepStats s;
    s.loss = r.loss;
    s.correct = r.correct;
    s.samples = r.examples;
    return s;
  }
  // One process: the table's rows are updated where they live, on the host, so the
  // whole step's update runs there (the tower is small: its copies cost little).
  Status ApplyOptimizer(Optimizer& opt) override {
    PL_RETURN_IF_ERROR(gpu_->CopyParametersToHost());
    PL_RETURN_IF_ERROR(gpu_->CopyGradientsToHost());
    PL_RETURN_IF_ERROR(gpu_->ZeroGrad());
    PL_RETURN_IF_ERROR(opt.Step());
    return gpu_->CopyParametersToDevice();
  }

 private:
  EmbeddingTower parts_;
};
#endif

}  // namespace

StatusOr<std::unique_ptr<StepBackend>> MakeStepBackend(const std::string& device, ExampleModel& model,
                                                      std::ostream& log) {
  if (device == "cpu") return std::unique_ptr<StepBackend>(new CpuBackend());
  if (device != "gpu" && device != "auto") {
    return absl::InvalidArgumentError("device must be cpu, gpu or auto, got '" + device + "'");
  }
#ifdef PL_WITH_CUDA
  Status why;
  if (!cuda::GpuAvailable()) {
    why = absl::UnavailableError(cuda::GpuUnavailableReason());
  } else if (Sequential* seq = AsSequential(model)) {
    auto gpu = cuda::GpuModel::Create(seq, /*device=*/0);
    if (gpu.ok()) {
      log << "running the model on GPU 0 with " << cuda::SummarizeCudaLibraries() << std::endl;
      return std::unique_ptr<StepBackend>(new GpuBackend(std::move(gpu).value()));
    }
    why = gpu.status();
  } else if (std::optional<EmbeddingTower> parts = AsEmbeddingTower(model)) {
    auto tower = cuda::GpuModel::Create(parts->tower, /*device=*/0);
    if (tower.ok()) {
      log << "running the model's embedding lookups and dense tower on GPU 0 (the table stays in host memory) with "
          << cuda::SummarizeCudaLibraries() << std::endl;
      return std::unique_ptr<StepBackend>(new GpuEmbeddingTowerBackend(std::move(tower).value(), *parts));
    }
    why = tower.status();
  } else {
    why = absl::UnimplementedError("this model has no GPU runner");
  }
#else
  Status why = absl::UnavailableError("this build has no CUDA support (nvcc was not found when it was configured)");
#endif
  if (device == "gpu") return Annotate(why, "--device gpu");
  log << "--device auto: using the CPU (" << why.message() << ")" << std::endl;
  return std::unique_ptr<StepBackend>(new CpuBackend());
}

}  // namespace pl
