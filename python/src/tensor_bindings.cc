// paddle_like.Tensor: a pl::Variable (a value in the autograd graph) seen from Python,
// with NumPy interop (numpy_bridge.h) and the ops of paddle_like/nn/functional.h as operators.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/grad_mode.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "paddle_like/nn/elementwise_ops.h"
#include "paddle_like/nn/functional.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;


// A scalar operand becomes an Affine; a tensor operand must match the shape.
Variable Arith(const Variable& a, py::handle other, char op, bool reflected) {
  const bool scalar = py::isinstance<py::float_>(other) || py::isinstance<py::int_>(other) ||
                      (!py::isinstance<Variable>(other) && !py::isinstance<py::array>(other) &&
                       py::hasattr(other, "__float__"));  // NumPy scalars
  if (scalar) {
    const float s = other.cast<float>();
    switch (op) {
      case '+': return RunOp([&] { return functional::Affine(a, 1.0f, s); });
      case '-': return RunOp([&] { return reflected ? functional::Affine(a, -1.0f, s) : functional::Affine(a, 1.0f, -s); });
      case '*': return RunOp([&] { return functional::Affine(a, s, 0.0f); });
      case '/':
        if (reflected) {
          // s / a = s * a^-1
          Variable inv = RunOp([&] { return functional::Pow(a, -1.0f); });
          return RunOp([&] { return functional::Affine(inv, s, 0.0f); });
        }
        if (s == 0.0f) throw py::value_error("Tensor division by zero");
        return RunOp([&] { return functional::Affine(a, 1.0f / s, 0.0f); });
    }
  }
  Variable b = VariableFromPython(other, "Tensor operand");
  const Variable& left = reflected ? b : a;
  const Variable& right = reflected ? a : b;
  switch (op) {
    case '+': return RunOp([&] { return functional::Add(left, right, 1.0f); });
    case '-': return RunOp([&] { return functional::Add(left, right, -1.0f); });
    case '*': return RunOp([&] { return functional::Mul(left, right); });
    case '/': return RunOp([&] { return functional::Div(left, right); });
  }
  throw py::type_error(absl::StrCat("unsupported Tensor operation '", std::string(1, op), "'"));
}

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return t;
}

}  // namespace

void RegisterTensor(py::module_& m) {
  py::class_<Variable>(m, "Tensor", R"doc(
An n-dimensional float32 or int64 array in the autograd graph (a C++ pl::Variable).

Tensor(data, requires_grad=False): `data` is a NumPy array, a list or a number.
A float32/int64 C-contiguous, aligned, writeable ndarray is shared, not copied: the
Tensor keeps the array alive and both see each other's writes. Any other layout
(strided slices, Fortran order, read-only arrays) is copied. Any other dtype is a
TypeError naming it (use arr.astype(np.float32)); lists and numbers are converted
(floats to float32, integers to int64).

t.numpy() returns a view of the Tensor's memory (no copy) that keeps the memory alive
by itself: it stays valid after the Tensor, its module or its optimizer are gone.
For a parameter, the view shows the current values, updated in place by optimizer
steps. Use t.numpy().copy() for a snapshot.
)doc")
      .def(py::init([](py::object data, bool requires_grad) {
             return Variable(TensorFromPython(data, "Tensor data"), requires_grad);
           }),
           "data"_a, "requires_grad"_a = false)
      .def_property_readonly("shape", [](const Variable& v) { return ShapeTuple(v.shape()); })
      .def_property_readonly("dtype", [](const Variable& v) { return DTypeString(v.value().dtype()); })
      .def_property_readonly("ndim", [](const Variable& v) { return v.value().rank(); })
      .def("dim", [](const Variable& v) { return v.value().rank(); })
      .def("numel", [](const Variable& v) { return v.value().numel(); })
      .def("size", [](const Variable& v, py::object dim) -> py::object {
             if (dim.is_none()) return ShapeTuple(v.shape());
             int d = dim.cast<int>();
             const int r = v.value().rank();
             if (d < -r || d >= r) {
               throw py::index_error(absl::StrCat("size(): dimension ", d, " out of range for shape ",
                                                  v.value().ShapeString()));
             }
             return py::int_(v.value().dim(d));
           }, "dim"_a = py::none())
      .def("__len__", [](const Variable& v) {
        if (v.value().rank() == 0) throw py::type_error("len() of a 0-d Tensor");
        return v.value().dim(0);
      })
      .def("numpy", [](const Variable& v) { return ArrayView(v.value()); },
           "A view of the values (no copy); keeps the memory alive by itself.")
      .def("__array__", [](const Variable& v, py::object dtype, py::object copy) -> py::object {
             py::array a = ArrayView(v.value());
             if (!copy.is_none() && copy.cast<bool>()) a = a.attr("copy")();
             if (dtype.is_none()) return std::move(a);
             return a.attr("astype")(dtype);
           }, "dtype"_a = py::none(), "copy"_a = py::none())
      .def("item", [](const Variable& v) -> py::object {
        const Tensor& t = v.value();
        if (t.numel() != 1) {
          throw py::value_error("item(): only a Tensor with one element has an item, this one is " +
                                t.ShapeString());
        }
        if (t.dtype() == DType::kFloat32) return py::float_(t.f32()[0]);
        return py::int_(t.i64()[0]);
      })
      .def("tolist", [](const Variable& v) { return ArrayView(v.value()).attr("tolist")(); })
      .def_property("requires_grad", &Variable::requires_grad,
                    [](const Variable& v, bool on) {
                      VariableNode* n = v.node();
                      if (!n->inputs.empty() || n->backward) {
                        throw py::value_error("requires_grad can only be changed on a leaf Tensor "
                                              "(one not computed by an op)");
                      }
                      if (on && v.value().dtype() != DType::kFloat32) {
                        throw py::type_error("only float32 Tensors can require a gradient");
                      }
                      n->requires_grad = on;
                    })
      .def_property_readonly("grad", [](const Variable& v) -> py::object {
             if (!v.grad().defined()) return py::none();
             return py::cast(Variable(v.grad(), false));
           }, "The accumulated gradient (a Tensor sharing its memory), or None before any backward().")
      .def("zero_grad", [](const Variable& v) { v.ZeroGrad(); })
      .def_property_readonly("_node_id", [](const Variable& v) { return reinterpret_cast<uintptr_t>(v.node()); },
                             "Identity of the underlying graph node (equal for two wrappers of one parameter).")
      .def("backward", [](const Variable& v, py::object gradient) {
             Tensor seed;
             if (!gradient.is_none()) seed = TensorFromPython(gradient, "backward gradient", DType::kFloat32);
             Status s;
             {
               py::gil_scoped_release release;
               s = v.Backward(seed);
             }
             ThrowIfError(s);
           }, "gradient"_a = py::none(),
           "Back-propagates from this Tensor (a scalar unless `gradient` is given) into every "
           "Tensor it depends on that requires a gradient (releases the GIL).")
      .def("detach", [](const Variable& v) { return Variable(v.value(), false); },
           "The same values (shared memory) as a new leaf outside the graph.")
      .def("clone", [](const Variable& v) { return Variable(v.value().Clone(), false); },
           "A copy of the values as a new leaf.")
      .def("reshape", [](const Variable& v, py::args args) {
             Shape shape;
             if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
               shape = args[0].cast<Shape>();
             } else {
               for (auto a : args) shape.push_back(a.cast<int64_t>());
             }
             return RunOp([&] { return functional::Reshape(v, shape); });
           })
      .def("view", [](const Variable& v, py::args args) {
             Shape shape;
             for (auto a : args) shape.push_back(a.cast<int64_t>());
             return RunOp([&] { return functional::Reshape(v, shape); });
           })
      .def("sum", [](const Variable& v, py::object dim, bool keepdim) { return ReduceOverDims(v, dim, keepdim, false); },
           "dim"_a = py::none(), "keepdim"_a = false,
           "The sum over `dim` (an int or a sequence of ints); over everything (a scalar) when dim is None.")
      .def("mean", [](const Variable& v, py::object dim, bool keepdim) { return ReduceOverDims(v, dim, keepdim, true); },
           "dim"_a = py::none(), "keepdim"_a = false,
           "The mean over `dim` (an int or a sequence of ints); over everything (a scalar) when dim is None.")
      .def("__add__", [](const Variable& a, py::object b) { return Arith(a, b, '+', false); })
      .def("__radd__", [](const Variable& a, py::object b) { return Arith(a, b, '+', true); })
      .def("__sub__", [](const Variable& a, py::object b) { return Arith(a, b, '-', false); })
      .def("__rsub__", [](const Variable& a, py::object b) { return Arith(a, b, '-', true); })
      .def("__mul__", [](const Variable& a, py::object b) { return Arith(a, b, '*', false); })
      .def("__rmul__", [](const Variable& a, py::object b) { return Arith(a, b, '*', true); })
      .def("__truediv__", [](const Variable& a, py::object b) { return Arith(a, b, '/', false); })
      .def("__rtruediv__", [](const Variable& a, py::object b) { return Arith(a, b, '/', true); })
      .def("__neg__", [](const Variable& a) { return RunOp([&] { return functional::Affine(a, -1.0f, 0.0f); }); })
      .def("__matmul__", [](const Variable& a, py::object b) {
             Variable bv = VariableFromPython(b, "matmul operand");
             return RunOp([&] { return functional::MatMul(a, bv); });
           })
      .def("__repr__", [](const Variable& v) {
        std::string body = py::repr(ArrayView(v.value()));
        if (body.rfind("array(", 0) == 0) body = body.substr(6, body.size() - 7);
        std::string out = "tensor(" + body;
        if (v.requires_grad()) out += ", requires_grad=True";
        return out + ")";
      });

  // The calling thread's switch (paddle_like/core/grad_mode.h); paddle_like.no_grad()
  // and friends set it on entry and restore the returned value on exit.
  m.def("is_grad_enabled", &GradEnabled, "Whether ops on this thread record the autograd graph.");
  m.def("set_grad_enabled", &SetGradEnabled, "enabled"_a,
        "Sets this thread's grad recording switch and returns its previous value.");

  m.def("matmul", [](py::object a, py::object b) {
    Variable av = VariableFromPython(a, "matmul left operand");
    Variable bv = VariableFromPython(b, "matmul right operand");
    return RunOp([&] { return functional::MatMul(av, bv); });
  });
}

}  // namespace pl::python
