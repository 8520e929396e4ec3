// The GPU layers with parameters: Linear (cuBLAS GEMMs) and Conv2D (cuDNN, one plan per
// input shape). See gpu_layer.h.
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cuda/allocator.h"
#include "cuda/conv_ops.h"
#include "cuda/gpu_layer.h"
#include "cuda/linear_ops.h"
#include "paddle_like/nn/conv2d.h"
#include "paddle_like/nn/linear.h"

namespace pl::cuda {
namespace {

// x (B, in) -> y (B, out); w (in, out), b (out) optional.
class LinearGpuLayer : public GpuLayer {
 public:
  LinearGpuLayer(std::string describe, int w, int b) : describe_(std::move(describe)), w_(w), b_(b) {}
  std::string Describe() const override { return describe_; }
  bool has_params() const override { return true; }

  Status Forward(const GpuLayerRun& run, const Tensor& in, bool /*training*/, Tensor* out) override {
    const Tensor& w = run.value(w_);
    if (in.rank() != 2 || in.dim(1) != w.dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat("expects input [batch, ", w.dim(0), "], got ", in.ShapeString()));
    }
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor({in.dim(0), w.dim(1)}, DType::kFloat32, run.device()));
    return LinearForward(*run.ctx, in, w, b_ >= 0 ? run.value(b_) : Tensor(), *out);
  }

  Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& /*out*/, const Tensor& g, bool need_dx,
                  Tensor* dx) override {
    if (need_dx) {
      PL_ASSIGN_OR_RETURN(*dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    }
    return LinearBackward(*run.ctx, in, run.value(w_), g, need_dx ? *dx : Tensor(), run.grad(w_),
                          b_ >= 0 ? run.grad(b_) : Tensor(), /*accumulate_params=*/true);
  }

 private:
  std::string describe_;
  int w_, b_;  // parameter slots (b_ -1: no bias)
};

// x (N, C, H, W) -> y (N, O, H', W'); w (O, C, KH, KW), b (O) optional.
class Conv2DGpuLayer : public GpuLayer {
 public:
  Conv2DGpuLayer(const Conv2D& c, int w, int b) : describe_(c.Describe()), w_(w), b_(b) {
    base_.o = c.out_channels();
    base_.kh = c.kernel_h();
    base_.kw = c.kernel_w();
    base_.stride = c.stride();
    base_.pad = c.padding();
  }
  std::string Describe() const override { return describe_; }
  bool has_params() const override { return true; }

  Status Forward(const GpuLayerRun& run, const Tensor& in, bool /*training*/, Tensor* out) override {
    PL_ASSIGN_OR_RETURN(const ConvPlan* plan, PlanFor(run, in.shape()));
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor(plan->shape().y_shape(), DType::kFloat32, run.device()));
    return plan->Forward(*run.ctx, in, run.value(w_), b_ >= 0 ? run.value(b_) : Tensor(), *out);
  }

  Status Backward(const GpuLayerRun& run, const Tensor& in, const Tensor& /*out*/, const Tensor& g, bool need_dx,
                  Tensor* dx) override {
    PL_ASSIGN_OR_RETURN(const ConvPlan* plan, PlanFor(run, in.shape()));
    PL_RETURN_IF_ERROR(plan->BackwardFilter(*run.ctx, in, g, run.grad(w_), true));
    if (b_ >= 0) PL_RETURN_IF_ERROR(plan->BackwardBias(*run.ctx, g, run.grad(b_), true));
    if (!need_dx) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(*dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, run.device()));
    return plan->BackwardData(*run.ctx, run.value(w_), g, *dx);
  }

 private:
  StatusOr<const ConvPlan*> PlanFor(const GpuLayerRun& run, const Shape& x) {
    auto it = plans_.find(x);
    if (it != plans_.end()) return it->second.get();
    if (x.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat("expects an input of shape [N, C, H, W], got ", ShapeToString(x)));
    }
    ConvShape s = base_;
    s.n = x[0];
    s.c = x[1];
    s.h = x[2];
    s.w = x[3];
    const Shape& w = run.value(w_).shape();
    if (w != s.w_shape()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", ShapeToString(x), " needs weights ",
                                                     ShapeToString(s.w_shape()), ", the layer has ", ShapeToString(w)));
    }
    PL_ASSIGN_OR_RETURN(std::unique_ptr<ConvPlan> plan, ConvPlan::Create(*run.ctx, s));
    const ConvPlan* raw = plan.get();
    plans_.emplace(x, std::move(plan));
    return raw;
  }

  std::string describe_;
  int w_, b_;
  ConvShape base_;  // filter sizes; the input sizes come per shape
  std::map<Shape, std::unique_ptr<ConvPlan>> plans_;  // by input shape
};

}  // namespace

StatusOr<std::unique_ptr<GpuLayer>> MakeLinearGpuLayer(Layer& layer, GpuLayerBuilder& builder) {
  auto* l = dynamic_cast<Linear*>(&layer);
  if (l == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer.type_name(), " is not a Linear"));
  const int w = builder.AddParam(l->weight());
  const int b = l->bias().defined() ? builder.AddParam(l->bias()) : -1;
  return std::unique_ptr<GpuLayer>(
      new LinearGpuLayer(absl::StrFormat("Linear(%d -> %d)", l->in_features(), l->out_features()), w, b));
}

StatusOr<std::unique_ptr<GpuLayer>> MakeConv2DGpuLayer(Layer& layer, GpuLayerBuilder& builder) {
  auto* c = dynamic_cast<Conv2D*>(&layer);
  if (c == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer.type_name(), " is not a Conv2D"));
  if (c->kernel_h() < 1 || c->kernel_w() < 1 || c->stride() < 1 || c->padding() < 0 || c->in_channels() < 1 ||
      c->out_channels() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(c->Describe(), ": sizes must be positive and padding >= 0"));
  }
  const int w = builder.AddParam(c->weight());
  const int b = c->bias().defined() ? builder.AddParam(c->bias()) : -1;
  return std::unique_ptr<GpuLayer>(new Conv2DGpuLayer(*c, w, b));
}

}  // namespace pl::cuda
