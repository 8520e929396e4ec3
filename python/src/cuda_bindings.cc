// paddle_like.cuda's compiled half: whether this process can use a GPU, which devices it
// sees, and where the CUDA libraries came from (cuda/cuda_libraries.h). A build without
// the CUDA path (nvcc absent when it was configured) answers every question with that.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "python/src/status_bridge.h"

#ifdef PL_WITH_CUDA
#include "cuda/cuda_libraries.h"
#include "cuda/device.h"
#endif

namespace pl::python {

namespace py = pybind11;

void RegisterCuda(py::module_& m) {
  py::module_ cuda = m.def_submodule("cuda", "GPU availability and the CUDA libraries in use");
#ifdef PL_WITH_CUDA
  cuda.attr("built") = true;
  cuda.def(
      "is_available", [] { return pl::cuda::GpuAvailable(); }, py::call_guard<py::gil_scoped_release>());
  cuda.def(
      "unavailable_reason", [] { return pl::cuda::GpuUnavailableReason(); }, py::call_guard<py::gil_scoped_release>());
  cuda.def(
      "device_count",
      [] {
        StatusOr<int> n = pl::cuda::DeviceCount();
        return n.ok() ? *n : 0;
      },
      py::call_guard<py::gil_scoped_release>());
  cuda.def("describe_device", [](int device) { return ValueOrThrow(pl::cuda::DescribeDevice(device)); });
  cuda.def("libraries", [] {
    py::list out;
    for (const pl::cuda::CudaLibraryInfo& info : pl::cuda::DescribeCudaLibraries()) {
      py::dict d;
      d["name"] = info.name;
      d["file"] = info.soname;
      d["path"] = info.path.empty() ? py::object(py::none()) : py::object(py::str(info.path));
      d["version"] = info.version.empty() ? py::object(py::none()) : py::object(py::str(info.version));
      d["skipped"] = info.skipped;
      d["error"] = info.status.ok() ? py::object(py::none()) : py::object(py::str(std::string(info.status.message())));
      out.append(d);
    }
    return out;
  });
  cuda.def("search_path", [] { return pl::cuda::CudaLibrarySearchPath(); });
#else
  const char* why = "this build of paddle_like has no CUDA path (nvcc was not found when it was configured)";
  cuda.attr("built") = false;
  cuda.def("is_available", [] { return false; });
  cuda.def("unavailable_reason", [why] { return std::string(why); });
  cuda.def("device_count", [] { return 0; });
  cuda.def("describe_device", [why](int) -> std::string { throw py::value_error(why); });
  cuda.def("libraries", [] { return py::list(); });
  cuda.def("search_path", [] { return py::list(); });
#endif
}

}  // namespace pl::python
