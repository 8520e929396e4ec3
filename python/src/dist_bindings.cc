// The trainer side of a distributed job for Python (paddle_like/client/master_client.h,
// paddle_like/client/param_client.h) and the trainer's task loop (paddle_like/client/task_loop.h,
// the one pl-trainer runs), which paddle_like/distributed.py drives with Python callbacks.
//
// Stop signals: install_stop_handlers() puts C handlers on SIGTERM and SIGINT that set
// one flag, which the clients' retry loops watch (so a stop interrupts a wait on a dead
// peer) and the Python loop polls between steps, and on SIGUSR1 one that ends the task
// loop before its next lease (a launcher shrinking the job: the task in hand is
// finished, nothing is trained twice; task_loop.h); restore_stop_handlers() puts the
// previous handlers (Python's) back. A Python-level handler would not do: it runs only
// when the main thread returns to the interpreter, not during a blocking C++ call.
//
// Every call that waits on the network or decodes data releases the GIL.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/data/dataset.h"
#include "python/src/bindings.h"
#include "python/src/data_bindings.h"
#include "python/src/status_bridge.h"
#include "paddle_like/client/heartbeat.h"
#include "paddle_like/client/local_steps.h"
#include "paddle_like/client/master_client.h"
#include "paddle_like/client/task_loop.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/rpc/tls.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_leave{false};
struct sigaction g_old_term, g_old_int, g_old_usr1;
bool g_handlers_installed = false;

void OnStopSignal(int) { g_stop.store(true); }
void OnLeaveSignal(int) { g_leave.store(true); }

void InstallStopHandlers() {
  if (g_handlers_installed) return;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGINT, &sa, &g_old_int);
  struct sigaction leave {};
  leave.sa_handler = OnLeaveSignal;
  sigemptyset(&leave.sa_mask);
  sigaction(SIGUSR1, &leave, &g_old_usr1);
  g_handlers_installed = true;
}

void RestoreStopHandlers() {
  if (!g_handlers_installed) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_handlers_installed = false;
}

// What a task loop came to, for Python (task_loop.h's TaskLoopResult).
py::dict ResultDict(const TaskLoopResult& r) {
  py::dict d;
  d["tasks_done"] = r.tasks_done;
  d["job_done"] = r.job_done;
  d["stopped"] = r.stopped;
  d["left"] = r.left;
  d["waited_s"] = r.waited_s;
  return d;
}

template <typename T, typename Fn>
T NoGil(Fn fn) {
  StatusOr<T> out = absl::UnknownError("not run");
  {
    py::gil_scoped_release release;
    out = fn();
  }
  return ValueOrThrow(std::move(out));
}

void NoGilStatus(const std::function<Status()>& fn, NotFoundAs not_found = NotFoundAs::kFile) {
  Status s;
  {
    py::gil_scoped_release release;
    s = fn();
  }
  ThrowIfError(s, not_found);
}

// A leased task: a group of record chunks.
struct PyTask {
  proto::Task task;
  std::vector<ChunkInfo> Chunks() const { return ChunksOfTask(task); }
};

class PyMasterClient {
 public:
  PyMasterClient(const std::string& address, const std::string& name, double give_up_after_s)
      : client_(address, name, absl::Seconds(give_up_after_s)) {
    client_.set_stop_flag(&g_stop);
  }
  ~PyMasterClient() {
    py::gil_scoped_release release;  // the heartbeat thread may be mid-call
    leaser_.reset();
    heartbeat_.reset();
  }

  MasterClient& client() { return client_; }

  py::dict Register() {
    proto::RegisterTrainerResponse r =
        NoGil<proto::RegisterTrainerResponse>([&] { return client_.Register(); });
    if (!heartbeat_) heartbeat_ = std::make_unique<HeartbeatThread>(&client_);
    py::dict d;
    d["trainer_id"] = r.trainer_id();
    d["num_pservers"] = r.num_pservers();
    d["lease_ms"] = r.lease_ms();
    return d;
  }

  py::tuple GetTask() {
    proto::GetTaskResponse r = NoGil<proto::GetTaskResponse>([&] { return client_.GetTask(); });
    switch (r.result()) {
      case proto::GetTaskResponse::TASK: {
        if (heartbeat_) heartbeat_->set_task(r.task().id());
        return py::make_tuple("task", PyTask{r.task()});
      }
      case proto::GetTaskResponse::WAIT:
        return py::make_tuple("wait", py::none());
      default:
        return py::make_tuple("job_done", py::none());
    }
  }

  void TaskFinished(const PyTask& t, int64_t num_samples) {
    if (heartbeat_) heartbeat_->set_task(0);
    NoGilStatus([&] { return client_.TaskFinished(t.task, num_samples); });
  }
  void TaskFailed(const PyTask& t, const std::string& reason, bool returned) {
    if (heartbeat_) heartbeat_->set_task(0);
    NoGilStatus([&] { return client_.TaskFailed(t.task, reason, returned); });
  }
  void Leave() {
    {
      py::gil_scoped_release release;
      heartbeat_.reset();
    }
    NoGilStatus([&] { return client_.Leave(); });
  }
  py::dict JobStatus() {
    proto::JobStatusResponse s = NoGil<proto::JobStatusResponse>([&] { return client_.JobStatus(); });
    py::dict d;
    d["pass"] = s.pass();
    d["num_passes"] = s.num_passes();
    d["todo"] = s.todo();
    d["pending"] = s.pending();
    d["done"] = s.done();
    d["failed"] = s.failed();
    d["samples_done"] = s.samples_done();
    d["job_done"] = s.job_done();
    d["live_trainers"] = s.live_trainers();
    return d;
  }
  std::string HeartbeatError() { return heartbeat_ ? heartbeat_->last_error() : ""; }

  // The task loop one step at a time (TaskLeaser, paddle_like/client/task_loop.h), for
  // a script's own loop: lease() -> Task | None (job done, stopped or a task given
  // back), then report(kind, value) with kind "trained" (value: samples), "interrupted"
  // (value: samples pushed), "bad_task" (value: why) or "error" (value: message).
  py::object Lease(py::object log) {
    if (!heartbeat_) throw py::value_error("register() first");
    if (!leaser_) {
      std::function<void(const std::string&)> log_fn;
      if (!log.is_none()) {
        log_fn = [log](const std::string& line) {
          py::gil_scoped_acquire acquire;
          log(line);
        };
      }
      leaser_ = std::make_unique<TaskLeaser>(client_, *heartbeat_, g_stop, std::move(log_fn), &g_leave);
    }
    std::optional<proto::Task> task =
        NoGil<std::optional<proto::Task>>([&] { return leaser_->Next(); });
    if (!task.has_value()) return py::none();
    return py::cast(PyTask{*std::move(task)});
  }
  void Report(const std::string& kind, py::object value) {
    if (!leaser_) throw py::value_error("lease() first");
    StatusOr<TaskOutcome> outcome = absl::UnknownError("");
    if (kind == "trained") {
      outcome = TaskOutcome::Trained(value.cast<int64_t>());
    } else if (kind == "interrupted") {
      outcome = TaskOutcome::Interrupted(value.is_none() ? 0 : value.cast<int64_t>());
    } else if (kind == "bad_task") {
      outcome = TaskOutcome::BadTask(py::str(value).cast<std::string>());
    } else if (kind == "error") {
      outcome = absl::InternalError(py::str(value).cast<std::string>());
    } else {
      throw py::value_error(absl::StrCat("report: '", kind, "' is not trained, interrupted, bad_task or error"));
    }
    NoGilStatus([&] { return leaser_->Report(outcome); });
  }
  py::dict LeaseResult() const { return ResultDict(leaser_ ? leaser_->result() : TaskLoopResult{}); }

  // RunTaskLoop (paddle_like/client/task_loop.h) with Python callbacks, run with the GIL:
  // train_task(Task) -> ("trained", samples) | ("interrupted", None) | ("bad_task", why);
  // before_lease() and log(line) may be None. An exception from train_task fails the
  // task and is raised here, unless a stop came meanwhile (the task is given back).
  py::dict RunLoop(py::function train_task, py::object before_lease, py::object log) {
    if (!heartbeat_) throw py::value_error("register() first");
    std::optional<py::error_already_set> raised;  // destroyed with the GIL held
    TaskLoopCallbacks callbacks;
    callbacks.train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
      py::gil_scoped_acquire acquire;
      try {
        py::tuple out = train_task(PyTask{task});
        const std::string kind = out[0].cast<std::string>();
        if (kind == "trained") return TaskOutcome::Trained(out[1].cast<int64_t>());
        if (kind == "interrupted") {  // ("interrupted", samples already pushed) or ("interrupted", None)
          return TaskOutcome::Interrupted(out.size() > 1 && !out[1].is_none() ? out[1].cast<int64_t>() : 0);
        }
        if (kind == "bad_task") return TaskOutcome::BadTask(py::str(out[1]).cast<std::string>());
        return absl::InvalidArgumentError(
            absl::StrCat("train_task returned '", kind, "': expected trained, interrupted or bad_task"));
      } catch (py::error_already_set& e) {
        const std::string what = e.what();
        raised.emplace(std::move(e));
        return absl::InternalError(what);
      }
    };
    if (!before_lease.is_none()) {
      callbacks.before_lease = [&before_lease] {
        py::gil_scoped_acquire acquire;
        before_lease();
      };
    }
    if (!log.is_none()) {
      callbacks.log = [&log](const std::string& line) {
        py::gil_scoped_acquire acquire;
        log(line);
      };
    }
    StatusOr<TaskLoopResult> result = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      result = RunTaskLoop(client_, *heartbeat_, g_stop, callbacks, &g_leave);
    }
    if (!result.ok() && raised) throw std::move(*raised);
    return ResultDict(ValueOrThrow(std::move(result)));
  }

 private:
  MasterClient client_;
  std::unique_ptr<HeartbeatThread> heartbeat_;
  std::unique_ptr<TaskLeaser> leaser_;  // after heartbeat_, which it points at
};

class PyParameterClient {
 public:
  PyParameterClient(std::shared_ptr<Module> module, std::shared_ptr<PyMasterClient> master,
                    int num_pservers, const OptimizerSpec& spec, uint64_t seed, bool sync,
                    double give_up_after_s, bool shared_memory, bool defer_apply, const std::string& wire_dtype,
                    int dense_link_lanes)
      : module_(std::move(module)), master_(std::move(master)), sync_(sync) {
    ParameterClientOptions o =
        ClientOptions(num_pservers, spec, seed, sync, give_up_after_s, shared_memory, wire_dtype, dense_link_lanes);
    o.defer_apply = defer_apply;
    MasterClient* mc = &master_->client();
    auto resolve = [mc, num_pservers]() -> StatusOr<std::vector<std::string>> {
      return mc->PserverAddresses(num_pservers);
    };
    client_ = std::make_unique<ParameterClient>(module_.get(), o, resolve, &g_stop);
  }
  ~PyParameterClient() {
    py::gil_scoped_release release;
    local_.reset();
    client_.reset();
  }

  void Connect() { NoGilStatus([&] { return client_->Connect(); }); }

  // `sparse_ids`: {table name: int64 ids}.
  void Pull(const std::map<std::string, py::array_t<int64_t, py::array::c_style | py::array::forcecast>>& sparse_ids) {
    SparseIds ids;
    for (const auto& [name, arr] : sparse_ids) {
      ids.emplace_back(name, std::vector<int64_t>(arr.data(), arr.data() + arr.size()));
    }
    NoGilStatus([&] { return client_->Pull(ids); }, NotFoundAs::kKey);
  }
  void Push(int64_t num_samples) { NoGilStatus([&] { return client_->Push(num_samples); }); }
  void SetTrainerId(int64_t id) { client_->set_trainer_id(id); }

  // Local steps (paddle_like/client/local_steps.h): `k` optimizer steps on this copy,
  // then the change pushed; rounds overlap with the next in async mode.
  void EnableLocalSteps(int k) {
    if (Status v = ValidateLocalSteps(k, client_->keys(), /*pipelined=*/false); !v.ok()) {
      throw py::value_error(absl::StrCat("local_steps: ", v.message()));
    }
    local_ = std::make_unique<LocalSteps>(client_.get(), k, /*overlap=*/!sync_);
  }
  void LocalStart() {
    NoGilStatus([&] { return Local().started() ? absl::OkStatus() : Local().Start(); });
  }
  bool LocalEndStep(int64_t num_samples) {
    LocalSteps& local = Local();
    // Async: a round's change counts 1 / live trainers (local_steps.h).
    if (!sync_ && master_ != nullptr) local.set_merge_scale(1.0f / std::max(1, master_->client().live_trainers()));
    return NoGil<bool>([&] { return local.EndStep(num_samples); });
  }
  bool LocalFinish() {
    return NoGil<bool>([&] { return Local().Finish(); });
  }
  double LastStaleness() const { return client_->last_staleness(); }
  py::dict Counters() const { return TrafficCountersToDict(client_->counters()); }
  std::vector<std::string> Transports() const { return client_->Transports(); }

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<PyMasterClient> master_;  // the resolver calls it
  const bool sync_;
  std::unique_ptr<ParameterClient> client_;
  std::unique_ptr<LocalSteps> local_;  // after client_, which it points at

  LocalSteps& Local() {
    if (local_ == nullptr) throw py::value_error("local steps were not enabled (enable_local_steps(k))");
    return *local_;
  }
};

}  // namespace

const std::atomic<bool>* StopFlag() { return &g_stop; }

ParameterClientOptions ClientOptions(int num_pservers, const OptimizerSpec& spec, uint64_t seed, bool sync,
                                     double give_up_after_s, bool shared_memory, const std::string& wire_dtype,
                                     int dense_link_lanes) {
  if (num_pservers < 1) throw py::value_error(absl::StrCat("num_pservers must be >= 1, got ", num_pservers));
  if (dense_link_lanes < -1 || dense_link_lanes > kMaxDenseLinkLanes) {
    throw py::value_error(
        absl::StrCat("dense_link_lanes must be -1 (default), 0 (gRPC) or 1..", kMaxDenseLinkLanes, ", got ", dense_link_lanes));
  }
  StatusOr<WireDtype> wire = ParseWireDtype(wire_dtype);
  if (!wire.ok()) throw py::value_error(std::string(wire.status().message()));
  ParameterClientOptions o;
  o.num_pservers = num_pservers;
  o.optimizer = spec;
  o.seed = seed;
  o.sync = sync;
  o.give_up_after = absl::Seconds(give_up_after_s);
  o.shared_memory = shared_memory;
  o.wire_dtype = *wire;
  o.dense_link_lanes = dense_link_lanes;
  return o;
}

py::dict TrafficCountersToDict(const TrafficCounters& c) {
  py::dict d;
  d["pulls"] = c.pulls;
  d["pushes"] = c.pushes;
  d["sparse_rows_pulled"] = c.sparse_rows_pulled;
  d["sparse_rows_pushed"] = c.sparse_rows_pushed;
  d["bytes_pulled"] = c.bytes_pulled;
  d["bytes_pushed"] = c.bytes_pushed;
  d["retries"] = c.retries;
  d["shm_attaches"] = c.shm_attaches;
  return d;
}

void RegisterDistributed(py::module_& m) {
  m.def(
      "configure_transport",
      [](const std::string& tls_dir) {
        if (tls_dir.empty()) {
          rpc::UseInsecureTransport();
        } else {
          ThrowIfError(rpc::ConfigureTransportSecurity(tls_dir));
        }
        return rpc::TransportDescription();
      },
      "tls_dir"_a,
      "Mutual TLS for every channel this process makes from now on, with DIR/{tls.crt, tls.key, ca.crt} "
      "(empty: insecure); returns 'mutual TLS (DIR)' or 'insecure'.");
  m.def("install_stop_handlers", &InstallStopHandlers,
        "SIGTERM/SIGINT set the stop flag, SIGUSR1 the leave flag (instead of Python's handlers) until restore_stop_handlers().");
  m.def("restore_stop_handlers", &RestoreStopHandlers);
  m.def("stop_requested", [] { return g_stop.load(); });
  m.def("request_stop", [] { g_stop.store(true); });
  m.def("clear_stop", [] {
    g_stop.store(false);
    g_leave.store(false);
  });
  m.def("leave_requested", [] { return g_leave.load(); });
  m.def("request_leave", [] { g_leave.store(true); }, "Ends the task loop before its next lease (SIGUSR1).");

  py::class_<PyTask>(m, "Task")
      .def_property_readonly("id", [](const PyTask& t) { return t.task.id(); })
      .def_property_readonly("pass_", [](const PyTask& t) { return t.task.pass(); })
      .def_property_readonly("num_chunks", [](const PyTask& t) { return t.task.chunks_size(); })
      .def_property_readonly("num_records", [](const PyTask& t) {
        int64_t n = 0;
        for (const auto& c : t.task.chunks()) n += c.num_records();
        return n;
      })
      .def_property_readonly("holds_indices", [](const PyTask& t) {
        const std::vector<ChunkInfo> chunks = t.Chunks();
        return !chunks.empty() && IsIndexChunk(chunks.front());
      }, "True for a job cut with --data indices:N (the task names sample indices, not records)")
      .def("indices", [](const PyTask& t) {
        const std::vector<ChunkInfo> chunks = t.Chunks();
        int64_t n = 0;
        for (const ChunkInfo& c : chunks) {
          if (!IsIndexChunk(c)) {
            throw py::value_error(absl::StrCat("task ", t.task.id(), " holds records of '", c.path,
                                               "', not sample indices: use task.load(kind), or cut the job "
                                               "with --data indices:N"));
          }
          n += c.num_records;
        }
        // The shape-vector constructor: pybind11 2.10's one-count one makes stride-0
        // arrays under NumPy 2 (tests/python/test_numpy.py).
        py::array_t<int64_t> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(n)});
        int64_t* p = out.mutable_data();
        for (const ChunkInfo& c : chunks) {
          for (int64_t i = 0; i < c.num_records; ++i) *p++ = c.offset + i;
        }
        return out;
      }, "The sample indices the task holds (int64, ascending), for a job cut with --data indices:N.")
      .def("load", [](const PyTask& t, const std::string& kind) {
        const SampleLayout layout = LayoutFromKind(kind);
        const std::vector<ChunkInfo> chunks = t.Chunks();
        Examples e = NoGil<Examples>([&] { return LoadRecords(chunks, layout); });
        return ExamplesToDict(e);
      }, "kind"_a, "Decodes the task's records (releases the GIL); same dict as load_records.")
      .def("__repr__", [](const PyTask& t) {
        return absl::StrCat("Task(id=", t.task.id(), ", pass=", t.task.pass(), ", chunks=", t.task.chunks_size(), ")");
      });

  py::class_<PyMasterClient, std::shared_ptr<PyMasterClient>>(m, "MasterClient")
      .def(py::init<const std::string&, const std::string&, double>(), "address"_a, "name"_a,
           "give_up_after_s"_a = 300.0)
      .def("register", &PyMasterClient::Register, "Registers and starts the heartbeat thread.")
      .def("get_task", &PyMasterClient::GetTask, "('task', Task) | ('wait', None) | ('job_done', None)")
      .def("task_finished", &PyMasterClient::TaskFinished, "task"_a, "num_samples"_a)
      .def("task_failed", &PyMasterClient::TaskFailed, "task"_a, "reason"_a, "returned"_a)
      .def("leave", &PyMasterClient::Leave)
      .def("run_task_loop", &PyMasterClient::RunLoop, "train_task"_a, "before_lease"_a = py::none(),
           "log"_a = py::none(), "The trainer's task loop (paddle_like/client/task_loop.h); a dict of its result.")
      .def("lease", &PyMasterClient::Lease, "log"_a = py::none(),
           "The next task (Task), or None once the job is done, a stop was requested or a task given back.")
      .def("report", &PyMasterClient::Report, "kind"_a, "value"_a,
           "What became of the leased task: trained/interrupted/bad_task/error with samples, samples pushed or why.")
      .def("lease_result", &PyMasterClient::LeaseResult, "{tasks_done, job_done, stopped, waited_s} of lease()")
      .def("job_status", &PyMasterClient::JobStatus)
      .def_property_readonly("trainer_id", [](PyMasterClient& c) { return c.client().trainer_id(); })
      .def_property_readonly("heartbeat_error", &PyMasterClient::HeartbeatError);

  py::class_<PyParameterClient>(m, "ParameterClient")
      .def(py::init<std::shared_ptr<Module>, std::shared_ptr<PyMasterClient>, int, const OptimizerSpec&,
                    uint64_t, bool, double, bool, bool, const std::string&, int>(),
           "module"_a, "master"_a, "num_pservers"_a, "spec"_a, "seed"_a = 1, "sync"_a = false,
           "give_up_after_s"_a = 300.0, "shared_memory"_a = true, "defer_apply"_a = false,
           "wire_dtype"_a = "float32", "dense_link_lanes"_a = -1)
      .def("connect", &PyParameterClient::Connect)
      .def("pull", &PyParameterClient::Pull, "sparse_ids"_a)
      .def("push", &PyParameterClient::Push, "num_samples"_a)
      .def("set_trainer_id", &PyParameterClient::SetTrainerId)
      .def("enable_local_steps", &PyParameterClient::EnableLocalSteps, "k"_a,
           "Local steps: k optimizer steps on this copy, then the change pushed (dense models only).")
      .def("local_start", &PyParameterClient::LocalStart, "Pulls the first round's base (once).")
      .def("local_end_step", &PyParameterClient::LocalEndStep, "num_samples"_a,
           "After a local optimizer step: True when it ended a round (its change pushed, the parameters merged).")
      .def("local_finish", &PyParameterClient::LocalFinish,
           "Pushes an unfinished round's change and waits for its pull (the end of a task).")
      .def("counters", &PyParameterClient::Counters)
      .def("last_staleness", &PyParameterClient::LastStaleness,
           "Async: updates of other trainers the pservers applied between the last push's pull and the push "
           "(mean over pservers); 0 in sync mode.")
      .def("transports", &PyParameterClient::Transports,
           "How each pserver's dense traffic travels: 'shared memory (N MB)', 'dense link (K lanes each way, N MB)' "
           "or 'gRPC (why)'.");
}

}  // namespace pl::python
