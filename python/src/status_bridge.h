// The one place a pl::Status becomes a Python exception, so every binding reports C++
// errors the same way and nothing aborts the interpreter:
//   INVALID_ARGUMENT, OUT_OF_RANGE      -> ValueError        (bad shapes, bad values)
//   NOT_FOUND                           -> FileNotFoundError (missing files) or
//                                          KeyError (unknown names), as the caller says
//   DATA_LOSS                           -> OSError           (corrupt or truncated files)
//   PERMISSION_DENIED                   -> PermissionError
//   UNIMPLEMENTED                       -> NotImplementedError (a RuntimeError)
//   anything else                       -> RuntimeError
// The exception carries the C++ message unchanged.
//
// Call these with the GIL held (after a py::gil_scoped_release scope has ended).
#ifndef PADDLE_LIKE_PYTHON_SRC_STATUS_BRIDGE_H_
#define PADDLE_LIKE_PYTHON_SRC_STATUS_BRIDGE_H_

#include <utility>

#include <pybind11/pybind11.h>

#include "paddle_like/core/status.h"

namespace pl::python {

namespace py = pybind11;

// What a NOT_FOUND means at the call site.
enum class NotFoundAs { kFile, kKey };

// Sets the Python error for `status` (which must not be OK) and throws
// py::error_already_set, which pybind11 hands to Python.
[[noreturn]] void RaiseStatus(const Status& status, NotFoundAs not_found = NotFoundAs::kFile);

inline void ThrowIfError(const Status& status, NotFoundAs not_found = NotFoundAs::kFile) {
  if (!status.ok()) RaiseStatus(status, not_found);
}

template <typename T>
T ValueOrThrow(StatusOr<T> value, NotFoundAs not_found = NotFoundAs::kFile) {
  if (!value.ok()) RaiseStatus(value.status(), not_found);
  return std::move(value).value();
}

// Runs `fn` (returning StatusOr<T>, e.g. a Variable op) without the GIL, then returns
// its value or raises its error. Call with the GIL held.
template <typename Fn>
auto RunOp(Fn fn) -> typename decltype(fn())::value_type {
  decltype(fn()) out = absl::UnknownError("not run");
  {
    py::gil_scoped_release release;
    out = fn();
  }
  return ValueOrThrow(std::move(out));
}

}  // namespace pl::python

#endif  // PADDLE_LIKE_PYTHON_SRC_STATUS_BRIDGE_H_
