#include "trainer/step_backend.h"

#ifdef PL_WITH_CUDA
#include "cuda/device.h"
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

 private:
  std::unique_ptr<cuda::GpuModel> gpu_;
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
      log << "running the model on GPU 0" << std::endl;
      return std::unique_ptr<StepBackend>(new GpuBackend(std::move(gpu).value()));
    }
    why = gpu.status();
  } else {
    why = absl::UnimplementedError("this model (sparse embeddings) trains on the CPU path");
  }
#else
  Status why = absl::UnavailableError("this build has no CUDA support (nvcc was not found when it was configured)");
#endif
  if (device == "gpu") return Annotate(why, "--device gpu");
  log << "--device auto: using the CPU (" << why.message() << ")" << std::endl;
  return std::unique_ptr<StepBackend>(new CpuBackend());
}

}  // namespace pl
