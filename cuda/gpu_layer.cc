// The GPU layer registry (gpu_layer.h).
#include "cuda/gpu_layer.h"

#include <cstdlib>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/registry.h"

namespace pl::cuda {
namespace {

// Factories by layer type, plus the types in registration order for messages.
struct Table {
  Registry<GpuLayerFactory> factories{"GPU layer"};
  std::vector<std::string> order;
};

Table& Layers() {
  static auto* const table = new Table;
  return *table;
}

Status Add(const std::string& type_name, GpuLayerFactory factory) {
  if (factory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("GPU layer '", type_name, "': null factory"));
  }
  PL_RETURN_IF_ERROR(Layers().factories.Register(type_name, factory));
  Layers().order.push_back(type_name);
  return absl::OkStatus();
}

}  // namespace

void RegisterBuiltinGpuLayers() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    const std::pair<const char*, GpuLayerFactory> builtins[] = {
        {"Linear", MakeLinearGpuLayer},       {"Conv2D", MakeConv2DGpuLayer},
        {"MaxPool2D", MakeMaxPool2DGpuLayer},
        {"ReLU", MakeActivationGpuLayer<kernels::Activation::kRelu>},
        {"Sigmoid", MakeActivationGpuLayer<kernels::Activation::kSigmoid>},
        {"Tanh", MakeActivationGpuLayer<kernels::Activation::kTanh>},
        {"Dropout", MakeDropoutGpuLayer},     {"Flatten", MakeFlattenGpuLayer},
        {"Reshape", MakeReshapeGpuLayer}};
    for (const auto& [name, factory] : builtins) {
      Status s = Add(name, factory);
      if (!s.ok()) {  // a programming error
        log::Error(absl::StrCat("built-in GPU layer: ", s.ToString()));
        std::abort();
      }
    }
  });
}

Status RegisterGpuLayer(const std::string& type_name, GpuLayerFactory factory) {
  RegisterBuiltinGpuLayers();
  return Add(type_name, factory);
}

StatusOr<GpuLayerFactory> FindGpuLayer(const std::string& type_name) {
  RegisterBuiltinGpuLayers();
  auto found = Layers().factories.Find(type_name);
  if (!found.ok()) {
    return absl::UnimplementedError(absl::StrCat(type_name, " cannot run on the GPU (supported: ",
                                                 absl::StrJoin(Layers().order, ", "), ")"));
  }
  return **found;
}

std::vector<std::string> GpuLayerTypes() {
  RegisterBuiltinGpuLayers();
  return Layers().order;
}

}  // namespace pl::cuda
