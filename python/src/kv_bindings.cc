// The pservers as a key-value store for Python (paddle_like/client/kv_worker.h): a
// script with its own model (NumPy, anything) declares its keys, pushes gradients and
// pulls values by name; each call returns a handle at once and wait(handle) blocks,
// with the GIL released, until that call is done.
//
//   kv = _C.KVWorker(master, num_pservers, [("w", (784, 10)), ("emb", 16, 1000)], spec)
//   kv.connect()
//   h = kv.pull(["w", ("emb", ids)]);  values = kv.wait(h)   # {"w": array, "emb": (ids, rows)}
//   kv.wait(kv.push({"w": grad_w, "emb": (ids, grad_rows)}, num_samples=64))
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/kv_worker.h"
#include "paddle_like/client/master_client.h"
#include "python/src/bindings.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

namespace py = pybind11;
using namespace pybind11::literals;
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

InitSpec ParseInit(const std::string& kind, float scale) {
  if (kind == "zeros") return InitSpec::Zeros();
  if (kind == "constant") return InitSpec::Constant(scale);
  if (kind == "uniform") return InitSpec::Uniform(scale);
  if (kind == "normal") return InitSpec::Normal(scale);
  throw py::value_error("init: unknown kind '" + kind + "' (known: zeros, constant, uniform, normal)");
}

// A key: (name, shape) dense, or (name, dim, num_rows) sparse; an optional item
// (init_kind, scale) sets the initializer (default zeros); a sparse key may end in a
// dict of its table's policy ({"admit_after": N, "evict_after_s": S, "optimizer": spec}).
KeySpec ParseKey(const py::tuple& t) {
  if (t.size() < 2) throw py::value_error("a key is (name, shape) or (name, dim, num_rows), with an optional (init, scale)");
  const std::string name = t[0].cast<std::string>();
  InitSpec init = InitSpec::Zeros();
  TablePolicy policy;
  size_t n = t.size();
  if (n >= 4 && py::isinstance<py::dict>(t[n - 1])) {
    for (const auto& [k, v] : t[n - 1].cast<py::dict>()) {
      const std::string option = k.cast<std::string>();
      if (option == "admit_after") {
        policy.admit_after = v.cast<int64_t>();
      } else if (option == "evict_after_s") {
        policy.evict_after_s = v.cast<int64_t>();
      } else if (option == "optimizer") {
        if (!py::isinstance<OptimizerSpec>(v)) {
          throw py::value_error("key '" + name + "': its optimizer must be a paddle_like.optim.spec(...)");
        }
        policy.optimizer = v.cast<OptimizerSpec>();
      } else {
        throw py::value_error("key '" + name + "': unknown table policy '" + option +
                              "' (known: admit_after, evict_after_s, optimizer)");
      }
    }
    --n;
  }
  if (n >= 3 && py::isinstance<py::tuple>(t[n - 1])) {
    py::tuple i = t[n - 1].cast<py::tuple>();
    if (i.size() != 2) throw py::value_error("key '" + name + "': init is (kind, scale)");
    init = ParseInit(i[0].cast<std::string>(), i[1].cast<float>());
    --n;
  }
  if (py::isinstance<py::tuple>(t[1]) || py::isinstance<py::list>(t[1])) {
    if (n != 2) throw py::value_error("key '" + name + "': a dense key is (name, shape[, init])");
    return KeySpec::Dense(name, t[1].cast<std::vector<int64_t>>(), init);
  }
  if (n != 3) throw py::value_error("key '" + name + "': a sparse key is (name, dim, num_rows[, init][, policy])");
  return KeySpec::Sparse(name, t[1].cast<int64_t>(), t[2].cast<int64_t>(), init, policy);
}

class PyKVWorker {
 public:
  PyKVWorker(const std::string& master, int num_pservers, const std::vector<py::tuple>& keys,
             const OptimizerSpec& spec, uint64_t seed, bool sync, double give_up_after_s, bool shared_memory,
             const std::string& wire_dtype, int dense_link_lanes)
      : master_(std::make_shared<MasterClient>(master, "kv-worker", absl::Seconds(give_up_after_s))) {
    ParameterClientOptions o =
        ClientOptions(num_pservers, spec, seed, sync, give_up_after_s, shared_memory, wire_dtype, dense_link_lanes);
    std::vector<KeySpec> specs;
    for (const py::tuple& t : keys) specs.push_back(ParseKey(t));
    std::shared_ptr<MasterClient> mc = master_;
    worker_ = std::make_unique<KVWorker>(
        std::move(specs), o,
        [mc, num_pservers]() -> StatusOr<std::vector<std::string>> { return mc->PserverAddresses(num_pservers); },
        StopFlag());
  }
  ~PyKVWorker() {
    py::gil_scoped_release release;  // queued calls finish first
    worker_.reset();
  }

  void Connect() {
    Status s;
    {
      py::gil_scoped_release release;
      s = worker_->Connect();
    }
    ThrowIfError(s, NotFoundAs::kKey);
  }

  // {name: array} (dense) or {name: (ids, rows)} (sparse).
  int64_t Push(const py::dict& gradients, int64_t num_samples) {
    return Track(worker_->Push(Gradients(gradients), num_samples), nullptr);
  }
  int64_t PushPull(const py::dict& gradients, int64_t num_samples) {
    auto out = std::make_shared<std::vector<KeyValues>>();
    return Track(worker_->PushPull(Gradients(gradients), num_samples, out.get()), out);
  }
  // ["w", ("emb", ids), ...]
  int64_t Pull(const py::list& keys) {
    std::vector<KeyValues> requests;
    for (const py::handle& k : keys) {
      if (py::isinstance<py::str>(k)) {
        requests.push_back({k.cast<std::string>(), {}, {}});
      } else {
        py::tuple t = k.cast<py::tuple>();
        if (t.size() != 2) throw py::value_error("pull: a sparse key is (name, ids)");
        IdArray ids = t[1].cast<IdArray>();
        requests.push_back({t[0].cast<std::string>(), std::vector<int64_t>(ids.data(), ids.data() + ids.size()), {}});
      }
    }
    auto out = std::make_shared<std::vector<KeyValues>>();
    return Track(worker_->Pull(std::move(requests), out.get()), out);
  }

  // None for a push; {name: array} / {name: (ids, rows)} for a pull or push_pull.
  py::object Wait(int64_t handle) {
    std::shared_ptr<std::vector<KeyValues>> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = outputs_.find(handle);
      if (it != outputs_.end()) {
        out = it->second;
        outputs_.erase(it);
      }
    }
    Status s;
    {
      py::gil_scoped_release release;
      s = worker_->Wait(handle);
    }
    ThrowIfError(s, NotFoundAs::kKey);
    if (!out) return py::none();
    py::dict d;
    for (const KeyValues& kv : *out) {
      const KeySpec& spec = SpecOf(kv.key);
      if (spec.kind == ParamKind::kDense) {
        FloatArray a(spec.shape);
        std::copy(kv.values.begin(), kv.values.end(), a.mutable_data());
        d[py::str(kv.key)] = a;
      } else {
        IdArray ids(static_cast<py::ssize_t>(kv.ids.size()));
        std::copy(kv.ids.begin(), kv.ids.end(), ids.mutable_data());
        FloatArray rows(std::vector<py::ssize_t>{static_cast<py::ssize_t>(kv.ids.size()), spec.dim});
        std::copy(kv.values.begin(), kv.values.end(), rows.mutable_data());
        d[py::str(kv.key)] = py::make_tuple(ids, rows);
      }
    }
    return d;
  }

  py::dict Counters() const { return TrafficCountersToDict(worker_->client().counters()); }

 private:
  const KeySpec& SpecOf(const std::string& name) const {
    for (const KeySpec& k : worker_->keys()) {
      if (k.name == name) return k;
    }
    throw py::key_error(name);
  }

  std::vector<KeyValues> Gradients(const py::dict& gradients) const {
    std::vector<KeyValues> out;
    for (const auto& [key, value] : gradients) {
      KeyValues kv{key.cast<std::string>(), {}, {}};
      FloatArray values;
      if (py::isinstance<py::tuple>(value)) {
        py::tuple t = value.cast<py::tuple>();
        if (t.size() != 2) throw py::value_error("push: a sparse gradient is (ids, rows)");
        IdArray ids = t[0].cast<IdArray>();
        kv.ids.assign(ids.data(), ids.data() + ids.size());
        values = t[1].cast<FloatArray>();
      } else {
        values = value.cast<FloatArray>();
      }
      kv.values.assign(values.data(), values.data() + values.size());
      out.push_back(std::move(kv));
    }
    return out;
  }

  int64_t Track(StatusOr<KVWorker::Handle> handle, std::shared_ptr<std::vector<KeyValues>> out) {
    ThrowIfError(handle.status(), NotFoundAs::kKey);
    if (out) {
      std::lock_guard<std::mutex> lock(mu_);
      outputs_[*handle] = std::move(out);
    }
    return *handle;
  }

  std::shared_ptr<MasterClient> master_;
  std::unique_ptr<KVWorker> worker_;
  std::mutex mu_;
  std::map<int64_t, std::shared_ptr<std::vector<KeyValues>>> outputs_;  // pulls not yet waited for
};

}  // namespace

void RegisterKVWorker(py::module_& m) {
  py::class_<PyKVWorker>(m, "KVWorker")
      .def(py::init<const std::string&, int, const std::vector<py::tuple>&, const OptimizerSpec&, uint64_t, bool,
                    double, bool, const std::string&, int>(),
           "master"_a, "num_pservers"_a, "keys"_a, "spec"_a, "seed"_a = 1, "sync"_a = false,
           "give_up_after_s"_a = 300.0, "shared_memory"_a = true, "wire_dtype"_a = "float32",
           "dense_link_lanes"_a = -1)
      .def("connect", &PyKVWorker::Connect, "Finds the pservers and creates the keys there.")
      .def("push", &PyKVWorker::Push, "gradients"_a, "num_samples"_a = 1,
           "Queues a push of {name: array} / {name: (ids, rows)}; returns a handle.")
      .def("pull", &PyKVWorker::Pull, "keys"_a, "Queues a pull of [name, (name, ids), ...]; returns a handle.")
      .def("push_pull", &PyKVWorker::PushPull, "gradients"_a, "num_samples"_a = 1,
           "Queues a push, then a pull of the pushed keys that includes it; returns a handle.")
      .def("wait", &PyKVWorker::Wait, "handle"_a,
           "Blocks until the call is done: None for a push, {name: values} for a pull.")
      .def("counters", &PyKVWorker::Counters);
}

}  // namespace pl::python
