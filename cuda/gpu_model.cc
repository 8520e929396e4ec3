#include "cuda/gpu_model.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cuda/activation_ops.h"
#include "cuda/allocator.h"
#include "cuda/linear_ops.h"
#include "cuda/loss_ops.h"
#include "cuda/optimizer_ops.h"
#include "cuda/status.h"
#include "paddle_like/nn/activations.h"
#include "paddle_like/nn/conv2d.h"
#include "paddle_like/nn/dropout.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/pool2d.h"
#include "paddle_like/nn/shape_ops.h"

namespace pl::cuda {
namespace {

constexpr int64_t kAlignFloats = 64;  // 256-byte aligned parameter views
constexpr const char* kSupported =
    "Linear, Conv2D, MaxPool2D, ReLU, Sigmoid, Tanh, Dropout, Flatten, Reshape";

}  // namespace

StatusOr<std::unique_ptr<GpuModel>> GpuModel::Create(Sequential* model, const GpuModelOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("GpuModel::Create: null model");
  std::unique_ptr<GpuModel> gpu(new GpuModel(model));
  // The layers are checked before any device is touched, so an unsupported model is
  // reported as such on any machine.
  PL_RETURN_IF_ERROR(gpu->BuildNodes());
  ContextOptions copts;
  copts.allow_tf32 = options.allow_tf32;
  PL_ASSIGN_OR_RETURN(gpu->ctx_, GpuContext::Create(options.device, copts));
  PL_RETURN_IF_ERROR(gpu->AllocateBuffers());
  return gpu;
}

GpuModel::~GpuModel() {
  // Queued work may still use the buffers; let it finish before they are recycled.
  if (ctx_) (void)ctx_->Synchronize();
}

int GpuModel::AddParam(const std::string& name, const Variable& var, int64_t* total) {
  Param p;
  p.name = name;
  p.host = var;
  p.offset = *total;
  *total += (var.value().numel() + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  param_slots_.push_back(std::move(p));
  return static_cast<int>(param_slots_.size()) - 1;
}

Status GpuModel::BuildNodes() {
  // Parameter names by their Variable, for messages and the host copies.
  std::map<const VariableNode*, std::string> names;
  for (const NamedParameter& np : model_->NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) names[np.param->var.node()] = np.name;
  }
  auto name_of = [&](const Variable& v) {
    auto it = names.find(v.node());
    return it == names.end() ? std::string("?") : it->second;
  };
  const auto& children = model_->children();
  int64_t total = 0;
  for (size_t i = 0; i < model_->size(); ++i) {
    Layer* layer = model_->layer(i).get();
    Node node;
    node.name = i < children.size() ? children[i].first : std::to_string(i);
    node.describe = layer->type_name();
    if (auto* l = dynamic_cast<Linear*>(layer)) {
      node.kind = Kind::kLinear;
      node.describe = absl::StrFormat("Linear(%d -> %d)", l->in_features(), l->out_features());
      node.w = AddParam(name_of(l->weight()), l->weight(), &total);
      if (l->bias().defined()) node.b = AddParam(name_of(l->bias()), l->bias(), &total);
    } else if (auto* c = dynamic_cast<Conv2D*>(layer)) {
      node.kind = Kind::kConv;
      node.describe = c->Describe();
      if (c->kernel_h() < 1 || c->kernel_w() < 1 || c->stride() < 1 || c->padding() < 0 ||
          c->in_channels() < 1 || c->out_channels() < 1) {
        return absl::InvalidArgumentError(absl::StrCat("GpuModel: layer '", node.name, "' ", c->Describe(),
                                                       ": sizes must be positive and padding >= 0"));
      }
      node.kh = c->kernel_h();
      node.kw = c->kernel_w();
      node.stride = c->stride();
      node.pad = c->padding();
      node.out_channels = c->out_channels();
      node.w = AddParam(name_of(c->weight()), c->weight(), &total);
      if (c->bias().defined()) node.b = AddParam(name_of(c->bias()), c->bias(), &total);
    } else if (auto* p = dynamic_cast<MaxPool2D*>(layer)) {
      node.kind = Kind::kPool;
      node.describe = p->Describe();
      node.pool_kernel = p->kernel();
      node.pool_stride = p->stride();
    } else if (dynamic_cast<ReLU*>(layer) != nullptr) {
      node.kind = Kind::kActivation;
      node.act = Activation::kRelu;
    } else if (dynamic_cast<Sigmoid*>(layer) != nullptr) {
      node.kind = Kind::kActivation;
      node.act = Activation::kSigmoid;
    } else if (dynamic_cast<Tanh*>(layer) != nullptr) {
      node.kind = Kind::kActivation;
      node.act = Activation::kTanh;
    } else if (auto* d = dynamic_cast<Dropout*>(layer)) {
      node.kind = Kind::kDropout;
      node.dropout = d;
      node.describe = absl::StrCat("Dropout(p=", d->p(), ")");
      PL_RETURN_IF_ERROR(Annotate(MakeDropoutMask(d->p(), 0, 0).status(),
                                  absl::StrCat("GpuModel: layer '", node.name, "'")));
    } else if (dynamic_cast<Flatten*>(layer) != nullptr) {
      node.kind = Kind::kView;
      node.flatten = true;
    } else if (auto* r = dynamic_cast<Reshape*>(layer)) {
      node.kind = Kind::kView;
      node.reshape = r->shape();
      node.describe = absl::StrCat("Reshape(", ShapeToString(r->shape()), ")");
    } else {
      return absl::UnimplementedError(absl::StrCat("GpuModel: layer '", node.name, "' (", layer->type_name(),
                                                   ") cannot run on the GPU (supported: ", kSupported, ")"));
    }
    nodes_.push_back(std::move(node));
  }
  total_ = total;
  return absl::OkStatus();
}

Status GpuModel::AllocateBuffers() {
  const int64_t total = total_;
  const int dev = ctx_->device();
  PL_ASSIGN_OR_RETURN(params_, AllocateDeviceTensor({total}, DType::kFloat32, dev));
  PL_ASSIGN_OR_RETURN(grads_, DeviceZeros({total}, DType::kFloat32, dev, ctx_->stream()));
  if (total > 0) {
    // The gaps between parameters stay zero, so whole-buffer updates leave them alone.
    PL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(params_.raw_data(), 0, params_.bytes(), ctx_->stream()));
  }
  for (Param& p : param_slots_) {
    const Shape& shape = p.host.value().shape();
    p.value = Tensor::FromStorage(params_.storage(), shape, DType::kFloat32, p.offset * sizeof(float));
    p.grad = Tensor::FromStorage(grads_.storage(), shape, DType::kFloat32, p.offset * sizeof(float));
  }
  return CopyParametersToDevice();
}

std::string GpuModel::Describe() const {
  std::vector<std::string> lines;
  for (const Node& n : nodes_) lines.push_back(absl::StrCat(n.name, ": ", n.describe));
  return absl::StrJoin(lines, "\n");
}

StatusOr<const ConvPlan*> GpuModel::ConvPlanFor(Node& node, const Shape& x) {
  auto it = node.conv_plans.find(x);
  if (it != node.conv_plans.end()) return it->second.get();
  if (x.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("expects an input of shape [N, C, H, W], got ", ShapeToString(x)));
  }
  ConvShape s;
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.o = node.out_channels;
  s.kh = node.kh;
  s.kw = node.kw;
  s.stride = node.stride;
  s.pad = node.pad;
  const Shape& w = param_slots_[node.w].value.shape();
  if (w != s.w_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", ShapeToString(x), " needs weights ",
                                                   ShapeToString(s.w_shape()), ", the layer has ", ShapeToString(w)));
  }
  PL_ASSIGN_OR_RETURN(std::unique_ptr<ConvPlan> plan, ConvPlan::Create(*ctx_, s));
  const ConvPlan* raw = plan.get();
  node.conv_plans.emplace(x, std::move(plan));
  return raw;
}

StatusOr<const MaxPoolPlan*> GpuModel::PoolPlanFor(Node& node, const Shape& x) {
  auto it = node.pool_plans.find(x);
  if (it != node.pool_plans.end()) return it->second.get();
  PL_ASSIGN_OR_RETURN(std::unique_ptr<MaxPoolPlan> plan, MaxPoolPlan::Create(x, node.pool_kernel, node.pool_stride));
  const MaxPoolPlan* raw = plan.get();
  node.pool_plans.emplace(x, std::move(plan));
  return raw;
}

Status GpuModel::CheckBatch(const Tensor& x, const Tensor* labels) const {
  if (!x.defined() || x.dtype() != DType::kFloat32 || x.device() != Device::kCPU || x.rank() < 1 ||
      x.dim(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuModel: inputs must be a float32 CPU tensor (B, ...) with B >= 1, got ",
        x.defined() ? absl::StrCat(DTypeName(x.dtype()), x.device() == Device::kCPU ? " CPU " : " CUDA ",
                                   x.ShapeString())
                    : std::string("an undefined tensor")));
  }
  if (labels != nullptr) {
    const Tensor& l = *labels;
    if (!l.defined() || l.dtype() != DType::kInt64 || l.device() != Device::kCPU || l.shape() != Shape{x.dim(0)}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GpuModel: labels must be an int64 CPU tensor of shape [", x.dim(0), "], got ",
          l.defined() ? absl::StrCat(DTypeName(l.dtype()), " ", l.ShapeString()) : std::string("an undefined tensor")));
    }
  }
  return absl::OkStatus();
}

Status GpuModel::Forward(const Tensor& x_host, bool training, std::vector<Tensor>* acts) {
  const int dev = ctx_->device();
  cudaStream_t stream = ctx_->stream();
  acts->clear();
  acts->reserve(nodes_.size() + 1);
  PL_ASSIGN_OR_RETURN(Tensor x, AllocateDeviceTensor(x_host.shape(), DType::kFloat32, dev));
  PL_RETURN_IF_ERROR(CopyToDevice(x_host, x, stream));
  acts->push_back(x);
  const int64_t batch = x_host.dim(0);
  for (Node& node : nodes_) {
    const Tensor in = acts->back();
    Tensor out;
    auto run = [&]() -> Status {
      switch (node.kind) {
        case Kind::kLinear: {
          const Tensor& w = param_slots_[node.w].value;
          if (in.rank() != 2 || in.dim(1) != w.dim(0)) {
            return absl::InvalidArgumentError(absl::StrCat("expects input [batch, ", w.dim(0), "], got ",
                                                           in.ShapeString()));
          }
          PL_ASSIGN_OR_RETURN(out, AllocateDeviceTensor({batch, w.dim(1)}, DType::kFloat32, dev));
          return LinearForward(*ctx_, in, w, node.b >= 0 ? param_slots_[node.b].value : Tensor(), out);
        }
        case Kind::kConv: {
          PL_ASSIGN_OR_RETURN(const ConvPlan* plan, ConvPlanFor(node, in.shape()));
          PL_ASSIGN_OR_RETURN(out, AllocateDeviceTensor(plan->shape().y_shape(), DType::kFloat32, dev));
          return plan->Forward(*ctx_, in, param_slots_[node.w].value,
                               node.b >= 0 ? param_slots_[node.b].value : Tensor(), out);
        }
        case Kind::kPool: {
          PL_ASSIGN_OR_RETURN(const MaxPoolPlan* plan, PoolPlanFor(node, in.shape()));
          PL_ASSIGN_OR_RETURN(out, AllocateDeviceTensor(plan->y_shape(), DType::kFloat32, dev));
          return plan->Forward(*ctx_, in, out);
        }
        case Kind::kActivation: {
          PL_ASSIGN_OR_RETURN(out, AllocateDeviceTensor(in.shape(), DType::kFloat32, dev));
          return ActivationForward(node.act, in, out, stream);
        }
        case Kind::kDropout: {
          Dropout* d = node.dropout;
          node.mask_active = training && d->p() > 0.0f;
          if (!node.mask_active) {
            out = in;
            return absl::OkStatus();
          }
          PL_ASSIGN_OR_RETURN(node.mask, MakeDropoutMask(d->p(), d->seed(), d->calls()));
          d->Reseed(d->seed(), d->calls() + 1);  // the CPU layer's counter stays in step
          PL_ASSIGN_OR_RETURN(out, AllocateDeviceTensor(in.shape(), DType::kFloat32, dev));
          return DropoutForward(node.mask, in, out, stream);
        }
        case Kind::kView: {
          Shape target{batch};
          if (node.flatten) {
            target.push_back(in.numel() / batch);
          } else {
            target.insert(target.end(), node.reshape.begin(), node.reshape.end());
          }
          auto view = in.Reshape(target);
          if (!view.ok()) {
            return absl::InvalidArgumentError(absl::StrCat("cannot view input ", in.ShapeString(), " as ",
                                                           ShapeToString(target)));
          }
          out = *view;
          return absl::OkStatus();
        }
      }
      return absl::InternalError("unknown node kind");
    };
    PL_RETURN_IF_ERROR(Annotate(run(), absl::StrCat("GpuModel forward, layer '", node.name, "' (", node.describe, ")")));
    acts->push_back(out);
  }
  return absl::OkStatus();
}

Status GpuModel::Backward(const std::vector<Tensor>& acts, Tensor g) {
  const int dev = ctx_->device();
  cudaStream_t stream = ctx_->stream();
  // Below the first layer with parameters no gradient is needed.
  int first = static_cast<int>(nodes_.size());
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (nodes_[i].w >= 0) {
      first = i;
      break;
    }
  }
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= first; --i) {
    Node& node = nodes_[i];
    const Tensor& in = acts[i];
    const Tensor& out = acts[i + 1];
    const bool need_dx = i > first;
    Tensor dx;
    auto run = [&]() -> Status {
      auto alloc_dx = [&]() -> Status {
        PL_ASSIGN_OR_RETURN(dx, AllocateDeviceTensor(in.shape(), DType::kFloat32, dev));
        return absl::OkStatus();
      };
      switch (node.kind) {
        case Kind::kLinear:
          if (need_dx) PL_RETURN_IF_ERROR(alloc_dx());
          return LinearBackward(*ctx_, in, param_slots_[node.w].value, g, dx, param_slots_[node.w].grad,
                                node.b >= 0 ? param_slots_[node.b].grad : Tensor(), /*accumulate_params=*/true);
        case Kind::kConv: {
          PL_ASSIGN_OR_RETURN(const ConvPlan* plan, ConvPlanFor(node, in.shape()));
          PL_RETURN_IF_ERROR(plan->BackwardFilter(*ctx_, in, g, param_slots_[node.w].grad, true));
          if (node.b >= 0) PL_RETURN_IF_ERROR(plan->BackwardBias(*ctx_, g, param_slots_[node.b].grad, true));
          if (!need_dx) return absl::OkStatus();
          PL_RETURN_IF_ERROR(alloc_dx());
          return plan->BackwardData(*ctx_, param_slots_[node.w].value, g, dx);
        }
        case Kind::kPool: {
          if (!need_dx) return absl::OkStatus();
          PL_ASSIGN_OR_RETURN(const MaxPoolPlan* plan, PoolPlanFor(node, in.shape()));
          PL_RETURN_IF_ERROR(alloc_dx());
          return plan->Backward(*ctx_, in, out, g, dx);
        }
        case Kind::kActivation:
          if (!need_dx) return absl::OkStatus();
          PL_RETURN_IF_ERROR(alloc_dx());
          return ActivationBackward(node.act, out, g, dx, false, stream);
        case Kind::kDropout:
          if (!need_dx) return absl::OkStatus();
          if (!node.mask_active) {
            dx = g;
            return absl::OkStatus();
          }
          PL_RETURN_IF_ERROR(alloc_dx());
          return DropoutBackward(node.mask, g, dx, false, stream);
        case Kind::kView: {
          if (!need_dx) return absl::OkStatus();
          PL_ASSIGN_OR_RETURN(dx, g.Reshape(in.shape()));
          return absl::OkStatus();
        }
      }
      return absl::InternalError("unknown node kind");
    };
    PL_RETURN_IF_ERROR(Annotate(run(), absl::StrCat("GpuModel backward, layer '", node.name, "' (", node.describe, ")")));
    g = dx;
  }
  return absl::OkStatus();
}

StatusOr<StepResult> GpuModel::Loss(const Tensor& logits, const Tensor& labels_host, const Tensor& grad) {
  if (logits.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("GpuModel: the model's output must be logits (B, K), got ",
                                                   logits.ShapeString()));
  }
  const int64_t classes = logits.dim(1);
  const int64_t* l = labels_host.i64();
  for (int64_t i = 0; i < labels_host.numel(); ++i) {
    if (l[i] < 0 || l[i] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("GpuModel: label ", l[i], " at row ", i, " is outside [0, ",
                                                      classes, ")"));
    }
  }
  PL_ASSIGN_OR_RETURN(Tensor labels, AllocateDeviceTensor(labels_host.shape(), DType::kInt64, ctx_->device()));
  PL_RETURN_IF_ERROR(CopyToDevice(labels_host, labels, ctx_->stream()));
  PL_ASSIGN_OR_RETURN(LossResult r, SoftmaxCrossEntropy(logits, labels, grad, ctx_->stream()));
  return StepResult{r.loss, r.correct, logits.dim(0)};
}

StatusOr<StepResult> GpuModel::TrainStep(const Tensor& x_host, const Tensor& labels_host) {
  PL_RETURN_IF_ERROR(CheckBatch(x_host, &labels_host));
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  std::vector<Tensor> acts;
  PL_RETURN_IF_ERROR(Forward(x_host, /*training=*/true, &acts));
  const Tensor& logits = acts.back();
  PL_ASSIGN_OR_RETURN(Tensor grad, AllocateDeviceTensor(logits.shape(), DType::kFloat32, device()));
  PL_ASSIGN_OR_RETURN(StepResult result, Loss(logits, labels_host, grad));
  PL_RETURN_IF_ERROR(Backward(acts, grad));
  has_grad_ = true;
  // The activations are released here and their blocks reused by the next step,
  // which is queued on the same stream (see allocator.h).
  return result;
}

StatusOr<StepResult> GpuModel::Evaluate(const Tensor& x_host, const Tensor& labels_host) {
  PL_RETURN_IF_ERROR(CheckBatch(x_host, &labels_host));
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  std::vector<Tensor> acts;
  PL_RETURN_IF_ERROR(Forward(x_host, /*training=*/false, &acts));
  return Loss(acts.back(), labels_host, Tensor());
}

StatusOr<Tensor> GpuModel::Predict(const Tensor& x_host) {
  PL_RETURN_IF_ERROR(CheckBatch(x_host, nullptr));
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  std::vector<Tensor> acts;
  PL_RETURN_IF_ERROR(Forward(x_host, /*training=*/false, &acts));
  return ToHost(acts.back(), ctx_->stream());
}

Status GpuModel::ApplyOptimizer(const OptimizerSpec& spec) {
  PL_RETURN_IF_ERROR(ValidateOptimizerSpec(spec));
  if (!has_grad_) return absl::OkStatus();
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  if (!opt_initialised_ || opt_kind_ != spec.kind) {
    PL_ASSIGN_OR_RETURN(opt_state_, InitSlotsOnDevice(spec, params_.numel(), device(), ctx_->stream()));
    opt_kind_ = spec.kind;
    opt_step_ = 0;
    opt_initialised_ = true;
  }
  // One launch over the whole buffer: every dense parameter has had the same number
  // of updates, so one step count serves them all.
  PL_RETURN_IF_ERROR(ApplyUpdateOnDevice(spec, params_, grads_, opt_state_, opt_step_ + 1, ctx_->stream()));
  ++opt_step_;
  return ZeroGrad();
}

Status GpuModel::ZeroGrad() {
  has_grad_ = false;
  if (grads_.bytes() == 0) return absl::OkStatus();
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  return FromCuda(cudaMemsetAsync(grads_.raw_data(), 0, grads_.bytes(), ctx_->stream()), "GpuModel::ZeroGrad");
}

Status GpuModel::CopyGradientsToHost() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (Param& p : param_slots_) {
    PL_RETURN_IF_ERROR(Annotate(CopyToHost(p.grad, p.host.MutableGrad(), ctx_->stream()), p.name));
  }
  return ctx_->Synchronize();
}

Status GpuModel::CopyParametersToDevice() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (Param& p : param_slots_) {
    PL_RETURN_IF_ERROR(Annotate(CopyToDevice(p.host.value(), p.value, ctx_->stream()), p.name));
  }
  return ctx_->Synchronize();
}

Status GpuModel::CopyParametersToHost() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (Param& p : param_slots_) {
    PL_RETURN_IF_ERROR(Annotate(CopyToHost(p.value, p.host.value(), ctx_->stream()), p.name));
  }
  return ctx_->Synchronize();
}

}  // namespace pl::cuda
