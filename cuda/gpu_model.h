// GpuModel: runs a CPU pl::Sequential on one GPU for training and inference. It walks
// the Sequential's layers once, mirrors each by the GPU layer registered for its type
// (gpu_layer.h: Linear, Conv2D, MaxPool2D, ReLU, Sigmoid, Tanh, Dropout, Flatten,
// Reshape, and whatever else registers one), copies the dense
// parameters into one contiguous device buffer (gradients and optimizer state
// likewise, so an all-reduce or an update is one call over the whole model), and then
// runs forward, softmax cross-entropy and backward on the device.
//
// The CPU module stays the model of record: parameters move host <-> device on demand
// (CopyParametersToDevice after a pull from the parameter servers,
// CopyGradientsToHost before a push: one copy per parameter, from and into the CPU
// buffers page-locked in place, see host_registration.h), and Dropout layers keep
// their CPU call counter in step, so the GPU draws the masks a CPU run would.
//
// Gradients accumulate over TrainStep calls until ApplyOptimizer (which applies and
// clears them) or ZeroGrad, as the CPU Optimizer does. Training steps use training
// mode (dropout on); Predict/Evaluate use evaluation mode, whatever the module's flag.
//
//   PL_ASSIGN_OR_RETURN(auto gpu, GpuModel::Create(seq, /*device=*/0));
//   PL_ASSIGN_OR_RETURN(StepResult r, gpu->TrainStep(images, labels));  // (B,1,28,28), (B)
//   PL_RETURN_IF_ERROR(gpu->ApplyOptimizer(spec));  // or CopyGradientsToHost() and push
//
// Thread-safety: not thread-safe; one thread drives a GpuModel (and its CPU module
// must not be used by another thread meanwhile). One GpuModel per device for
// data-parallel training, averaged with NcclCommunicator.
#ifndef PADDLE_LIKE_CUDA_GPU_MODEL_H_
#define PADDLE_LIKE_CUDA_GPU_MODEL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/gpu_layer.h"
#include "cuda/host_registration.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/optim/update_rules.h"

namespace pl::cuda {

struct GpuModelOptions {
  int device = 0;
  // TF32 tensor cores for GEMMs and convolutions (see ContextOptions::allow_tf32).
  bool allow_tf32 = false;
  // Page-lock the CPU module's parameter and gradient buffers for the host <-> device
  // copies (host_registration.h). Off: they stay pageable (slower, no locked memory).
  bool pin_host_buffers = true;
};

// The loss a training step minimises over the model's output (B, K):
//   kSoftmaxCrossEntropy        int64 labels (B) in [0, K)
//   kSigmoidBinaryCrossEntropy  float32 labels (B) in [0, 1], K = 1 (a click model)
enum class GpuLoss { kSoftmaxCrossEntropy, kSigmoidBinaryCrossEntropy };

struct StepResult {
  float loss = 0.0f;     // mean softmax cross-entropy over the batch
  int64_t correct = 0;   // rows whose argmax is the label
  int64_t examples = 0;  // batch size
};

class GpuModel {
 public:
  // UNAVAILABLE without a GPU; UNIMPLEMENTED naming the first layer it cannot run
  // (e.g. an Embedding: sparse models train on the CPU path). `model` must outlive
  // the GpuModel and keep its layers.
  static StatusOr<std::unique_ptr<GpuModel>> Create(Sequential* model, const GpuModelOptions& options);
  static StatusOr<std::unique_ptr<GpuModel>> Create(Sequential* model, int device) {
    GpuModelOptions o;
    o.device = device;
    return Create(model, o);
  }
  ~GpuModel();

  // Forward (training mode), loss and backward for a batch; gradients are added to
  // the device gradient buffer.   x: float32 CPU (B, ...)   labels: int64 CPU (B).
  StatusOr<StepResult> TrainStep(const Tensor& x_host, const Tensor& labels_host);
  // The same from inputs already on this device (B, ...) (embeddings gathered there, see
  // embedding_ops.h), with `loss`; `dx` receives the gradient of the loss with respect to
  // x_device (same shape, on the device) for the layers below the model.
  StatusOr<StepResult> TrainStepFromDevice(const Tensor& x_device, const Tensor& labels_host, GpuLoss loss,
                                           Tensor* dx);
  // Loss and accuracy in evaluation mode, no gradients.
  StatusOr<StepResult> Evaluate(const Tensor& x_host, const Tensor& labels_host);
  // Logits (B, K) on the host, evaluation mode.
  StatusOr<Tensor> Predict(const Tensor& x_host);

  // Applies the accumulated gradients to the device parameters with `spec` and clears
  // them; a no-op when no gradient was accumulated since the last clear. Optimizer
  // state lives on the device and is (re)initialised when the optimizer kind changes.
  Status ApplyOptimizer(const OptimizerSpec& spec);
  Status ZeroGrad();

  // Device gradients -> each CPU parameter's grad (overwritten, not added).
  Status CopyGradientsToHost();
  // CPU parameter values -> device (e.g. after pulling from parameter servers).
  Status CopyParametersToDevice();
  // Device parameter values -> CPU parameters.
  Status CopyParametersToHost();
  // Bytes of the CPU module's buffers currently page-locked for these copies.
  size_t pinned_host_bytes() const { return pinned_.registered_bytes(); }

  int device() const { return ctx_->device(); }
  GpuContext& context() { return *ctx_; }
  // The contiguous device buffers: every parameter at a 256-byte aligned offset, the
  // gaps zero. Averaging `gradients()` across replicas averages every gradient.
  const Tensor& parameters() const { return params_; }
  const Tensor& gradients() const { return grads_; }
  // Marks the gradient buffer as holding a gradient (after an external write such as
  // an all-reduce into a replica that ran no step), so ApplyOptimizer uses it.
  void MarkGradientsPresent() { has_grad_ = true; }
  bool has_gradients() const { return has_grad_; }
  int64_t optimizer_steps() const { return opt_step_; }
  // One line per mirrored layer ("conv1: Conv2D ..."), for logs.
  std::string Describe() const;

 private:
  struct Node {
    std::string name;                 // the layer's name in the Sequential
    std::unique_ptr<GpuLayer> layer;  // its GPU twin
  };
  class Builder;  // GpuLayerBuilder over param_slots_

  explicit GpuModel(Sequential* model) : model_(model) {}
  Status BuildNodes();       // walks the layers; no device work
  Status AllocateBuffers();  // device buffers and the first parameter upload
  GpuLayerRun Run() { return GpuLayerRun{ctx_.get(), &param_slots_}; }
  // Runs the layers; acts[0] = input, acts[i + 1] = output of node i.
  Status Forward(const Tensor& x_host, bool training, std::vector<Tensor>* acts);
  Status ForwardFrom(const Tensor& x_device, bool training, std::vector<Tensor>* acts);
  // dx, when given, receives the gradient with respect to the input (acts[0]).
  Status Backward(const std::vector<Tensor>& acts, Tensor grad, Tensor* dx = nullptr);
  StatusOr<StepResult> Loss(const Tensor& logits, const Tensor& labels_host, const Tensor& grad,
                            GpuLoss loss = GpuLoss::kSoftmaxCrossEntropy);
  Status CheckBatch(const Tensor& x_host, const Tensor* labels_host) const;
  // The CPU buffer of slot i's value (grad = false) or gradient, page-locked if it can be.
  const Tensor& HostValue(size_t i);
  const Tensor& HostGrad(size_t i);

  Sequential* model_;
  std::unique_ptr<GpuContext> ctx_;
  std::vector<Node> nodes_;
  std::vector<GpuParam> param_slots_;
  int64_t total_ = 0;                  // floats in each buffer, gaps included
  Tensor params_, grads_, opt_state_;  // float32 (total_), state (NumSlots * total_)
  bool has_grad_ = false;
  bool opt_initialised_ = false;
  std::string opt_kind_;  // the registered name of the optimizer whose state opt_state_ holds
  int64_t opt_step_ = 0;
  // Declared last: destroyed first, before anything could free the CPU buffers it locks.
  HostRegistration pinned_;
  bool pin_host_buffers_ = true;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_GPU_MODEL_H_
