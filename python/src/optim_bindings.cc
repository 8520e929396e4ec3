// Optimizers (paddle_like/optim) and safetensors files (paddle_like/io) for Python.
#include <sys/stat.h>

#include <cmath>
#include <map>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/io/safetensors.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/optim/lr_schedule.h"
#include "paddle_like/optim/optimizer.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;

// An optimizer bound to its module: holding the module keeps Optimizer's raw pointer
// valid for as long as Python holds the optimizer.
struct BoundOptimizer {
  std::shared_ptr<Module> module;
  std::unique_ptr<Optimizer> optimizer;
};

py::list ArrayViews(const std::vector<Tensor>& tensors) {
  py::list out;
  for (const Tensor& t : tensors) out.append(ArrayView(t));
  return out;
}

std::vector<Tensor> SlotTensors(const py::list& slots, const std::string& name) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < slots.size(); ++k) {
    out.push_back(TensorFromPython(slots[k], absl::StrCat("slot ", k, " of '", name, "'"), DType::kFloat32));
  }
  return out;
}

// Python's name "eps" is the registry's "epsilon".
std::string HyperName(const std::string& name) { return name == "eps" ? "epsilon" : name; }

// A hyper-parameter named `name` of any registered optimizer, or nullptr.
const HyperParam* DefaultOfAny(const std::string& name) {
  for (const std::string& kind : OptimizerNames()) {
    const OptimizerDef* def = *FindOptimizer(kind);
    if (int i = def->HyperIndex(name); i >= 0) return &def->hyper_params[i];
  }
  return nullptr;
}

std::map<std::string, float> ResolvedHyper(const OptimizerSpec& s) {
  const UpdateRule rule = ValueOrThrow(UpdateRule::Create(s));
  std::map<std::string, float> out;
  for (size_t i = 0; i < rule.def().hyper_params.size(); ++i) {
    out[rule.def().hyper_params[i].name] = rule.params().hyper[i];
  }
  return out;
}

void RequireFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    RaiseStatus(absl::NotFoundError(absl::StrCat("no such file: '", path, "'")), NotFoundAs::kFile);
  }
}

}  // namespace

void RegisterOptim(py::module_& m) {
  py::class_<OptimizerSpec>(m, "OptimizerSpec")
      .def(py::init([](const std::string& kind, float lr, float weight_decay, const py::kwargs& kwargs) {
             OptimizerSpec spec;
             spec.kind = ValueOrThrow(ParseOptimizerKind(kind));
             spec.learning_rate = lr;
             spec.weight_decay = weight_decay;
             const OptimizerDef& def = *ValueOrThrow(FindOptimizer(spec.kind.name()));
             for (const auto& [key, value] : kwargs) {
               const std::string name = HyperName(py::cast<std::string>(key));
               if (def.HyperIndex(name) >= 0) {
                 spec.Set(name, py::cast<float>(value));
               } else if (DefaultOfAny(name) == nullptr) {
                 throw py::value_error(absl::StrCat("optimizer ", def.name, " has no hyper-parameter '", name,
                                                    "' (and no registered optimizer has one)"));
               }  // else another optimizer's: ignored, so one call can describe any kind
             }
             ThrowIfError(ValidateOptimizerSpec(spec));
             return spec;
           }),
           "kind"_a, "lr"_a, "weight_decay"_a = 0.0f,
           "kind: a registered optimizer (optimizer_names()); kwargs: its hyper-parameters by name "
           "(eps for epsilon); those of other optimizers are ignored.")
      .def_property_readonly("kind", [](const OptimizerSpec& s) { return std::string(OptimizerName(s.kind)); })
      .def_readonly("lr", &OptimizerSpec::learning_rate)
      .def_readonly("weight_decay", &OptimizerSpec::weight_decay)
      .def_property_readonly("hyper", [](const OptimizerSpec& s) { return ResolvedHyper(s); },
                             "{name: value} of the kind's hyper-parameters, defaults included")
      .def("__getattr__", [](const OptimizerSpec& s, const std::string& attr) -> float {
             // momentum, beta1, eps, ...: the kind's value, or for a hyper-parameter the
             // kind lacks, the default of a registered optimizer that has it (torch-style
             // param_groups list every field).
             const std::string name = HyperName(attr);
             const std::map<std::string, float> hyper = ResolvedHyper(s);
             if (auto it = hyper.find(name); it != hyper.end()) return it->second;
             if (const HyperParam* h = DefaultOfAny(name)) return h->default_value;
             throw py::attribute_error(absl::StrCat("OptimizerSpec has no attribute '", attr, "'"));
           })
      .def("with_schedule", [](const OptimizerSpec& s, const LrSchedule& schedule) {
             OptimizerSpec out = s;
             ThrowIfError(EncodeLrSchedule(schedule, &out));
             return out;
           }, "schedule"_a, "A copy of this spec with the learning-rate schedule (replacing any).")
      .def_property_readonly("schedule", [](const OptimizerSpec& s) { return ValueOrThrow(DecodeLrSchedule(s)); },
                             "The learning-rate schedule (a constant one when there is none).")
      .def("__repr__", &OptimizerSpec::ToString);

  // The schedule as the C++ update rules evaluate it (paddle_like/optim/lr_schedule.h);
  // paddle_like.optim.lr_scheduler builds these.
  py::class_<LrSchedule>(m, "LrSchedule")
      .def(py::init([](const std::string& kind, int64_t step_size, double gamma, int64_t t_max, double eta_min_factor,
                       std::vector<std::pair<int64_t, double>> points, int64_t warmup_steps, double warmup_factor) {
             static const std::map<std::string, LrSchedule::Kind> kinds = {
                 {"constant", LrSchedule::Kind::kConstant}, {"step", LrSchedule::Kind::kStep},
                 {"exponential", LrSchedule::Kind::kExponential}, {"cosine", LrSchedule::Kind::kCosine},
                 {"piecewise", LrSchedule::Kind::kPiecewise}};
             auto it = kinds.find(kind);
             if (it == kinds.end()) {
               throw py::value_error(absl::StrCat("schedule kind '", kind,
                                                  "' is not constant, step, exponential, cosine or piecewise"));
             }
             LrSchedule s;
             s.kind = it->second;
             s.step_size = step_size;
             s.gamma = gamma;
             s.t_max = t_max;
             s.eta_min_factor = eta_min_factor;
             s.points = std::move(points);
             s.warmup_steps = warmup_steps;
             s.warmup_factor = warmup_factor;
             OptimizerSpec probe;
             ThrowIfError(EncodeLrSchedule(s, &probe));  // validates, naming the field
             return s;
           }),
           "kind"_a = "constant", "step_size"_a = 1, "gamma"_a = 1.0, "t_max"_a = 1, "eta_min_factor"_a = 0.0,
           "points"_a = std::vector<std::pair<int64_t, double>>{}, "warmup_steps"_a = 0, "warmup_factor"_a = 0.0)
      .def("factor", &LrSchedule::Factor, "k"_a, "The rate's factor after k earlier updates.")
      .def_property_readonly("is_constant", &LrSchedule::is_constant)
      .def("__repr__", &LrSchedule::ToString);

  m.def("optimizer_names", &OptimizerNames, "The registered optimizers, sorted.");
  m.def("optimizer_slots", [](const std::string& kind) {
    return ValueOrThrow(FindOptimizer(ValueOrThrow(ParseOptimizerKind(kind)).name()))->slots;
  }, "kind"_a, "The names of an optimizer's state slots, in state order.");

  py::class_<BoundOptimizer>(m, "Optimizer")
      .def(py::init([](std::shared_ptr<Module> module, const OptimizerSpec& spec) {
             BoundOptimizer b;
             b.module = module;
             b.optimizer = ValueOrThrow(Optimizer::Create(module.get(), spec));
             return b;
           }),
           "module"_a, "spec"_a)
      .def("step", [](BoundOptimizer& b) {
        Status s;
        {
          py::gil_scoped_release release;
          s = b.optimizer->Step();
        }
        ThrowIfError(s, NotFoundAs::kKey);
      }, "Applies the accumulated gradients, then clears them (releases the GIL).")
      .def("zero_grad", [](BoundOptimizer& b) { b.optimizer->ZeroGrad(); })
      .def_property("lr", [](const BoundOptimizer& b) { return b.optimizer->spec().learning_rate; },
                    [](BoundOptimizer& b, float lr) {
                      // 0 is allowed: a schedule may anneal to it (cosine with eta_min 0).
                      if (!(lr >= 0) || !std::isfinite(lr)) {
                        throw py::value_error(absl::StrCat("lr must be a finite number >= 0, got ", lr));
                      }
                      b.optimizer->set_learning_rate(lr);
                    })
      .def_property_readonly("steps", [](const BoundOptimizer& b) { return b.optimizer->steps(); })
      .def("_export_state", [](const BoundOptimizer& b) {
        const OptimizerState st = b.optimizer->ExportState();
        py::list dense, rows;
        for (const OptimizerState::Dense& d : st.dense) {
          dense.append(py::make_tuple(d.name, d.step, ArrayViews(d.slots)));
        }
        for (const OptimizerState::Rows& r : st.rows) {
          rows.append(py::make_tuple(r.name, ArrayView(r.ids), ArrayView(r.steps), ArrayViews(r.slots)));
        }
        return py::make_tuple(st.spec, st.steps, dense, rows);
      }, "(spec, steps, [(name, step, [slot])], [(name, ids, steps, [slot])]): copies, slots in "
         "update_rules.h order (see OptimizerState).")
      .def("_import_state", [](BoundOptimizer& b, const OptimizerSpec& spec, int64_t steps,
                               const std::vector<std::tuple<std::string, int64_t, py::list>>& dense,
                               const std::vector<std::tuple<std::string, py::object, py::object, py::list>>& rows) {
        OptimizerState st;
        st.spec = spec;
        st.steps = steps;
        for (const auto& [name, step, slots] : dense) {
          st.dense.push_back({name, step, SlotTensors(slots, name)});
        }
        for (const auto& [name, ids, row_steps, slots] : rows) {
          st.rows.push_back({name, TensorFromPython(ids, "'" + name + "' ids", DType::kInt64),
                             TensorFromPython(row_steps, "'" + name + "' step", DType::kInt64),
                             SlotTensors(slots, name)});
        }
        ThrowIfError(b.optimizer->ImportState(st), NotFoundAs::kKey);
      }, "spec"_a, "steps"_a, "dense"_a, "rows"_a,
         "Installs what _export_state returns, after checking all of it (nothing changes on error).")
      .def_property_readonly("spec", [](const BoundOptimizer& b) { return b.optimizer->spec(); });

  m.def("save_module", [](std::shared_ptr<Module> module, const std::string& path) {
    Status s;
    {
      py::gil_scoped_release release;
      s = SaveModule(path, *module);
    }
    ThrowIfError(s);
  }, "module"_a, "path"_a);
  m.def("load_module", [](std::shared_ptr<Module> module, const std::string& path) {
    RequireFile(path);
    Status s;
    {
      py::gil_scoped_release release;
      s = LoadModule(path, *module);
    }
    // The file exists: a NOT_FOUND now is a parameter missing from it.
    ThrowIfError(s, NotFoundAs::kKey);
  }, "module"_a, "path"_a);
  m.def("load_state", [](std::shared_ptr<Module> module, const std::map<std::string, py::object>& state,
                         bool keep_missing) {
    std::map<std::string, Tensor> tensors;
    for (const auto& [name, obj] : state) tensors[name] = TensorFromPython(obj, "state_dict['" + name + "']");
    Status s;
    {
      py::gil_scoped_release release;
      s = LoadModuleTensors(tensors, *module, "load_state_dict",
                            keep_missing ? MissingParameters::kKeep : MissingParameters::kError);
    }
    ThrowIfError(s, NotFoundAs::kKey);
  }, "module"_a, "state"_a, "keep_missing"_a,
     "Copies {name: array} (state_dict's names and layout) into the module's parameters after "
     "checking all of them; a parameter absent from `state` is a KeyError unless keep_missing.");
  m.def("save_tensors", [](const std::string& path, const std::vector<std::pair<std::string, py::object>>& items,
                           const std::map<std::string, std::string>& metadata) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, obj] : items) tensors.emplace_back(name, TensorFromPython(obj, "tensor '" + name + "'"));
    Status s;
    {
      py::gil_scoped_release release;
      s = SaveTensors(path, tensors, metadata);
    }
    ThrowIfError(s);
  }, "path"_a, "tensors"_a, "metadata"_a = std::map<std::string, std::string>());
  m.def("load_tensors", [](const std::string& path) {
    StatusOr<TensorFile> file = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      file = LoadTensors(path);
    }
    TensorFile f = ValueOrThrow(std::move(file));
    py::dict tensors;
    for (const std::string& name : f.order) tensors[py::str(name)] = ArrayView(f.tensors.at(name));
    return py::make_tuple(tensors, f.metadata);
  }, "path"_a);
}

}  // namespace pl::python
