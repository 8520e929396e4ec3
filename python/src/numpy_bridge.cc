#include "python/src/numpy_bridge.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pl::python {
namespace {

// Drops the reference a Storage holds on its NumPy array. Runs wherever the last
// Tensor dies, possibly in a C++ section that released the GIL, so it takes it. Once
// the interpreter is gone (or going, on a thread without the GIL) the reference is
// left alone: the memory is reclaimed with the process.
void ReleasePyObject(py::object* owner) {
  if (!Py_IsInitialized()) return;
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing && !PyGILState_Check()) return;
  py::gil_scoped_acquire gil;
  delete owner;
}

std::optional<DType> DTypeOfArray(const py::array& arr) {
  if (py::isinstance<py::array_t<float>>(arr)) return DType::kFloat32;
  if (py::isinstance<py::array_t<int64_t>>(arr)) return DType::kInt64;
  return std::nullopt;
}

const char* NumpyName(DType dtype) { return dtype == DType::kFloat32 ? "float32" : "int64"; }

}  // namespace

std::string DTypeString(DType dtype) { return NumpyName(dtype); }

Tensor TensorFromPython(py::handle obj, const std::string& what, std::optional<DType> dtype) {
  if (py::isinstance<Variable>(obj)) {
    const Variable& v = obj.cast<const Variable&>();
    if (dtype && v.value().dtype() != *dtype) {
      throw py::type_error(absl::StrCat(what, ": expected a ", NumpyName(*dtype), " tensor, got ",
                                        NumpyName(v.value().dtype()), " of shape ",
                                        v.value().ShapeString()));
    }
    return v.value();
  }
  py::module_ np = py::module_::import("numpy");
  py::array arr;
  if (py::isinstance<py::array>(obj)) {
    arr = py::reinterpret_borrow<py::array>(obj);
  } else {
    // Lists and scalars have no dtype of their own worth keeping: numpy would make
    // them float64/int64; convert to what paddle_like computes in.
    try {
      arr = np.attr("asarray")(obj);
    } catch (py::error_already_set& e) {
      throw py::type_error(absl::StrCat(what, ": cannot convert a ",
                                        std::string(py::str(obj.get_type().attr("__name__"))),
                                        " to an array (", e.what(), ")"));
    }
    const char kind = arr.dtype().kind();
    const char* target = nullptr;
    if (dtype) {
      if (kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b') target = NumpyName(*dtype);
    } else if (kind == 'f') {
      target = "float32";
    } else if (kind == 'i' || kind == 'u' || kind == 'b') {
      target = "int64";
    }
    if (target == nullptr) {
      throw py::type_error(absl::StrCat(what, ": cannot make a tensor of a ",
                                        std::string(py::str(obj.get_type().attr("__name__"))),
                                        " holding ", std::string(py::str(arr.dtype())),
                                        " values; expected numbers"));
    }
    arr = np.attr("asarray")(arr, target);
  }
  const std::optional<DType> got = DTypeOfArray(arr);
  if (!got || (dtype && *got != *dtype)) {
    const std::string expected = dtype ? NumpyName(*dtype) : "float32 or int64";
    throw py::type_error(absl::StrCat(
        what, ": expected a ", expected, " array, got ", std::string(py::str(arr.dtype())),
        " (convert explicitly, e.g. arr.astype(np.", dtype ? NumpyName(*dtype) : "float32",
        "); paddle_like does not narrow silently)"));
  }
  const size_t itemsize = DTypeSize(*got);
  const bool zero_copy = (arr.flags() & py::array::c_style) && arr.writeable() &&
                         reinterpret_cast<uintptr_t>(arr.data()) % itemsize == 0;
  if (!zero_copy) {
    // A fresh, owned, C-ordered, aligned, writeable copy.
    arr = np.attr("array")(arr, py::arg("dtype") = NumpyName(*got), py::arg("order") = "C",
                           py::arg("copy") = true);
  }
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  // Bytes from our own item size: pybind11 2.10's array::nbytes() reads the item size
  // from a descriptor field that moved in NumPy 2 (it reads 0 there).
  const size_t nbytes = static_cast<size_t>(arr.size()) * itemsize;
  auto* owner = new py::object(arr);
  auto storage = Storage::Wrap(arr.mutable_data(), nbytes, Device::kCPU,
                               [owner] { ReleasePyObject(owner); });
  return Tensor::FromStorage(std::move(storage), std::move(shape), *got);
}

Variable VariableFromPython(py::handle obj, const std::string& what) {
  if (py::isinstance<Variable>(obj)) return obj.cast<Variable>();
  return Variable(TensorFromPython(obj, what), /*requires_grad=*/false);
}

py::array ArrayView(const Tensor& t) {
  if (!t.defined()) throw py::value_error("numpy(): the tensor is undefined");
  if (t.device() != Device::kCPU) {
    throw py::value_error(absl::StrCat("numpy(): the tensor ", t.ShapeString(),
                                       " is on a CUDA device; copy it to the CPU first"));
  }
  const size_t itemsize = DTypeSize(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(itemsize);
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  auto* keep = new Tensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  if (t.dtype() == DType::kFloat32) {
    return py::array_t<float>(shape, strides, t.f32(), base);
  }
  return py::array_t<int64_t>(shape, strides, t.i64(), base);
}

}  // namespace pl::python
