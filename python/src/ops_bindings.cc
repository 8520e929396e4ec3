// The torch-style functional ops (paddle_like/nn: reductions.h, elementwise_ops.h,
// normalization.h, the *Op functions of the layers, losses.h) as paddle_like._C
// functions. Each takes Tensors (or data, which becomes a leaf that needs no gradient),
// runs without the GIL and raises ValueError (INVALID_ARGUMENT) naming the op and the
// shapes; dims may be negative. The Python package gives them torch's names.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/nn/nn.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;


// An optional Tensor argument: None is an undefined Variable (no bias, no weight).
Variable OptionalVariable(const py::object& obj, const std::string& what) {
  return obj.is_none() ? Variable() : VariableFromPython(obj, what);
}

// A one-argument op `name`(x).
template <typename Op>
void DefUnary(py::module_& m, const char* name, Op op, const char* doc) {
  m.def(name, [name, op](py::object x) {
    Variable v = VariableFromPython(x, absl::StrCat(name, " input"));
    return RunOp([&] { return op(v); });
  }, "input"_a, doc);
}

Reduction ReductionArg(const std::string& name) { return ValueOrThrow(ParseReduction(name)); }

}  // namespace

Variable ReduceOverDims(const Variable& x, const py::object& dim, bool keepdim, bool mean) {
  const char* op = mean ? "mean" : "sum";
  if (dim.is_none()) {
    Variable total = RunOp([&] { return mean ? functional::Mean(x) : functional::Sum(x); });
    if (!keepdim) return total;
    const Shape ones(x.value().rank(), 1);
    return RunOp([&] { return functional::Reshape(total, ones); });
  }
  std::vector<int> dims;
  if (py::isinstance<py::int_>(dim)) {
    dims.push_back(dim.cast<int>());
  } else {
    dims = dim.cast<std::vector<int>>();
  }
  // Reduce the highest dim first so that the lower ones keep their positions.
  const int rank = std::max(x.value().rank(), 1);
  for (int& d : dims) {
    if (d < -rank || d >= rank) {
      throw py::value_error(absl::StrCat(op, "(dim=", d, "): dim ", d, " is out of range for shape ",
                                         x.value().ShapeString()));
    }
    if (d < 0) d += rank;
  }
  std::sort(dims.rbegin(), dims.rend());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) {
    throw py::value_error(absl::StrCat(op, ": a dim appears twice in the list"));
  }
  Variable y = x;
  for (int d : dims) {
    y = RunOp([&] { return mean ? functional::MeanDim(y, d, keepdim) : functional::SumDim(y, d, keepdim); });
  }
  return y;
}

void RegisterOps(py::module_& m) {
  // Reductions along dims (reductions.h).
  m.def("sum_dim", [](py::object x, py::object dim, bool keepdim) {
    return ReduceOverDims(VariableFromPython(x, "sum input"), dim, keepdim, false);
  }, "input"_a, "dim"_a, "keepdim"_a = false, "Sum over `dim` (an int, a list of ints, or None: all).");
  m.def("mean_dim", [](py::object x, py::object dim, bool keepdim) {
    return ReduceOverDims(VariableFromPython(x, "mean input"), dim, keepdim, true);
  }, "input"_a, "dim"_a, "keepdim"_a = false, "Mean over `dim` (an int, a list of ints, or None: all).");
  m.def("max_dim", [](py::object x, int dim, bool keepdim) {
    Variable v = VariableFromPython(x, "max input");
    StatusOr<functional::MaxDimResult> r = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      r = functional::MaxDim(v, dim, keepdim);
    }
    functional::MaxDimResult out = ValueOrThrow(std::move(r));
    return py::make_tuple(out.values, Variable(out.indices, false));
  }, "input"_a, "dim"_a, "keepdim"_a = false,
     "(values, indices int64) of the maximum along `dim`; the gradient goes to the first maximum.");
  m.def("argmax", [](py::object x, std::optional<int> dim, bool keepdim) {
    Tensor t = TensorFromPython(x, "argmax input");
    StatusOr<Tensor> r = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      r = functional::ArgMax(t, dim, keepdim);
    }
    return Variable(ValueOrThrow(std::move(r)), false);
  }, "input"_a, "dim"_a = py::none(), "keepdim"_a = false,
     "int64 index of the first maximum along `dim`, or into the flattened tensor when dim is None.");
  m.def("softmax", [](py::object x, int dim) {
    Variable v = VariableFromPython(x, "softmax input");
    return RunOp([&] { return functional::Softmax(v, dim); });
  }, "input"_a, "dim"_a = -1, "Softmax along `dim` (differentiable, max-subtracted).");
  m.def("log_softmax", [](py::object x, int dim) {
    Variable v = VariableFromPython(x, "log_softmax input");
    return RunOp([&] { return functional::LogSoftmax(v, dim); });
  }, "input"_a, "dim"_a = -1, "Log-softmax along `dim` (differentiable, max-subtracted).");

  // Element-wise (elementwise_ops.h, activations.h).
  DefUnary(m, "exp", functional::Exp, "exp(x), element-wise.");
  DefUnary(m, "log", functional::Log, "Natural log; log(0) = -inf, log(x < 0) = nan (no error).");
  DefUnary(m, "abs", functional::Abs, "|x|; the gradient at 0 is 0.");
  DefUnary(m, "sqrt", functional::Sqrt, "sqrt(x); sqrt(x < 0) = nan (no error).");
  DefUnary(m, "gelu", ApplyGelu, "GELU, exact erf form: 0.5 x (1 + erf(x / sqrt(2))).");
  m.def("pow", [](py::object x, float exponent) {
    Variable v = VariableFromPython(x, "pow input");
    return RunOp([&] { return functional::Pow(v, exponent); });
  }, "input"_a, "exponent"_a, "x ** exponent (a number).");
  m.def("clamp", [](py::object x, std::optional<float> min, std::optional<float> max) {
    Variable v = VariableFromPython(x, "clamp input");
    return RunOp([&] { return functional::Clamp(v, min, max); });
  }, "input"_a, "min"_a = py::none(), "max"_a = py::none(),
     "Clamps into [min, max] (either may be None); the gradient passes where min <= x <= max.");
  m.def("div", [](py::object a, py::object b) {
    Variable av = VariableFromPython(a, "div left operand"), bv = VariableFromPython(b, "div right operand");
    return RunOp([&] { return functional::Div(av, bv); });
  }, "input"_a, "other"_a, "a / b element-wise, same shapes.");

  // Shape.
  m.def("transpose", [](py::object x, int dim0, int dim1) {
    Variable v = VariableFromPython(x, "transpose input");
    return RunOp([&] { return Transpose(v, dim0, dim1); });
  }, "input"_a, "dim0"_a, "dim1"_a, "A contiguous copy with dim0 and dim1 swapped (float32 or int64).");

  // The layers' computations over given tensors, in torch's layouts.
  m.def("linear", [](py::object x, py::object weight, py::object bias) {
    Variable xv = VariableFromPython(x, "linear input"), w = VariableFromPython(weight, "linear weight");
    Variable b = OptionalVariable(bias, "linear bias");
    return RunOp([&] { return LinearOp(xv, w, b); });
  }, "input"_a, "weight"_a, "bias"_a = py::none(), "x (..., in) @ weight (out, in)^T + bias (out).");
  m.def("conv2d", [](py::object x, py::object weight, py::object bias, int64_t stride, int64_t padding) {
    Variable xv = VariableFromPython(x, "conv2d input"), w = VariableFromPython(weight, "conv2d weight");
    Variable b = OptionalVariable(bias, "conv2d bias");
    return RunOp([&] { return Conv2dOp(xv, w, b, stride, padding); });
  }, "input"_a, "weight"_a, "bias"_a = py::none(), "stride"_a = 1, "padding"_a = 0,
     "x (N, C, H, W), weight (O, C, kh, kw), bias (O); square stride, symmetric padding.");
  m.def("max_pool2d", [](py::object x, int64_t kernel, int64_t stride) {
    Variable v = VariableFromPython(x, "max_pool2d input");
    return RunOp([&] { return MaxPool2dOp(v, kernel, stride); });
  }, "input"_a, "kernel"_a, "stride"_a = 0, "Square windows, no padding; stride 0 = kernel.");
  m.def("embedding", [](py::object ids, py::object weight) {
    Tensor i = TensorFromPython(ids, "embedding ids", DType::kInt64);
    Variable w = VariableFromPython(weight, "embedding weight");
    return RunOp([&] { return EmbeddingOp(i, w); });
  }, "input"_a, "weight"_a, "Rows of weight (num, dim) by int64 ids of any shape; dense weight gradient.");
  m.def("dropout", [](py::object x, float p, bool training, uint64_t seed) {
    Variable v = VariableFromPython(x, "dropout input");
    return RunOp([&] { return DropoutOp(v, p, training, seed); });
  }, "input"_a, "p"_a, "training"_a, "seed"_a,
     "Inverted dropout; the mask is a function of (seed, element index): pass a new seed per call.");
  m.def("layer_norm", [](py::object x, const Shape& normalized_shape, py::object weight, py::object bias,
                         float eps) {
    Variable v = VariableFromPython(x, "layer_norm input");
    Variable w = OptionalVariable(weight, "layer_norm weight"), b = OptionalVariable(bias, "layer_norm bias");
    return RunOp([&] { return LayerNormOp(v, normalized_shape, w, b, eps); });
  }, "input"_a, "normalized_shape"_a, "weight"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5f);
  m.def("batch_norm", [](py::object x, py::object running_mean, py::object running_var, py::object weight,
                         py::object bias, bool training, float momentum, float eps) {
    Variable v = VariableFromPython(x, "batch_norm input");
    // Shared, not copied (a Tensor's storage or a float32 C-contiguous array): updated in place.
    Tensor rm = running_mean.is_none() ? Tensor() : TensorFromPython(running_mean, "running_mean", DType::kFloat32);
    Tensor rv = running_var.is_none() ? Tensor() : TensorFromPython(running_var, "running_var", DType::kFloat32);
    Variable w = OptionalVariable(weight, "batch_norm weight"), b = OptionalVariable(bias, "batch_norm bias");
    return RunOp([&] { return BatchNormOp(v, rm, rv, w, b, training, momentum, eps); });
  }, "input"_a, "running_mean"_a, "running_var"_a, "weight"_a = py::none(), "bias"_a = py::none(),
     "training"_a = false, "momentum"_a = 0.1f, "eps"_a = 1e-5f,
     "Per-channel normalisation of x (N, C, ...); in training the running statistics (if given) move "
     "in place with the unbiased batch variance.");

  // Losses (losses.h); reduction is "mean", "sum" or "none".
  m.def("mse_loss", [](py::object input, py::object target, const std::string& reduction) {
    Variable p = VariableFromPython(input, "mse_loss input"), t = VariableFromPython(target, "mse_loss target");
    const Reduction r = ReductionArg(reduction);
    return RunOp([&] { return MSELoss(p, t, r); });
  }, "input"_a, "target"_a, "reduction"_a = "mean");
  m.def("l1_loss", [](py::object input, py::object target, const std::string& reduction) {
    Variable p = VariableFromPython(input, "l1_loss input"), t = VariableFromPython(target, "l1_loss target");
    const Reduction r = ReductionArg(reduction);
    return RunOp([&] { return L1Loss(p, t, r); });
  }, "input"_a, "target"_a, "reduction"_a = "mean");
  m.def("nll_loss", [](py::object input, py::object target, const std::string& reduction, int64_t ignore_index) {
    Variable lp = VariableFromPython(input, "nll_loss input");
    Tensor t = TensorFromPython(target, "nll_loss target (class indices)", DType::kInt64);
    const Reduction r = ReductionArg(reduction);
    return RunOp([&] { return NLLLoss(lp, t, r, ignore_index); });
  }, "input"_a, "target"_a, "reduction"_a = "mean", "ignore_index"_a = -100,
     "log_probs (B, C), int64 target (B); rows whose target is ignore_index do not count.");
}

}  // namespace pl::python
