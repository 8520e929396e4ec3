// paddle_like._C.elastic: the elastic controller's decision procedure
// (paddle_like/elastic/elastic_policy.h), so the Kubernetes driver decides with the same
// code as pl-autoscale and pl-sim-elastic. Errors keep the C++ messages (status_bridge.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "paddle_like/elastic/elastic_policy.h"
#include "python/src/bindings.h"
#include "python/src/status_bridge.h"

namespace pl::python {

namespace py = pybind11;

void RegisterElastic(py::module_& m) {
  using elastic::ElasticPolicy;
  using elastic::JobDecision;
  using elastic::JobSpec;
  using elastic::Plan;
  py::module_ e = m.def_submodule("elastic", "the elastic controller's decision procedure");

  py::class_<JobDecision>(e, "JobDecision", "One job's target after a decision.")
      .def_readonly("name", &JobDecision::name)
      .def_readonly("previous", &JobDecision::previous)
      .def_readonly("target", &JobDecision::target)
      .def_readonly("share", &JobDecision::share)
      .def_readonly("running", &JobDecision::running)
      .def_readonly("admitted", &JobDecision::admitted)
      .def_property_readonly("reason", [](const JobDecision& d) { return std::string(elastic::ReasonName(d.reason)); })
      .def_property_readonly("changed", &JobDecision::changed)
      .def("__repr__", [](const JobDecision& d) {
        return "JobDecision(" + d.name + ": " + std::to_string(d.previous) + "->" + std::to_string(d.target) + ", " +
               elastic::ReasonName(d.reason) + ", share " + std::to_string(d.share) + ")";
      });

  py::class_<Plan>(e, "Plan", "Every job's target at one decision.")
      .def_readonly("now_ms", &Plan::now_ms)
      .def_readonly("capacity", &Plan::capacity)
      .def_readonly("assigned", &Plan::assigned)
      .def_readonly("sum_minimums", &Plan::sum_minimums)
      .def_readonly("over_committed", &Plan::over_committed)
      .def_readonly("jobs", &Plan::jobs)
      .def("summary", &Plan::Summary);

  py::class_<ElasticPolicy>(e, "ElasticPolicy",
                            "Decides how many trainers each elastic job runs (see elastic_policy.h). Not thread-safe.")
      .def(py::init([](int64_t cooldown_ms, int64_t settle_ms) {
             if (cooldown_ms < 0 || settle_ms < 0) {
               throw py::value_error("ElasticPolicy: cooldown_ms and settle_ms must be >= 0");
             }
             return ElasticPolicy(elastic::PolicyOptions{cooldown_ms, settle_ms});
           }),
           py::arg("cooldown_ms") = 5000, py::arg("settle_ms") = 1000)
      .def("add_job",
           [](ElasticPolicy& p, const std::string& name, int min_trainers, int max_trainers, int priority) {
             ThrowIfError(p.AddJob(JobSpec{name, min_trainers, max_trainers, priority}), NotFoundAs::kKey);
           },
           py::arg("name"), py::arg("min_trainers"), py::arg("max_trainers"), py::arg("priority") = 0)
      .def("update_job",
           [](ElasticPolicy& p, const std::string& name, int min_trainers, int max_trainers, int priority) {
             ThrowIfError(p.UpdateJob(JobSpec{name, min_trainers, max_trainers, priority}), NotFoundAs::kKey);
           },
           py::arg("name"), py::arg("min_trainers"), py::arg("max_trainers"), py::arg("priority") = 0)
      .def("remove_job", [](ElasticPolicy& p, const std::string& name) {
        ThrowIfError(p.RemoveJob(name), NotFoundAs::kKey);
      }, py::arg("name"))
      .def("set_capacity", [](ElasticPolicy& p, int slots) { ThrowIfError(p.SetCapacity(slots)); }, py::arg("slots"))
      .def("report_running", [](ElasticPolicy& p, const std::string& name, int running) {
        ThrowIfError(p.ReportRunning(name, running), NotFoundAs::kKey);
      }, py::arg("name"), py::arg("running"))
      .def("adopt", [](ElasticPolicy& p, const std::string& name, int trainers) {
        ThrowIfError(p.Adopt(name, trainers), NotFoundAs::kKey);
      }, py::arg("name"), py::arg("trainers"))
      .def("has_job", &ElasticPolicy::HasJob, py::arg("name"))
      .def_property_readonly("capacity", &ElasticPolicy::capacity)
      .def("decide", &ElasticPolicy::Decide, py::arg("now_ms"));
}

}  // namespace pl::python
