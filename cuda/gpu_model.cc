#include "cuda/gpu_model.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cuda/allocator.h"
#include "cuda/loss_ops.h"
#include "cuda/optimizer_ops.h"
#include "cuda/status.h"

namespace pl::cuda {
namespace {

constexpr int64_t kAlignFloats = 64;  // 256-byte aligned parameter views

}  // namespace

StatusOr<std::unique_ptr<GpuModel>> GpuModel::Create(Sequential* model, const GpuModelOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("GpuModel::Create: null model");
  std::unique_ptr<GpuModel> gpu(new GpuModel(model));
  gpu->pin_host_buffers_ = options.pin_host_buffers;
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

// Adds parameters to param_slots_ at aligned offsets, named as the CPU module names them.
class GpuModel::Builder : public GpuLayerBuilder {
 public:
  explicit Builder(GpuModel* model) : model_(model) {
    for (const NamedParameter& np : model->model_->NamedParameters()) {
      if (np.param->kind == ParamKind::kDense) names_[np.param->var.node()] = np.name;
    }
  }
  int AddParam(const Variable& var) override {
    GpuParam p;
    auto it = names_.find(var.node());
    p.name = it == names_.end() ? std::string("?") : it->second;
    p.host = var;
    p.offset = model_->total_;
    model_->total_ += (var.value().numel() + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    model_->param_slots_.push_back(std::move(p));
    return static_cast<int>(model_->param_slots_.size()) - 1;
  }

 private:
  GpuModel* model_;
  std::map<const VariableNode*, std::string> names_;
};

Status GpuModel::BuildNodes() {
  Builder builder(this);
  const auto& children = model_->children();
  total_ = 0;
  for (size_t i = 0; i < model_->size(); ++i) {
    Layer* layer = model_->layer(i).get();
    Node node;
    node.name = i < children.size() ? children[i].first : std::to_string(i);
    const std::string where = absl::StrCat("GpuModel: layer '", node.name, "' (", layer->type_name(), ")");
    auto factory = FindGpuLayer(layer->type_name());
    if (!factory.ok()) {
      return absl::UnimplementedError(absl::StrCat(where, " cannot run on the GPU (supported: ",
                                                   absl::StrJoin(GpuLayerTypes(), ", "), ")"));
    }
    auto made = (*factory)(*layer, builder);
    if (!made.ok()) return Annotate(made.status(), where);
    node.layer = std::move(*made);
    nodes_.push_back(std::move(node));
  }
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
  for (GpuParam& p : param_slots_) {
    const Shape& shape = p.host.value().shape();
    p.value = Tensor::FromStorage(params_.storage(), shape, DType::kFloat32, p.offset * sizeof(float));
    p.grad = Tensor::FromStorage(grads_.storage(), shape, DType::kFloat32, p.offset * sizeof(float));
  }
  return CopyParametersToDevice();
}

std::string GpuModel::Describe() const {
  std::vector<std::string> lines;
  for (const Node& n : nodes_) lines.push_back(absl::StrCat(n.name, ": ", n.layer->Describe()));
  return absl::StrJoin(lines, "\n");
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
  PL_ASSIGN_OR_RETURN(Tensor x, AllocateDeviceTensor(x_host.shape(), DType::kFloat32, ctx_->device()));
  PL_RETURN_IF_ERROR(CopyToDevice(x_host, x, ctx_->stream()));
  return ForwardFrom(x, training, acts);
}

Status GpuModel::ForwardFrom(const Tensor& x, bool training, std::vector<Tensor>* acts) {
  acts->clear();
  acts->reserve(nodes_.size() + 1);
  acts->push_back(x);
  const GpuLayerRun run = Run();
  for (Node& node : nodes_) {
    const Tensor in = acts->back();
    Tensor out;
    PL_RETURN_IF_ERROR(Annotate(node.layer->Forward(run, in, training, &out),
                                absl::StrCat("GpuModel forward, layer '", node.name, "' (", node.layer->Describe(), ")")));
    acts->push_back(out);
  }
  return absl::OkStatus();
}

Status GpuModel::Backward(const std::vector<Tensor>& acts, Tensor g, Tensor* input_grad) {
  // Below the first layer with parameters no gradient is needed, unless the caller
  // wants the input's.
  int first = input_grad != nullptr ? 0 : static_cast<int>(nodes_.size());
  for (int i = 0; i < static_cast<int>(nodes_.size()) && input_grad == nullptr; ++i) {
    if (nodes_[i].layer->has_params()) {
      first = i;
      break;
    }
  }
  const GpuLayerRun run = Run();
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= first; --i) {
    Node& node = nodes_[i];
    Tensor dx;
    const bool need_dx = i > first || input_grad != nullptr;
    PL_RETURN_IF_ERROR(Annotate(node.layer->Backward(run, acts[i], acts[i + 1], g, need_dx, &dx),
                                absl::StrCat("GpuModel backward, layer '", node.name, "' (", node.layer->Describe(), ")")));
    g = dx;
  }
  if (input_grad != nullptr) *input_grad = g;
  return absl::OkStatus();
}

StatusOr<StepResult> GpuModel::Loss(const Tensor& logits, const Tensor& labels_host, const Tensor& grad,
                                    GpuLoss loss) {
  if (logits.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("GpuModel: the model's output must be logits (B, K), got ",
                                                   logits.ShapeString()));
  }
  if (loss == GpuLoss::kSigmoidBinaryCrossEntropy) {
    if (logits.dim(1) != 1 || labels_host.dtype() != DType::kFloat32 || labels_host.numel() != logits.dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GpuModel: a binary cross-entropy needs logits (B, 1) and float32 labels (B), got logits ",
          logits.ShapeString(), " and ", DTypeName(labels_host.dtype()), " labels ", labels_host.ShapeString()));
    }
    PL_ASSIGN_OR_RETURN(Tensor labels, AllocateDeviceTensor(Shape{logits.dim(0)}, DType::kFloat32, ctx_->device()));
    PL_RETURN_IF_ERROR(CopyToDevice(labels_host, labels, ctx_->stream()));
    PL_ASSIGN_OR_RETURN(LossResult r, SigmoidBinaryCrossEntropy(logits, labels, grad, ctx_->stream()));
    return StepResult{r.loss, r.correct, logits.dim(0)};
  }
  if (labels_host.dtype() != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat("GpuModel: a softmax cross-entropy needs int64 labels, got ",
                                                   DTypeName(labels_host.dtype())));
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

StatusOr<StepResult> GpuModel::TrainStepFromDevice(const Tensor& x, const Tensor& labels_host, GpuLoss loss,
                                                   Tensor* dx) {
  if (!x.defined() || x.dtype() != DType::kFloat32 || x.device() != Device::kCUDA || x.rank() < 1 || x.dim(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("GpuModel: inputs from the device must be a float32 CUDA tensor (B, ...), got ",
                                                   x.defined() ? x.ShapeString() : std::string("an undefined tensor")));
  }
  if (!labels_host.defined() || labels_host.device() != Device::kCPU || labels_host.numel() != x.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("GpuModel: labels must be a CPU tensor of ", x.dim(0), " values"));
  }
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  std::vector<Tensor> acts;
  PL_RETURN_IF_ERROR(ForwardFrom(x, /*training=*/true, &acts));
  const Tensor& logits = acts.back();
  PL_ASSIGN_OR_RETURN(Tensor grad, AllocateDeviceTensor(logits.shape(), DType::kFloat32, device()));
  PL_ASSIGN_OR_RETURN(StepResult result, Loss(logits, labels_host, grad, loss));
  PL_RETURN_IF_ERROR(Backward(acts, grad, dx));
  has_grad_ = true;
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
  if (!opt_initialised_ || opt_kind_ != spec.kind.name()) {
    PL_ASSIGN_OR_RETURN(opt_state_, InitSlotsOnDevice(spec, params_.numel(), device(), ctx_->stream()));
    opt_kind_ = spec.kind.name();
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

const Tensor& GpuModel::HostValue(size_t i) {
  const Tensor& t = param_slots_[i].host.value();
  if (pin_host_buffers_) pinned_.Ensure(static_cast<int>(2 * i), t.raw_data(), t.bytes());
  return t;
}

const Tensor& GpuModel::HostGrad(size_t i) {
  const Tensor& t = param_slots_[i].host.MutableGrad();
  if (pin_host_buffers_) pinned_.Ensure(static_cast<int>(2 * i + 1), t.raw_data(), t.bytes());
  return t;
}

// The copies below are queued back to back and waited for once: into page-locked
// buffers they run as one DMA stream, which is the point of registering them.
Status GpuModel::CopyGradientsToHost() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (size_t i = 0; i < param_slots_.size(); ++i) {
    GpuParam& p = param_slots_[i];
    PL_RETURN_IF_ERROR(Annotate(CopyToHost(p.grad, HostGrad(i), ctx_->stream()), p.name));
  }
  return ctx_->Synchronize();
}

Status GpuModel::CopyParametersToDevice() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (size_t i = 0; i < param_slots_.size(); ++i) {
    GpuParam& p = param_slots_[i];
    PL_RETURN_IF_ERROR(Annotate(CopyToDevice(HostValue(i), p.value, ctx_->stream()), p.name));
  }
  // Pinned sources are read by the DMA after this returns: wait, so the caller may
  // overwrite them (the next pull) as soon as it has them back.
  return ctx_->Synchronize();
}

Status GpuModel::CopyParametersToHost() {
  DeviceGuard guard(device());
  PL_RETURN_IF_ERROR(guard.status());
  for (size_t i = 0; i < param_slots_.size(); ++i) {
    GpuParam& p = param_slots_[i];
    PL_RETURN_IF_ERROR(Annotate(CopyToHost(p.value, HostValue(i), ctx_->stream()), p.name));
  }
  return ctx_->Synchronize();
}

}  // namespace pl::cuda
