// paddle_like._C: the compiled half of the paddle_like package. The Python modules of
// python/paddle_like wrap it in the PyTorch-style API; user code should not need it.
#include <omp.h>

#include <pybind11/pybind11.h>

#include <Eigen/Core>

#include "paddle_like/core/runtime.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_C, m) {
  pl::SetMathThreads(0);  // keep Eigen's spinning GEMM threads out of shared machines
  pl::SkipMutexDeadlockChecks();
  m.doc() = "paddle_like's C++ core (tensors, layers, optimizers, data, distributed clients)";
  pl::python::RegisterTensor(m);
  pl::python::RegisterNN(m);
  pl::python::RegisterOps(m);
  pl::python::RegisterOptim(m);
  pl::python::RegisterData(m);
  pl::python::RegisterDistributed(m);
  pl::python::RegisterTelemetry(m);
  pl::python::RegisterKVWorker(m);
  pl::python::RegisterElastic(m);
  pl::python::RegisterCuda(m);

  // Small batches gain little from threads, and on an oversubscribed machine (other
  // trainers, pservers, builds) OpenMP threads cost far more than they bring.
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw pybind11::value_error("set_num_threads: n must be >= 1, got " + std::to_string(n));
    pl::SetMathThreads(n);
  }, "Threads for the C++ math (OpenMP loops; Eigen's GEMM stays on one), like torch.set_num_threads.");
  m.def("get_num_threads", [] { return omp_get_max_threads(); });
}
