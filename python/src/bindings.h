// Registration of each part of the paddle_like._C extension (module.cc calls them in
// order: tensors first, since the other parts take and return Tensors).
#ifndef PADDLE_LIKE_PYTHON_SRC_BINDINGS_H_
#define PADDLE_LIKE_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <atomic>

#include <cstdint>
#include <string>

namespace pl {
class Variable;
struct TrafficCounters;
struct ParameterClientOptions;
struct OptimizerSpec;
}  // namespace pl

namespace pl::python {

void RegisterTensor(pybind11::module_& m);
void RegisterNN(pybind11::module_& m);
void RegisterOps(pybind11::module_& m);
void RegisterOptim(pybind11::module_& m);
void RegisterData(pybind11::module_& m);
void RegisterDistributed(pybind11::module_& m);
void RegisterTelemetry(pybind11::module_& m);
void RegisterKVWorker(pybind11::module_& m);
void RegisterElastic(pybind11::module_& m);
void RegisterCuda(pybind11::module_& m);

// x summed (or averaged) over `dim`: None (all, a scalar unless keepdim), an int or a
// sequence of ints, negative counting from the end (ops_bindings.cc; Tensor.sum/mean).
Variable ReduceOverDims(const Variable& x, const pybind11::object& dim, bool keepdim, bool mean);

// The flag SIGTERM/SIGINT set once install_stop_handlers() ran (dist_bindings.cc);
// the clients' retry loops watch it.
const std::atomic<bool>* StopFlag();
// A pserver client's traffic counters as {name: count} (dist_bindings.cc).
pybind11::dict TrafficCountersToDict(const TrafficCounters& counters);
// The pserver client's options from a Python constructor's arguments; ValueError naming
// a bad num_pservers, wire_dtype or dense_link_lanes (dist_bindings.cc).
ParameterClientOptions ClientOptions(int num_pservers, const OptimizerSpec& spec, uint64_t seed, bool sync,
                                     double give_up_after_s, bool shared_memory, const std::string& wire_dtype,
                                     int dense_link_lanes);

}  // namespace pl::python

#endif  // PADDLE_LIKE_PYTHON_SRC_BINDINGS_H_
