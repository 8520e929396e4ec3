// GPU layers: the device twin of a CPU layer (pl::Layer), found by the layer's type
// name ("Linear", "Conv2D", ...) in a registry of factories, so GpuModel runs any layer
// that registers one and a new layer brings its own GPU hook instead of a branch in
// the model runner. A layer type without one cannot run on the GPU; GpuModel names the
// types that can.
//
// A GpuLayer is built once per GpuModel from its CPU layer (no device work then: the
// model is checked before a device is touched), adds the layer's dense parameters to
// the model's contiguous buffers through the GpuLayerBuilder, and then runs forward
// and backward on the model's stream, reading its parameters and adding to their
// gradients through GpuLayerRun.
//
//   Status RegisterGpuLayer("Linear", MakeLinearGpuLayer);  // once, before use
//
// Thread-safety: a GpuLayer is driven by its GpuModel's one thread. The built-in
// factories are registered on first use (thread-safe); further RegisterGpuLayer calls
// must finish before other threads build GpuModels.
#ifndef PADDLE_LIKE_CUDA_GPU_LAYER_H_
#define PADDLE_LIKE_CUDA_GPU_LAYER_H_

#include <memory>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/kernels.h"
#include "paddle_like/core/tensor.h"
#include "paddle_like/core/variable.h"
#include "paddle_like/nn/module.h"

namespace pl::cuda {

// One dense parameter in GpuModel's buffers.
struct GpuParam {
  std::string name;  // the CPU module's parameter name
  Variable host;     // the CPU parameter (value + grad)
  int64_t offset;    // in floats, into the device buffers
  Tensor value;      // device view into the parameter buffer (set once allocated)
  Tensor grad;       // device view into the gradient buffer
};

// What a layer's factory may do to the model being built.
class GpuLayerBuilder {
 public:
  virtual ~GpuLayerBuilder() = default;
  // Adds a parameter of the layer to the model's buffers; its slot for GpuLayerRun.
  virtual int AddParam(const Variable& var) = 0;
};

// What a layer sees while it runs.
struct GpuLayerRun {
  GpuContext* ctx;
  const std::vector<GpuParam>* params;

  int device() const { return ctx->device(); }
  cudaStream_t stream() const { return ctx->stream(); }
  const Tensor& value(int slot) const { return (*params)[slot].value; }
  const Tensor& grad(int slot) const { return (*params)[slot].grad; }
};

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  // "Linear(784 -> 128)", for GpuModel::Describe and messages.
  virtual std::string Describe() const = 0;
  // Whether it has parameters: backward stops below the first layer that has.
  virtual bool has_params() const { return false; }
  // in: float32 device (B, ...). Sets *out to a new tensor or a view of `in`.
  virtual Status Forward(const GpuLayerRun& run, const Tensor& in, bool training, Tensor* out) = 0;
  // g = dLoss/d(out). Adds the parameters' gradients; when need_dx, sets *dx = dLoss/d(in).
  virtual Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& out, const Tensor& g,
                          bool need_dx, Tensor* dx) = 0;
};

// Builds the GPU twin of `layer` (whose type_name() it was registered under);
// INVALID_ARGUMENT for a layer it cannot mirror (bad sizes).
using GpuLayerFactory = StatusOr<std::unique_ptr<GpuLayer>> (*)(Layer& layer, GpuLayerBuilder& builder);

// INVALID_ARGUMENT for an empty name or a null factory; ALREADY_EXISTS for a type
// registered before.
Status RegisterGpuLayer(const std::string& type_name, GpuLayerFactory factory);
// UNIMPLEMENTED naming the supported types when `type_name` has no GPU layer.
StatusOr<GpuLayerFactory> FindGpuLayer(const std::string& type_name);
// The types with a GPU layer, in registration order (built-ins first).
std::vector<std::string> GpuLayerTypes();
// Registers Linear, Conv2D, MaxPool2D, ReLU, Sigmoid, Tanh, Dropout, Flatten and
// Reshape (once; later calls do nothing). The functions above call it first.
void RegisterBuiltinGpuLayers();

// The built-in factories (gpu_layers_params.cc, gpu_layers_simple.cc).
StatusOr<std::unique_ptr<GpuLayer>> MakeLinearGpuLayer(Layer& layer, GpuLayerBuilder& builder);
StatusOr<std::unique_ptr<GpuLayer>> MakeConv2DGpuLayer(Layer& layer, GpuLayerBuilder& builder);
StatusOr<std::unique_ptr<GpuLayer>> MakeMaxPool2DGpuLayer(Layer& layer, GpuLayerBuilder& builder);
template <kernels::Activation kAct>  // ReLU, Sigmoid, Tanh
StatusOr<std::unique_ptr<GpuLayer>> MakeActivationGpuLayer(Layer& layer, GpuLayerBuilder& builder);
StatusOr<std::unique_ptr<GpuLayer>> MakeDropoutGpuLayer(Layer& layer, GpuLayerBuilder& builder);
StatusOr<std::unique_ptr<GpuLayer>> MakeFlattenGpuLayer(Layer& layer, GpuLayerBuilder& builder);
StatusOr<std::unique_ptr<GpuLayer>> MakeReshapeGpuLayer(Layer& layer, GpuLayerBuilder& builder);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_GPU_LAYER_H_
