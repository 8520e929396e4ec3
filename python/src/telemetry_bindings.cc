// paddle_like._C.EventFileWriter: the C++ TensorBoard event file writer
// (paddle_like/metrics/event_file_writer.h), under paddle_like.tensorboard.SummaryWriter;
// paddle_like._C.ProgressReporter: a trainer's points for the master's status page
// (paddle_like/metrics/progress_reporter.h), used by paddle_like.distributed.
// Errors arrive as Python exceptions through status_bridge.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "paddle_like/metrics/event_file_writer.h"
#include "paddle_like/metrics/progress_reporter.h"
#include "python/src/bindings.h"
#include "python/src/status_bridge.h"

namespace pl::python {

namespace py = pybind11;
using metrics::EventFileWriter;

namespace {

// close() ends the reporting (its last send) at a known time, not at garbage collection.
struct PyProgressReporter {
  std::unique_ptr<metrics::ProgressReporter> reporter;
};

}  // namespace

void RegisterTelemetry(py::module_& m) {
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

  py::class_<PyProgressReporter>(m, "ProgressReporter")
      .def(py::init([](const std::string& master, const std::string& trainer) {
             auto r = std::make_unique<PyProgressReporter>();
             r->reporter = std::make_unique<metrics::ProgressReporter>(master, trainer, nullptr);
             return r;
           }),
           py::arg("master"), py::arg("trainer"))
      .def("on_step",
           [](PyProgressReporter& r, int64_t step, double loss, int64_t correct, int64_t samples, double step_s,
              double staleness) {
             if (r.reporter) r.reporter->OnStep({step, loss, correct, samples, step_s, 0, step_s, staleness});
           },
           py::arg("step"), py::arg("loss"), py::arg("correct"), py::arg("samples"), py::arg("step_s"),
           py::arg("staleness") = 0.0,
           "correct < 0: not a classifier")
      .def("on_evaluation",
           [](PyProgressReporter& r, int64_t step, const std::string& metric, double value) {
             py::gil_scoped_release release;  // sends to the master
             if (r.reporter) r.reporter->OnEvaluation(step, metric, value);
           },
           py::arg("step"), py::arg("metric"), py::arg("value"))
      .def("close", [](PyProgressReporter& r) {
        py::gil_scoped_release release;  // the last send, bounded by its deadline
        r.reporter.reset();
      });
}

}  // namespace pl::python
