// Tensors to and from NumPy arrays, and who owns the memory.
//
// Python -> C++ (TensorFromPython): a float32 or int64 ndarray that is C-contiguous,
// aligned and writeable becomes a Tensor over the array's own memory (zero copy); the
// Tensor's Storage holds a reference to the array and drops it (taking the GIL) when
// the last Tensor over it goes, so the array outlives every view of it. Writes through
// either side are seen by the other. Any other ndarray layout (strided, Fortran order,
// read-only, misaligned, byte-swapped) is copied into a fresh C-ordered array first.
// A different dtype is a TypeError naming it (no silent float64 -> float32); Python
// lists and scalars are converted (floats to float32, ints to int64, or to the
// required dtype).
//
// C++ -> Python (ArrayView): an ndarray over the Tensor's memory whose base object (a
// capsule) holds a copy of the Tensor, i.e. a reference to its Storage, so the view
// stays valid after the Tensor, its Variable and its module are gone.
//
// Call with the GIL held.
#ifndef PADDLE_LIKE_PYTHON_SRC_NUMPY_BRIDGE_H_
#define PADDLE_LIKE_PYTHON_SRC_NUMPY_BRIDGE_H_

#include <optional>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "paddle_like/core/tensor.h"
#include "paddle_like/core/variable.h"

namespace pl::python {

namespace py = pybind11;

// `obj`: a paddle_like Tensor (its value is shared), an ndarray, a list or a scalar.
// `what` names the argument in errors ("labels", "Tensor data"); `dtype`, when given,
// is required (TypeError otherwise).
Tensor TensorFromPython(py::handle obj, const std::string& what,
                        std::optional<DType> dtype = std::nullopt);

// As above, as a Variable: a paddle_like Tensor is passed through (graph kept), data
// becomes a new leaf that needs no gradient.
Variable VariableFromPython(py::handle obj, const std::string& what);

// A view of `t` (CPU); see the file comment for its lifetime.
py::array ArrayView(const Tensor& t);

// "float32" / "int64".
std::string DTypeString(DType dtype);

}  // namespace pl::python

#endif  // PADDLE_LIKE_PYTHON_SRC_NUMPY_BRIDGE_H_
