// Record-file data for Python: decoded datasets handed over as NumPy views.
#ifndef PADDLE_LIKE_PYTHON_SRC_DATA_BINDINGS_H_
#define PADDLE_LIKE_PYTHON_SRC_DATA_BINDINGS_H_

#include <string>

#include <pybind11/pybind11.h>

#include "paddle_like/data/dataset.h"

namespace pl::python {

// "image" or "clicks"; ValueError otherwise.
SampleLayout LayoutFromKind(const std::string& kind);

// {"kind", "features", "ids", "labels", "probabilities"}: NumPy views of the decoded
// tensors (None where the layout has none). Call with the GIL held.
pybind11::dict ExamplesToDict(const Examples& examples);

}  // namespace pl::python

#endif  // PADDLE_LIKE_PYTHON_SRC_DATA_BINDINGS_H_
