// Modules and layers (paddle_like/nn) for the Python package. The Python classes of
// paddle_like.nn wrap these: each built-in layer holds one of the C++ layers below,
// and a Python-defined Module holds a Container, to which its sub-modules' C++ objects
// are attached by attribute name, so the C++ module tree (and with it the parameter
// names the optimizers, pservers and checkpoints use) mirrors the Python one.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/nn.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;

// The C++ side of a Module defined in Python: no parameters of its own, children
// attached by name in assignment order.
class Container : public Module {
 public:
  explicit Container(std::string type_name) : Module(std::move(type_name)) {}
  Status AddChild(const std::string& name, std::shared_ptr<Module> child) {
    if (name.empty() || name.find('.') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("sub-module name '", name,
                                                     "' must be non-empty and contain no '.'"));
    }
    for (const auto& [existing, m] : children()) {
      if (existing == name) {
        return absl::InvalidArgumentError(absl::StrCat(
            type_name(), ": a sub-module named '", name,
            "' is already registered; parameter names must stay stable, so it cannot be replaced"));
      }
    }
    RegisterModule(name, std::move(child));
    return absl::OkStatus();
  }
};

// An embedding table as a parameter: the rows this process holds, keyed by id.
struct SparseParameter {
  std::shared_ptr<SparseTable> table;
};

py::tuple RowsToArrays(const SparseRows& rows) {
  const int64_t n = static_cast<int64_t>(rows.size()), dim = rows.dim();
  // Shape vectors, never array_t(n): under NumPy 2, pybind11 2.10's one-count
  // constructor reads the item size from a moved descriptor field and makes stride 0.
  py::array_t<int64_t> ids(std::vector<py::ssize_t>{n});          // (R)
  py::array_t<float> values(std::vector<py::ssize_t>{n, dim});    // (R, dim)
  if (n > 0) {
    std::memcpy(ids.mutable_data(), rows.ids().data(), n * sizeof(int64_t));
    std::memcpy(values.mutable_data(), rows.values().data(), n * dim * sizeof(float));
  }
  return py::make_tuple(ids, values);
}


py::list NamedBuffers(Module& module) {
  py::list out;
  for (const auto& [name, t] : module.NamedBuffers()) out.append(py::make_tuple(name, Variable(t, false)));
  return out;
}

py::list NamedParameters(Module& module) {
  py::list out;
  for (const NamedParameter& np : module.NamedParameters()) {
    if (np.param->kind == ParamKind::kDense) {
      out.append(py::make_tuple(np.name, np.param->var));
    } else {
      out.append(py::make_tuple(np.name, SparseParameter{np.param->table}));
    }
  }
  return out;
}

}  // namespace

void RegisterNN(py::module_& m) {
  py::class_<SparseParameter>(m, "SparseParameter", R"doc(
An embedding table: rows keyed by id, created on first use from the table's
deterministic initialiser. Only the rows this process has touched (or, in a
distributed job, pulled for the current batch) are held. rows() and grad_rows()
return copies: (ids int64 (R,), values float32 (R, dim)).
)doc")
      .def_property_readonly("name", [](const SparseParameter& p) { return p.table->name(); })
      .def_property_readonly("dim", [](const SparseParameter& p) { return p.table->dim(); })
      .def_property_readonly("num_rows", [](const SparseParameter& p) { return p.table->num_rows(); },
                             "The id bound (0: any non-negative id).")
      .def_property_readonly("num_held_rows", [](const SparseParameter& p) { return p.table->rows().size(); })
      .def_property_readonly("_node_id", [](const SparseParameter& p) { return reinterpret_cast<uintptr_t>(p.table.get()); })
      .def("rows", [](const SparseParameter& p) { return RowsToArrays(p.table->rows()); })
      .def("grad_rows", [](const SparseParameter& p) { return RowsToArrays(p.table->grad()); })
      .def("__repr__", [](const SparseParameter& p) {
        return absl::StrCat("SparseParameter(name='", p.table->name(), "', dim=", p.table->dim(),
                            ", num_rows=", p.table->num_rows(), ", held rows=", p.table->rows().size(), ")");
      });

  py::class_<Module, std::shared_ptr<Module>>(m, "_Module")
      .def_property_readonly("type_name", &Module::type_name)
      .def("named_parameters", &NamedParameters)
      .def("named_buffers", &NamedBuffers,
           "[(dotted name, Tensor)] of every buffer (state that is saved but not trained, e.g. "
           "BatchNorm's running statistics); each Tensor shares the buffer's memory.")
      .def("register_buffer", [](Module& module, const std::string& name, py::object value) {
        if (name.empty() || name.find('.') != std::string::npos) {
          throw py::value_error("register_buffer: name '" + name + "' must be non-empty and contain no '.'");
        }
        for (const auto& [existing, t] : module.NamedBuffers()) {
          if (existing == name) throw py::key_error("register_buffer: '" + name + "' is already registered");
        }
        for (const NamedParameter& np : module.NamedParameters()) {
          if (np.name == name) throw py::key_error("register_buffer: '" + name + "' is a parameter");
        }
        // A float32/int64 C-contiguous array or a Tensor is shared, not copied.
        return Variable(module.RegisterBuffer(name, TensorFromPython(value, "buffer '" + name + "'")), false);
      }, "name"_a, "tensor"_a,
         "Adds a buffer of this module (saved and loaded with the parameters); returns it as a Tensor "
         "sharing its memory.")
      .def("find_parameter", [](Module& module, const std::string& name) -> py::object {
        Parameter* p = ValueOrThrow(module.FindParameter(name), NotFoundAs::kKey);
        if (p->kind == ParamKind::kDense) return py::cast(p->var);
        return py::cast(SparseParameter{p->table});
      })
      .def("init_parameters", &Module::InitParameters, "seed"_a)
      .def("zero_grad", &Module::ZeroGrad)
      .def("train", &Module::Train, "on"_a)
      .def_property_readonly("training", &Module::training)
      .def("num_parameter_elements", &Module::NumParameterElements)
      .def("child_names", [](const Module& module) {
        std::vector<std::string> names;
        for (const auto& [name, child] : module.children()) names.push_back(name);
        return names;
      });

  py::class_<Layer, Module, std::shared_ptr<Layer>>(m, "_Layer")
      .def("forward", [](Layer& layer, py::object x) {
        Variable in = VariableFromPython(x, layer.type_name() + " input");
        return RunOp([&] { return layer.Forward(in); });
      }, "x"_a, "Runs the layer (releases the GIL).");

  py::class_<Container, Module, std::shared_ptr<Container>>(m, "Container")
      .def(py::init<std::string>(), "type_name"_a)
      .def("add_child", [](Container& c, const std::string& name, std::shared_ptr<Module> child) {
        ThrowIfError(c.AddChild(name, std::move(child)));
      }, "name"_a, "child"_a);

  py::class_<Linear, Layer, std::shared_ptr<Linear>>(m, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), "in_features"_a, "out_features"_a, "bias"_a = true)
      .def_property_readonly("in_features", &Linear::in_features)
      .def_property_readonly("out_features", &Linear::out_features);
  py::class_<Conv2D, Layer, std::shared_ptr<Conv2D>>(m, "Conv2D")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), "in_channels"_a,
           "out_channels"_a, "kernel_h"_a, "kernel_w"_a, "stride"_a = 1, "padding"_a = 0, "bias"_a = true)
      .def("describe", &Conv2D::Describe);
  py::class_<MaxPool2D, Layer, std::shared_ptr<MaxPool2D>>(m, "MaxPool2D")
      .def(py::init<int64_t, int64_t>(), "kernel"_a, "stride"_a = 0)
      .def("describe", &MaxPool2D::Describe);
  py::class_<ReLU, Layer, std::shared_ptr<ReLU>>(m, "ReLU").def(py::init<>());
  py::class_<GELU, Layer, std::shared_ptr<GELU>>(m, "GELU").def(py::init<>());
  py::class_<LayerNorm, Layer, std::shared_ptr<LayerNorm>>(m, "LayerNorm")
      .def(py::init<Shape, float, bool>(), "normalized_shape"_a, "eps"_a = 1e-5f, "elementwise_affine"_a = true)
      .def_property_readonly("normalized_shape", &LayerNorm::normalized_shape)
      .def_property_readonly("eps", &LayerNorm::eps)
      .def("describe", &LayerNorm::Describe);
  auto optional_tensor = [](const Tensor& t) -> py::object {
    return t.defined() ? py::cast(Variable(t, false)) : py::none();
  };
  py::class_<BatchNorm, Layer, std::shared_ptr<BatchNorm>>(m, "BatchNorm")
      .def(py::init<int64_t, float, float, bool, bool>(), "num_features"_a, "eps"_a = 1e-5f, "momentum"_a = 0.1f,
           "affine"_a = true, "track_running_stats"_a = true)
      .def_property_readonly("num_features", &BatchNorm::num_features)
      .def_property_readonly("eps", &BatchNorm::eps)
      .def_property_readonly("momentum", &BatchNorm::momentum)
      .def_property_readonly("running_mean", [optional_tensor](const BatchNorm& b) { return optional_tensor(b.running_mean()); },
                             "The buffer (a Tensor sharing its memory), or None without running stats.")
      .def_property_readonly("running_var", [optional_tensor](const BatchNorm& b) { return optional_tensor(b.running_var()); })
      .def("describe", &BatchNorm::Describe);
  py::class_<Sigmoid, Layer, std::shared_ptr<Sigmoid>>(m, "Sigmoid").def(py::init<>());
  py::class_<Tanh, Layer, std::shared_ptr<Tanh>>(m, "Tanh").def(py::init<>());
  py::class_<Flatten, Layer, std::shared_ptr<Flatten>>(m, "Flatten").def(py::init<>());
  py::class_<Reshape, Layer, std::shared_ptr<Reshape>>(m, "Reshape").def(py::init<Shape>(), "shape"_a);
  py::class_<Dropout, Layer, std::shared_ptr<Dropout>>(m, "Dropout")
      .def(py::init<float, uint64_t>(), "p"_a, "seed"_a = 0)
      .def_property_readonly("p", &Dropout::p);
  py::class_<Embedding, Layer, std::shared_ptr<Embedding>>(m, "Embedding")
      .def(py::init([](int64_t num_rows, int64_t dim, float init_std, int64_t admit_after, int64_t evict_after_s,
                       std::optional<OptimizerSpec> optimizer) {
             if (admit_after < 0 || admit_after > kMaxAdmitAfter) {
               throw py::value_error("Embedding: admit_after " + std::to_string(admit_after) + " is outside [0, " +
                                     std::to_string(kMaxAdmitAfter) + "]");
             }
             if (evict_after_s < 0 || evict_after_s > kMaxEvictAfterSeconds) {
               throw py::value_error("Embedding: evict_after_s " + std::to_string(evict_after_s) +
                                     " is outside [0, " + std::to_string(kMaxEvictAfterSeconds) + "]");
             }
             auto e = std::make_shared<Embedding>(num_rows, dim, InitSpec::Normal(init_std));
             e->table()->set_policy(
                 {.admit_after = admit_after, .evict_after_s = evict_after_s, .optimizer = std::move(optimizer)});
             return e;
           }), "num_rows"_a, "dim"_a, "init_std"_a = 0.01f, "admit_after"_a = 0, "evict_after_s"_a = 0,
           "optimizer"_a = py::none())
      .def_property_readonly("admit_after", [](const Embedding& e) { return e.table()->policy().admit_after; })
      .def_property_readonly("evict_after_s", [](const Embedding& e) { return e.table()->policy().evict_after_s; })
      .def_property_readonly("optimizer", [](const Embedding& e) { return e.table()->policy().optimizer; })
      .def_property_readonly("num_rows", &Embedding::num_rows)
      .def_property_readonly("dim", &Embedding::dim)
      .def("describe", &Embedding::Describe);

  m.def("relu", [](py::object x) {
    Variable v = VariableFromPython(x, "relu input");
    return RunOp([&] { return ApplyRelu(v); });
  });
  m.def("sigmoid", [](py::object x) {
    Variable v = VariableFromPython(x, "sigmoid input");
    return RunOp([&] { return ApplySigmoid(v); });
  });
  m.def("tanh", [](py::object x) {
    Variable v = VariableFromPython(x, "tanh input");
    return RunOp([&] { return ApplyTanh(v); });
  });
  m.def("cat", [](py::sequence xs, int axis) {
    std::vector<Variable> vs;
    for (size_t i = 0; i < xs.size(); ++i) vs.push_back(VariableFromPython(xs[i], absl::StrCat("cat input ", i)));
    return RunOp([&] { return Concat(vs, axis); });
  }, "tensors"_a, "dim"_a = 0);
  m.def("cross_entropy", [](py::object logits, py::object labels) {
    Variable l = VariableFromPython(logits, "cross_entropy logits");
    Tensor y = TensorFromPython(labels, "cross_entropy labels (class indices)", DType::kInt64);
    return RunOp([&] { return SoftmaxCrossEntropy(l, y); });
  }, "logits"_a, "labels"_a);
  m.def("binary_cross_entropy_with_logits", [](py::object logits, py::object labels) {
    Variable l = VariableFromPython(logits, "binary_cross_entropy_with_logits logits");
    Tensor y = TensorFromPython(labels, "binary_cross_entropy_with_logits labels", DType::kFloat32);
    return RunOp([&] { return SigmoidBinaryCrossEntropy(l, y); });
  }, "logits"_a, "labels"_a);
  m.def("sigmoid_of", [](py::object logits) {
    Tensor t = TensorFromPython(logits, "sigmoid input", DType::kFloat32);
    return Variable(SigmoidOf(t), false);
  });
  m.def("count_correct", [](py::object logits, py::object labels) {
    Tensor l = TensorFromPython(logits, "logits", DType::kFloat32);
    Tensor y = TensorFromPython(labels, "labels");
    const int64_t n = CountCorrect(l, y);
    if (n < 0) {
      throw py::value_error(absl::StrCat("accuracy: logits ", l.ShapeString(), " and labels ",
                                         y.ShapeString(), " (", DTypeName(y.dtype()),
                                         ") do not fit together"));
    }
    return n;
  });
  m.def("binary_auc", [](py::array_t<float, py::array::c_style | py::array::forcecast> scores,
                         py::array_t<float, py::array::c_style | py::array::forcecast> labels) {
    std::vector<float> s(scores.data(), scores.data() + scores.size());
    std::vector<float> l(labels.data(), labels.data() + labels.size());
    if (s.size() != l.size()) {
      throw py::value_error(absl::StrCat("auc: ", s.size(), " scores but ", l.size(), " labels"));
    }
    py::gil_scoped_release release;
    return BinaryAuc(s, l);
  });
}

}  // namespace pl::python
