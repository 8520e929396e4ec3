// StepBackend: where a trainer runs the forward/backward of its steps — the CPU
// (Eigen) or one GPU (cuda/GpuModel; for the click model, its embedding lookups and
// dense tower, the table staying in host memory). The CPU module stays the model of record: the
// training loops move parameters and gradients across explicitly, once per step,
// through ImportParameters (after a pull or a local update) and ExportGradients
// (before a push), which are no-ops on the CPU.
//
// Thread-safety: one training loop drives a backend.
#ifndef PADDLE_LIKE_TRAINER_STEP_BACKEND_H_
#define PADDLE_LIKE_TRAINER_STEP_BACKEND_H_

#include <memory>
#include <ostream>
#include <string>

#include "paddle_like/optim/optimizer.h"
#include "trainer/batching.h"

namespace pl {

class StepBackend {
 public:
  virtual ~StepBackend() = default;
  virtual std::string name() const = 0;
  // Forward, loss and backward; gradients accumulate on the backend's device.
  virtual StatusOr<StepStats> ComputeGradients(ExampleModel& model, const ExampleSet& batch) = 0;
  // Device gradients -> the CPU module's gradients (then the device's are cleared).
  virtual Status ExportGradients() = 0;
  // The CPU module's parameters -> device.
  virtual Status ImportParameters() = 0;
  // Single-process training: applies the optimizer where the gradients are.
  virtual Status ApplyOptimizer(Optimizer& cpu_optimizer) = 0;
  // Device parameters -> the CPU module (before evaluating or saving).
  virtual Status ExportParameters() = 0;
};

// "cpu", "gpu" or "auto" (the GPU when one is present and the model can run there,
// else the CPU, with a log line saying why). "gpu" fails when it cannot be honoured.
StatusOr<std::unique_ptr<StepBackend>> MakeStepBackend(const std::string& device, ExampleModel& model,
                                                      std::ostream& log);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_STEP_BACKEND_H_
