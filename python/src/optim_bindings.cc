// Optimizers (paddle_like/optim) and safetensors files (paddle_like/io) for Python.
#include <sys/stat.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/io/safetensors.h"
#include "paddle_like/optim/optimizer.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;

// An optimizer bound to its module: holding the module keeps Optimizer's raw pointer
// valid for as long as Python holds the optimizer.
struct BoundOptimizer {
  std::shared_ptr<Module> module;
  std::unique_ptr<Optimizer> optimizer;
};

void RequireFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    RaiseStatus(absl::NotFoundError(absl::StrCat("no such file: '", path, "'")), NotFoundAs::kFile);
  }
}

}  // namespace

void RegisterOptim(py::module_& m) {
  py::class_<OptimizerSpec>(m, "OptimizerSpec")
      .def(py::init([](const std::string& kind, float lr, float momentum, float beta1, float beta2,
                       float eps, float initial_accumulator, float weight_decay) {
             OptimizerSpec spec;
             spec.kind = ValueOrThrow(ParseOptimizerKind(kind));
             spec.learning_rate = lr;
             spec.momentum = momentum;
             spec.beta1 = beta1;
             spec.beta2 = beta2;
             spec.epsilon = eps;
             spec.initial_accumulator = initial_accumulator;
             spec.weight_decay = weight_decay;
             ThrowIfError(ValidateOptimizerSpec(spec));
             return spec;
           }),
           "kind"_a, "lr"_a, "momentum"_a = 0.9f, "beta1"_a = 0.9f, "beta2"_a = 0.999f, "eps"_a = 1e-8f,
           "initial_accumulator"_a = 0.1f, "weight_decay"_a = 0.0f)
      .def_property_readonly("kind", [](const OptimizerSpec& s) { return std::string(OptimizerName(s.kind)); })
      .def_readonly("lr", &OptimizerSpec::learning_rate)
      .def("__repr__", &OptimizerSpec::ToString);

  py::class_<BoundOptimizer>(m, "Optimizer")
      .def(py::init([](std::shared_ptr<Module> module, const OptimizerSpec& spec) {
             BoundOptimizer b;
             b.module = module;
             b.optimizer = ValueOrThrow(Optimizer::Create(module.get(), spec));
             return b;
           }),
           "module"_a, "spec"_a)
      .def("step", [](BoundOptimizer& b) {
        Status s;
        {
          py::gil_scoped_release release;
          s = b.optimizer->Step();
        }
        ThrowIfError(s, NotFoundAs::kKey);
      }, "Applies the accumulated gradients, then clears them (releases the GIL).")
      .def("zero_grad", [](BoundOptimizer& b) { b.optimizer->ZeroGrad(); })
      .def_property("lr", [](const BoundOptimizer& b) { return b.optimizer->spec().learning_rate; },
                    [](BoundOptimizer& b, float lr) {
                      if (!(lr > 0)) throw py::value_error(absl::StrCat("lr must be > 0, got ", lr));
                      b.optimizer->set_learning_rate(lr);
                    })
      .def_property_readonly("steps", [](const BoundOptimizer& b) { return b.optimizer->steps(); })
      .def_property_readonly("spec", [](const BoundOptimizer& b) { return b.optimizer->spec(); });

  m.def("save_module", [](std::shared_ptr<Module> module, const std::string& path) {
    Status s;
    {
      py::gil_scoped_release release;
      s = SaveModule(path, *module);
    }
    ThrowIfError(s);
  }, "module"_a, "path"_a);
  m.def("load_module", [](std::shared_ptr<Module> module, const std::string& path) {
    RequireFile(path);
    Status s;
    {
      py::gil_scoped_release release;
      s = LoadModule(path, *module);
    }
    // The file exists: a NOT_FOUND now is a parameter missing from it.
    ThrowIfError(s, NotFoundAs::kKey);
  }, "module"_a, "path"_a);
  m.def("save_tensors", [](const std::string& path, const std::vector<std::pair<std::string, py::object>>& items,
                           const std::map<std::string, std::string>& metadata) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, obj] : items) tensors.emplace_back(name, TensorFromPython(obj, "tensor '" + name + "'"));
    Status s;
    {
      py::gil_scoped_release release;
      s = SaveTensors(path, tensors, metadata);
    }
    ThrowIfError(s);
  }, "path"_a, "tensors"_a, "metadata"_a = std::map<std::string, std::string>());
  m.def("load_tensors", [](const std::string& path) {
    StatusOr<TensorFile> file = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      file = LoadTensors(path);
    }
    TensorFile f = ValueOrThrow(std::move(file));
    py::dict tensors;
    for (const std::string& name : f.order) tensors[py::str(name)] = ArrayView(f.tensors.at(name));
    return py::make_tuple(tensors, f.metadata);
  }, "path"_a);
}

}  // namespace pl::python
