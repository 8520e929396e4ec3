#include "trainer/dist_trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/process/cpu_times.h"
#include "trainer/batching.h"
#include "trainer/consistent_steps.h"
#include "trainer/example_data.h"
#include "paddle_like/client/exchange_strategy.h"
#include "paddle_like/client/heartbeat.h"
#include "paddle_like/client/local_steps.h"
#include "paddle_like/client/master_client.h"
#include "paddle_like/client/task_loop.h"
#include "paddle_like/client/param_client.h"
#include "trainer/step_backend.h"

namespace pl {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_leave{false};  // SIGUSR1: leave after the task in hand

void OnStopSignal(int) { g_stop.store(true); }
void OnLeaveSignal(int) { g_leave.store(true); }

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// After a local step's optimizer update: the round's change pushed when it is the K-th
// step or the task's last (the master hears of a task only once all of it is pushed).
// The merged parameters it pulls go to the backend at the next step.
Status EndLocalStep(LocalSteps& local, StepBackend& backend, int64_t samples, bool task_ends) {
  if (local.round_ends_next() || task_ends) PL_RETURN_IF_ERROR(backend.ExportParameters());
  bool ended = false;
  if (samples > 0) {
    PL_ASSIGN_OR_RETURN(ended, local.EndStep(samples));
  }
  if (task_ends && !ended) return local.Finish().status();
  return absl::OkStatus();
}

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  struct sigaction leave {};
  leave.sa_handler = OnLeaveSignal;
  sigemptyset(&leave.sa_mask);
  sigaction(SIGUSR1, &leave, nullptr);
}

bool StopRequested() { return g_stop.load(); }

StatusOr<DistResult> RunDistributedTrainer(const DistTrainerOptions& o, ExampleModel& model,
                                           std::ostream& log) {
  // Before anything starts: a --local_steps the model or mode cannot honour.
  PL_RETURN_IF_ERROR(ValidateLocalSteps(o.local_steps, *KeyStore::Of(model.module()),
                                        PicksPipelined({o.sync, o.pipeline}, model.module())));
  const absl::Duration give_up = absl::Seconds(o.give_up_after_s);
  MasterClient master(o.master_address, o.name, give_up);
  master.set_stop_flag(&g_stop);
  // A job of virtual trainers fixes its micro-batch from its first trainer's; others ignore it.
  master.set_micro_batch(o.batch_size);
  PL_ASSIGN_OR_RETURN(proto::RegisterTrainerResponse reg, master.Register());
  const int num_pservers = reg.num_pservers();
  log << absl::StrFormat("registered as trainer %d with the master at %s (%d pservers, lease %d ms)", reg.trainer_id(), o.master_address, num_pservers, reg.lease_ms())
      << std::endl;
  // A job of virtual trainers (docs/consistent-training.md): sync steps of micro-batches.
  const bool consistent = reg.has_schedule();
  if (consistent && o.local_steps > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--local_steps ", o.local_steps, ": this job trains ",
                                                   reg.schedule().virtual_trainers(), " virtual trainers, whose "
                                                   "steps are the pservers' (use --local_steps 1)"));
  }
  const ExchangeChoice choice{o.sync || consistent, o.pipeline && !consistent};
  const bool pipelined = PicksPipelined(choice, model.module());
  HeartbeatThread heartbeat(&master, [](const Status& s) { pl::log::Warning(absl::StrCat("heartbeat failed: ", s.message())); });

  PL_ASSIGN_OR_RETURN(std::unique_ptr<StepBackend> backend, MakeStepBackend(o.device, model, log));
  ParameterClientOptions pco;
  pco.num_pservers = num_pservers;
  // The GPU backend keeps the host gradients page-locked by address; on the CPU the
  // pipeline may hand the tensors themselves to the exchange.
  pco.swap_gradients_in_exchange = backend->name() == "cpu";
  // Local steps on a GPU: the host gradient buffers only carry each round's change
  // (the backward pass writes the device's), so nothing needs them zeroed after a push.
  pco.zero_gradients_after_push = !(o.local_steps > 1 && backend->name() != "cpu");
  pco.optimizer = o.optimizer;
  pco.seed = o.model_options.seed;
  pco.sync = o.sync || consistent;
  pco.virtual_trainers = consistent;
  pco.defer_apply = o.defer_apply;
  pco.shared_memory = o.shared_memory;
  pco.wire_dtype = o.wire_dtype;
  pco.dense_link_lanes = o.dense_link_lanes;
  pco.give_up_after = give_up;
  auto resolve = [&master, num_pservers]() -> StatusOr<std::vector<std::string>> {
    return master.PserverAddresses(num_pservers);
  };
  // Without the pipeline the trainer never computes while an exchange runs, so its
  // parameters can live in the shared-memory regions (no copies on its side); nor do
  // async local steps' rounds, which overlap with the next round. A GPU trainer's copies
  // run at the bus's speed from page-locked host buffers, which its own tensors are
  // (the H100 run of 2026-11-27: 0.74 ms of copies a cnn step unbound, 1.36 bound).
  const bool overlapped_rounds = o.local_steps > 1 && !o.sync;
  pco.bind_parameters_to_shared_memory = !pipelined && !overlapped_rounds && backend->name() == "cpu";
  ParameterClient params(&model.module(), pco, resolve, &g_stop);
  params.set_trainer_id(master.trainer_id());
  PL_RETURN_IF_ERROR(params.Connect());
  std::string why_not_pipelined;
  std::unique_ptr<ExchangeStrategy> exchange = MakeExchangeStrategy(&params, model.module(), choice, &why_not_pipelined);
  log << "connected to " << num_pservers << " pservers"
      << (pipelined ? " (traffic overlapped with computation)" : "") << std::endl;
  const std::vector<std::string> transports = params.Transports();
  for (size_t i = 0; i < transports.size(); ++i) {
    log << "pserver " << i << ": dense traffic over " << transports[i] << std::endl;
  }
  if (const int64_t bound = params.counters().bound_parameters; bound > 0) {
    int64_t dense = 0;
    for (const NamedParameter& np : model.module().NamedParameters()) dense += np.param->kind == ParamKind::kDense;
    log << "" << bound << " of " << dense
        << " dense parameters live in shared memory (one split over several pservers is copied)" << std::endl;
  }
  if (!why_not_pipelined.empty()) log << "--pipeline ignored: " << why_not_pipelined << std::endl;
  // --local_steps K > 1: the optimizer steps this trainer's copy (on its backend) and
  // every K-th step pushes the change; the exchange strategy then only pulls for an
  // evaluation.
  std::unique_ptr<Optimizer> local_optimizer;
  std::unique_ptr<LocalSteps> local;
  if (o.local_steps > 1) {
    PL_ASSIGN_OR_RETURN(local_optimizer, Optimizer::Create(&model.module(), o.optimizer));
    local = std::make_unique<LocalSteps>(&params, o.local_steps, /*overlap=*/overlapped_rounds);
    log << "local steps: " << o.local_steps << " optimizer steps (" << o.optimizer.ToString()
        << ") on this trainer between exchanges"
        << (overlapped_rounds ? ", each round's exchange overlapped with the next round" : "") << std::endl;
  }

  DistResult result;
  model.module().Train(true);
  double last_log = Now(), window_loss = 0;
  int64_t window_steps = 0, window_correct = 0, window_samples = 0;
  const double start = Now();
  const process::CpuTimes cpu_at_start = process::SelfCpuTimes();
  double compute_s = 0, exchange_s = 0;  // per step: forward/backward, then push and pull
  double copy_s = 0;  // of compute_s: parameters to the backend, gradients back (a GPU's copies)
  double data_s = 0;  // each task's records read and decoded

  // One leased task, step by step; RunTaskLoop reports it to the master.
  auto train_task = [&](const proto::Task& task) -> StatusOr<TaskOutcome> {
    const int64_t samples_before = result.samples;  // what a stop mid-task leaves pushed
    if (local != nullptr && !o.sync) {
      // Async: each round's change counts 1 / live trainers (local_steps.h).
      const int live = std::max(1, master.live_trainers());
      if (1.0f / live != local->merge_scale()) {
        log << "local steps: a round's change is merged at 1/" << live << " (" << live << " live trainers)" << std::endl;
        local->set_merge_scale(1.0f / live);
      }
    }
    const double load_start = Now();
    auto data = LoadExampleChunks(ChunksOfTask(task), model.task());
    data_s += Now() - load_start;
    if (!data.ok()) return TaskOutcome::BadTask(std::string(data.status().message()));
    std::vector<int64_t> order(data->size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(o.model_options.seed ^ (task.id() * 0x9e3779b97f4a7c15ULL) ^ task.pass());
    std::shuffle(order.begin(), order.end(), rng);
    // Two batchers: the next batch is gathered (for its sparse ids, which an overlapped
    // exchange pulls with this step's push) while the current one's buffers are in use.
    Batcher batchers[2] = {Batcher(&*data), Batcher(&*data)};
    bool interrupted = false;
    Status step_error;
    ExampleSet batch = batchers[0].Gather(order, 0, std::min<size_t>(order.size(), o.batch_size));
    size_t step_in_task = 0;
    for (size_t begin = 0; begin < order.size(); begin += o.batch_size, ++step_in_task) {
      if (g_stop.load()) {
        interrupted = true;
        break;
      }
      const size_t end = std::min(order.size(), begin + o.batch_size);
      const double step_start = Now();
      if (local == nullptr) {
        step_error = exchange->BeforeStep(model.SparseInputs(batch.inputs));
      } else if (!local->started()) {
        step_error = local->Start();  // the first round's base; each round's pull makes the next
      }
      if (!step_error.ok()) break;
      const double compute_start = Now();
      // The parameters go to the backend after each pull (local steps: a round's first step).
      if (local == nullptr || local->taken() == 0) {
        step_error = backend->ImportParameters();
        if (!step_error.ok()) break;
      }
      const double step_on_device = Now();
      auto stats = backend->ComputeGradients(model, batch);
      if (!stats.ok()) {
        step_error = stats.status();
        break;
      }
      const double gradients_done = Now();
      step_error = local != nullptr ? backend->ApplyOptimizer(*local_optimizer) : backend->ExportGradients();
      if (!step_error.ok()) break;
      const double exchange_start = Now();
      compute_s += exchange_start - compute_start;
      copy_s += (step_on_device - compute_start) + (local == nullptr ? exchange_start - gradients_done : 0);
      if (local != nullptr) {
        step_error = EndLocalStep(*local, *backend, stats->samples, /*task_ends=*/end >= order.size());
        if (end < order.size()) batch = batchers[(step_in_task + 1) % 2].Gather(order, end, std::min(order.size(), end + o.batch_size));
      } else if (end < order.size()) {
        ExampleSet next = batchers[(step_in_task + 1) % 2].Gather(order, end, std::min(order.size(), end + o.batch_size));
        const SparseIds next_ids = model.SparseInputs(next.inputs);
        step_error = exchange->AfterStep(stats->samples, &next_ids);
        batch = std::move(next);
      } else {
        step_error = exchange->AfterStep(stats->samples, nullptr);
      }
      const double step_end = Now();
      exchange_s += step_end - exchange_start;
      if (!step_error.ok()) break;
      ++result.steps;
      if (o.observer != nullptr) {
        o.observer->OnStep({result.steps, stats->loss,
                            model.task() == TaskKind::kClassification ? stats->correct : -1, stats->samples,
                            exchange_start - compute_start, step_end - exchange_start, step_end - step_start,
                            params.last_staleness()});
      }
      result.samples += stats->samples;
      window_loss += stats->loss;
      window_correct += stats->correct;
      window_samples += stats->samples;
      ++window_steps;
      const double now = Now();
      if (now - last_log >= o.log_every_s) {
        log << absl::StrFormat("pass %d task %d  step %d  loss %.4f", task.pass(), task.id(),
                               result.steps, window_loss / window_steps);
        if (model.task() == TaskKind::kClassification) {
          log << absl::StrFormat("  train acc %.4f", double(window_correct) / window_samples);
        }
        log << absl::StrFormat("  %.0f samples/s", window_samples / (now - last_log)) << std::endl;
        last_log = now;
        window_loss = 0;
        window_steps = window_correct = window_samples = 0;
      }
    }
    // The task is done only once its last gradients are pushed.
    if (local == nullptr) {
      const double drain_start = Now();
      if (Status drained = exchange->Drain(); step_error.ok()) step_error = drained;
      exchange_s += Now() - drain_start;  // the task's last exchange, waited for
    } else if (interrupted && step_error.ok()) {
      step_error = EndLocalStep(*local, *backend, 0, /*task_ends=*/true);
    }
    if (interrupted) return TaskOutcome::Interrupted(result.samples - samples_before);
    if (!step_error.ok()) return step_error;
    return TaskOutcome::Trained(static_cast<int64_t>(order.size()));
  };
  TaskLoopResult loop;
  if (consistent) {
    PL_ASSIGN_OR_RETURN(StepSchedule schedule, StepSchedule::From(reg.schedule()));
    ConsistentStepsOptions cso;
    cso.seed = o.model_options.seed;
    cso.log_every_s = o.log_every_s;
    cso.observer = o.observer;
    cso.log = [&log](const std::string& line) { log << line << std::endl; };
    ConsistentSteps steps(std::move(schedule), cso, &master, &params, backend.get(), &model);
    PL_ASSIGN_OR_RETURN(ConsistentStepsResult r, steps.Run(g_stop, &g_leave));
    loop.tasks_done = r.tasks_done;
    loop.job_done = r.job_done;
    loop.left = r.left;
    loop.waited_s = r.waited_s;
    result.steps = r.micro_batches;
    result.samples = r.samples;
    compute_s = r.compute_s;
    exchange_s = r.exchange_s;
  } else {
    TaskLoopCallbacks callbacks;
    callbacks.train_task = train_task;
    callbacks.before_lease = [&] { params.set_trainer_id(master.trainer_id()); };
    callbacks.log = [&log](const std::string& line) { log << line << std::endl; };
    PL_ASSIGN_OR_RETURN(loop, RunTaskLoop(master, heartbeat, g_stop, callbacks, &g_leave));
  }
  result.tasks_done = loop.tasks_done;
  const bool job_done = loop.job_done;
  result.stopped = g_stop.load() || loop.left;
  const double elapsed = Now() - start;
  log << absl::StrFormat("%s after %d tasks, %d steps, %d samples (%.0f samples/s); %lld retries; waited %.1f s "
                         "of %.1f for work",
                         loop.left ? "leaving" : result.stopped ? "stopping" : "job done", result.tasks_done, result.steps, result.samples,
                         result.samples / std::max(elapsed, 1e-9), static_cast<long long>(params.counters().retries),
                         loop.waited_s, elapsed)
      << std::endl;
  if (result.steps > 0) {
    log << absl::StrFormat("per step: %.2f ms computing, %.2f ms exchanging parameters, %.2f ms other (%.2f ms "
                           "reading task data; %.2f ms in the master's calls)",
                           compute_s * 1e3 / result.steps, exchange_s * 1e3 / result.steps,
                           (elapsed - compute_s - exchange_s) * 1e3 / result.steps, data_s * 1e3 / result.steps,
                           loop.leasing_s * 1e3 / result.steps);
    if (backend->name() != "cpu") {
      log << absl::StrFormat(" (computing includes %.2f ms of copies to and from the device)", copy_s * 1e3 / result.steps);
    }
    // The pipeline's exchanges ran beside the steps: what of them the trainer did not wait for.
    if (const double background = params.counters().background_exchange_s; background > 0) {
      log << absl::StrFormat("; %.2f ms exchanging in the background", background * 1e3 / result.steps);
    }
    log << std::endl;
    log << process::CpuPerStepLine(process::SelfCpuTimes() - cpu_at_start, result.steps, elapsed) << std::endl;
  }
  if (job_done && !o.test_path.empty()) {
    auto test = LoadExampleSet(o.test_path, model.task(), o.test_limit);
    if (!test.ok()) return test.status();
    PL_RETURN_IF_ERROR(exchange->PullForEvaluation(model.SparseInputs(test->inputs)));
    PL_ASSIGN_OR_RETURN(EvalResult r, Evaluate(model, *test, 500));
    result.evaluated = true;
    result.final_metric = r.metric;
    if (o.observer != nullptr) {
      o.observer->OnEvaluation(result.steps, model.task() == TaskKind::kClassification ? "accuracy" : "auc", r.metric);
    }
  } else if (job_done && !o.save_path.empty()) {
    PL_RETURN_IF_ERROR(exchange->PullForEvaluation({}));
  }
  if (job_done && !o.save_path.empty()) {
    // The job's final parameters as the pservers hold them (every push was acknowledged
    // before the master said JOB_DONE); written atomically, so trainers saving to one
    // path leave one whole file.
    PL_RETURN_IF_ERROR(Annotate(SaveModule(o.save_path, model.module()), "--save"));
    log << "saved the job's final parameters to " << o.save_path << std::endl;
  }
  // After the evaluation's pull, so the totals match what the pservers counted.
  const TrafficCounters traffic = params.counters();
  log << absl::StrFormat("traffic: %d pulls, %d pushes; sparse rows pulled %d, sparse rows pushed %d; "
                         "%d bytes pulled, %d bytes pushed",
                         traffic.pulls, traffic.pushes, traffic.sparse_rows_pulled, traffic.sparse_rows_pushed,
                         traffic.bytes_pulled, traffic.bytes_pushed)
      << std::endl;
  (void)master.Leave();
  return result;
}

}  // namespace pl
