#include "python/src/status_bridge.h"

#include <string>

namespace pl::python {

void RaiseStatus(const Status& status, NotFoundAs not_found) {
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kNotFound:
      type = not_found == NotFoundAs::kFile ? PyExc_FileNotFoundError : PyExc_KeyError;
      break;
    case absl::StatusCode::kDataLoss:
      type = PyExc_OSError;
      break;
    case absl::StatusCode::kPermissionDenied:
      type = PyExc_PermissionError;
      break;
    case absl::StatusCode::kUnimplemented:
      type = PyExc_NotImplementedError;
      break;
    default:
      break;
  }
  std::string message(status.message());
  if (message.empty()) message = absl::StatusCodeToString(status.code());
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

}  // namespace pl::python
