// paddle_like._C.EventFileWriter: the C++ TensorBoard event file writer
// (paddle_like/metrics/event_file_writer.h), under paddle_like.tensorboard.SummaryWriter.
// Errors arrive as OSError / PermissionError / ValueError through status_bridge.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "paddle_like/metrics/event_file_writer.h"
#include "python/src/bindings.h"
#include "python/src/status_bridge.h"

namespace pl::python {

namespace py = pybind11;
using metrics::EventFileWriter;

void RegisterTensorBoard(py::module_& m) {
  py::class_<EventFileWriter>(m, "EventFileWriter")
      .def(py::init([](const std::string& dir, double flush_secs) {
             metrics::EventFileOptions options;
             options.flush_every = absl::Seconds(flush_secs);
             return ValueOrThrow(EventFileWriter::Open(dir, options));
           }),
           py::arg("dir"), py::arg("flush_secs") = 2.0)
      .def_property_readonly("path", &EventFileWriter::path)
      .def_property_readonly("bytes", &EventFileWriter::bytes)
      .def("add_scalar",
           [](EventFileWriter& w, const std::string& tag, double value, int64_t step) {
             ThrowIfError(w.AddScalar(tag, value, step));
           },
           py::arg("tag"), py::arg("value"), py::arg("step"))
      .def("add_scalars",
           [](EventFileWriter& w, int64_t step, const std::map<std::string, double>& values) {
             std::vector<metrics::Scalar> scalars;
             for (const auto& [tag, value] : values) scalars.push_back({tag, value});
             ThrowIfError(w.AddScalars(step, scalars));
           },
           py::arg("step"), py::arg("values"))
      .def("add_histogram",
           [](EventFileWriter& w, const std::string& tag,
              py::array_t<double, py::array::c_style | py::array::forcecast> values, int64_t step) {
             ThrowIfError(w.AddHistogram(tag, absl::MakeConstSpan(values.data(), values.size()), step));
           },
           py::arg("tag"), py::arg("values"), py::arg("step"))
      .def("flush", [](EventFileWriter& w) { ThrowIfError(w.Flush()); })
      .def("close", [](EventFileWriter& w) { ThrowIfError(w.Close()); });
}

}  // namespace pl::python
