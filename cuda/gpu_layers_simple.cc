// The GPU layers without parameters: MaxPool2D, the activations, Dropout and the
// views (Flatten, Reshape). See gpu_layer.h.
#include <map>

#include "absl/strings/str_cat.h"
#include "cuda/activation_ops.h"
#include "cuda/allocator.h"
#include "cuda/dropout_ops.h"
#include "cuda/gpu_layer.h"
#include "cuda/pool_ops.h"
#include "paddle_like/nn/activations.h"
#include "paddle_like/nn/dropout.h"
#include "paddle_like/nn/pool2d.h"
#include "paddle_like/nn/shape_ops.h"

namespace pl::cuda {
namespace {

// x (N, C, H, W) -> y (N, C, H', W'); one plan per input shape.
class MaxPool2DGpuLayer : public GpuLayer {
 public:
  explicit MaxPool2DGpuLayer(const MaxPool2D& p) : describe_(p.Describe()), kernel_(p.kernel()), stride_(p.stride()) {}
  std::string Describe() const override { return describe_; }

  Status Forward(const GpuLayerRun& run, const Tensor& in, bool /*training*/, Tensor* out) override {
    PL_ASSIGN_OR_RETURN(const MaxPoolPlan* plan, PlanFor(in.shape()));
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor(plan->y_shape(), DType::kFloat32, run.device()));
    return plan->Forward(*run.ctx, in, *out);
  }

  Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& out, const Tensor& g, bool need_dx,
                  Tensor* dx) override {
    if (!need_dx) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(const MaxPoolPlan* plan, PlanFor(in.shape()));
    PL_ASSIGN_OR_RETURN(*dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return plan->Backward(*run.ctx, in, out, g, *dx);
  }

 private:
  StatusOr<const MaxPoolPlan*> PlanFor(const Shape& x) {
    auto it = plans_.find(x);
    if (it != plans_.end()) return it->second.get();
    PL_ASSIGN_OR_RETURN(std::unique_ptr<MaxPoolPlan> plan, MaxPoolPlan::Create(x, kernel_, stride_));
    const MaxPoolPlan* raw = plan.get();
    plans_.emplace(x, std::move(plan));
    return raw;
  }

  std::string describe_;
  int64_t kernel_, stride_;
  std::map<Shape, std::unique_ptr<MaxPoolPlan>> plans_;
};

// Elementwise: y = act(x), any shape.
class ActivationGpuLayer : public GpuLayer {
 public:
  ActivationGpuLayer(std::string describe, Activation act) : describe_(std::move(describe)), act_(act) {}
  std::string Describe() const override { return describe_; }

  Status Forward(const GpuLayerRun& run, const Tensor& in, bool /*training*/, Tensor* out) override {
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return ActivationForward(act_, in, *out, run.stream());
  }

  Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& out, const Tensor& g, bool need_dx,
                  Tensor* dx) override {
    if (!need_dx) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(*dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return ActivationBackward(act_, out, g, *dx, false, run.stream());
  }

 private:
  std::string describe_;
  Activation act_;
};

// Training: y = x * mask / (1 - p) with the mask the CPU layer would draw (its call
// counter is advanced in step); evaluation: y = x.
class DropoutGpuLayer : public GpuLayer {
 public:
  explicit DropoutGpuLayer(Dropout* d) : d_(d) {}
  std::string Describe() const override { return absl::StrCat("Dropout(p=", d_->p(), ")"); }

  Status Forward(const GpuLayerRun& run, const Tensor& in, bool training, Tensor* out) override {
    mask_active_ = training && d_->p() > 0.0f;
    if (!mask_active_) {
      *out = in;
      return absl::OkStatus();
    }
    PL_ASSIGN_OR_RETURN(mask_, MakeDropoutMask(d_->p(), d_->seed(), d_->calls()));
    d_->Reseed(d_->seed(), d_->calls() + 1);  // the CPU layer's counter stays in step
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return DropoutForward(mask_, in, *out, run.stream());
  }

  Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& /*out*/, const Tensor& g, bool need_dx,
                  Tensor* dx) override {
    if (!need_dx) return absl::OkStatus();
    if (!mask_active_) {
      *dx = g;
      return absl::OkStatus();
    }
    PL_ASSIGN_OR_RETURN(*dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return DropoutBackward(mask_, g, *dx, false, run.stream());
  }

 private:
  Dropout* d_;  // the CPU layer, which outlives the GpuModel
  DropoutMask mask_;  // of the current step
  bool mask_active_ = false;
};

// A view: Flatten (B, ...) -> (B, prod) or Reshape (B, ...) -> (B, shape...).
class ViewGpuLayer : public GpuLayer {
 public:
  ViewGpuLayer(std::string describe, bool flatten, Shape reshape)
      : describe_(std::move(describe)), flatten_(flatten), reshape_(std::move(reshape)) {}
  std::string Describe() const override { return describe_; }

  Status Forward(const GpuLayerRun& /*run*/, const Tensor& in, bool /*training*/, Tensor* out) override {
    const int64_t batch = in.dim(0);
    Shape target{batch};
    if (flatten_) {
      target.push_back(in.numel() / batch);
    } else {
      target.insert(target.end(), reshape_.begin(), reshape_.end());
    }
    auto view = in.Reshape(target);
    if (!view.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot view input ", in.ShapeString(), " as ",
                                                     ShapeToString(target)));
    }
    *out = *view;
    return absl::OkStatus();
  }

  Status Backward(const GpuLayerRun& /*run*/, const Tensor& in, const Tensor& /*out*/, const Tensor& g,
                  bool need_dx, Tensor* dx) override {
    if (!need_dx) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(*dx, g.Reshape(in.shape()));
    return absl::OkStatus();
  }

 private:
  std::string describe_;
  bool flatten_;
  Shape reshape_;
};

}  // namespace

StatusOr<std::unique_ptr<GpuLayer>> MakeMaxPool2DGpuLayer(Layer& layer, GpuLayerBuilder& /*builder*/) {
  auto* p = dynamic_cast<MaxPool2D*>(&layer);
  if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer.type_name(), " is not a MaxPool2D"));
  return std::unique_ptr<GpuLayer>(new MaxPool2DGpuLayer(*p));
}

template <Activation kAct>
StatusOr<std::unique_ptr<GpuLayer>> MakeActivationGpuLayer(Layer& layer, GpuLayerBuilder& /*builder*/) {
  return std::unique_ptr<GpuLayer>(new ActivationGpuLayer(layer.type_name(), kAct));
}
template StatusOr<std::unique_ptr<GpuLayer>> MakeActivationGpuLayer<Activation::kRelu>(Layer&, GpuLayerBuilder&);
template StatusOr<std::unique_ptr<GpuLayer>> MakeActivationGpuLayer<Activation::kSigmoid>(Layer&, GpuLayerBuilder&);
template StatusOr<std::unique_ptr<GpuLayer>> MakeActivationGpuLayer<Activation::kTanh>(Layer&, GpuLayerBuilder&);

StatusOr<std::unique_ptr<GpuLayer>> MakeDropoutGpuLayer(Layer& layer, GpuLayerBuilder& /*builder*/) {
  auto* d = dynamic_cast<Dropout*>(&layer);
  if (d == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer.type_name(), " is not a Dropout"));
  PL_RETURN_IF_ERROR(MakeDropoutMask(d->p(), 0, 0).status());  // checks p
  return std::unique_ptr<GpuLayer>(new DropoutGpuLayer(d));
}

StatusOr<std::unique_ptr<GpuLayer>> MakeFlattenGpuLayer(Layer& layer, GpuLayerBuilder& /*builder*/) {
  return std::unique_ptr<GpuLayer>(new ViewGpuLayer(layer.type_name(), /*flatten=*/true, {}));
}

StatusOr<std::unique_ptr<GpuLayer>> MakeReshapeGpuLayer(Layer& layer, GpuLayerBuilder& /*builder*/) {
  auto* r = dynamic_cast<Reshape*>(&layer);
  if (r == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer.type_name(), " is not a Reshape"));
  return std::unique_ptr<GpuLayer>(
      new ViewGpuLayer(absl::StrCat("Reshape(", ShapeToString(r->shape()), ")"), /*flatten=*/false, r->shape()));
}

}  // namespace pl::cuda
