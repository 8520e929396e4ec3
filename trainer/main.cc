// pl-trainer: trains a built-in example model (mlp, cnn, ctr). Without a master
// address it trains in this one process; with one (--master or PL_MASTER_ADDR) it
// joins a distributed job: tasks from the master, parameters on the pservers.
// Environment fallbacks (read here only): PL_MASTER_ADDR, PL_SYNC, PL_TRAINER_RANK.
#include <omp.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/client/exchange_strategy.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/client/local_steps.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/metrics/progress_reporter.h"
#include "paddle_like/metrics/telemetry_flags.h"
#include "paddle_like/metrics/trainer_telemetry.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/optim/update_rules.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/rpc/tls_flags.h"
#include "paddle_like/dist/dense_link.h"
#include "trainer/dist_trainer.h"
#include "trainer/example_data.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, model, "mlp", "built-in model: mlp, cnn or ctr");
ABSL_FLAG(std::string, data, "", "directory with train.plrec and test.plrec (local mode)");
ABSL_FLAG(std::string, test_data, "", "test set for the final evaluation (default: <data>/test.plrec)");
ABSL_FLAG(int, epochs, 5, "passes over the training data (local mode)");
ABSL_FLAG(int64_t, batch_size, 64, "examples per step");
ABSL_FLAG(std::string, optimizer, "adam", "a registered optimizer: sgd, momentum, adagrad, adam, ...");
ABSL_FLAG(std::string, optimizer_args, "",
          "the optimizer's other hyper-parameters, name=value,... (e.g. beta2=0.99,epsilon=1e-6)");
ABSL_FLAG(double, lr, 0.001, "learning rate");
ABSL_FLAG(double, momentum, 0.9, "momentum (momentum optimizer)");
ABSL_FLAG(double, weight_decay, 0.0, "L2 weight decay");
ABSL_FLAG(int, threads, 0, "CPU threads for the math (0: all cores)");
ABSL_FLAG(uint64_t, seed, 1, "seed for parameters, shuffling and dropout");
ABSL_FLAG(int64_t, train_limit, 0, "use only the first N training examples (0: all)");
ABSL_FLAG(int64_t, test_limit, 0, "evaluate on the first N test examples (0: all)");
ABSL_FLAG(double, log_every_s, 2.0, "seconds between progress lines");
ABSL_FLAG(bool, eval_each_epoch, false, "evaluate on the test set after every epoch");
ABSL_FLAG(std::string, save, "",
          "write the trained parameters to this .safetensors file (distributed: the job's final parameters, "
          "pulled from the pservers at the job's end)");
ABSL_FLAG(std::string, master, "", "master address host:port; empty: local mode");
ABSL_FLAG(bool, sync, false, "distributed: synchronous updates (the pservers average each step's gradients)");
ABSL_FLAG(std::string, rank, "", "distributed: this trainer's rank or name, for its name in logs (trainer-<rank>)");
ABSL_FLAG(std::string, device, "auto", "cpu, gpu or auto (the GPU when one is present)");
ABSL_FLAG(int64_t, ctr_fields, 8, "ctr: sparse fields per sample");
ABSL_FLAG(int64_t, admit_after, 0,
          "ctr, distributed: an id gets its embedding row on the pservers at its Nth pushed update (0: at once; "
          "at most 65535)");
ABSL_FLAG(int64_t, evict_after_s, 0,
          "ctr model on pservers: a row of the embedding table neither pulled nor pushed for this many seconds "
          "is evicted (0: kept until the pserver's --sparse_memory_mb needs its room)");
ABSL_FLAG(bool, pipeline, false,
          "distributed async mlp/cnn: push and pull in the background while the next step computes "
          "(a step misses the previous step's update, between hosts the one before too); pays off when the "
          "trainer has a core to spare or the link is slow");
ABSL_FLAG(int, local_steps, 1,
          "distributed, dense models (mlp, cnn): take this many optimizer steps on the trainer's own copy, then push "
          "their change and pull the merged parameters (sync: the trainers' changes are averaged); the exchange "
          "costs 1/K as much (1: push every step's gradients, the optimizer on the pservers)");
ABSL_FLAG(bool, defer_apply, false,
          "distributed async: pservers acknowledge a push once validated and queued, before applying it "
          "(less waiting, one more step of staleness)");
ABSL_FLAG(bool, shm, true,
          "distributed: send dense tensors to pservers on this host through shared memory "
          "(a pserver on another host, or one run with --shm=false, keeps gRPC)");
ABSL_FLAG(int32_t, dense_link_lanes, -1,
          "dense blocks to and from pservers on other hosts over this many TCP connections each way beside gRPC, "
          "with the job's TLS (-1: 4 with TLS, 2 without; 0: over gRPC)");
ABSL_FLAG(std::string, wire_dtype, "float32",
          "distributed: how dense gradients and parameters cross gRPC and dense links: float32, or bfloat16 (half "
          "the bytes; gradients with error feedback, so rounding loses nothing over time). Shared memory stays "
          "float32");

namespace {

int Fail(const std::string& what) {
  pl::log::Error(what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Idle OpenMP threads sleep instead of spinning: on a shared, oversubscribed machine
  // (other trainers, pservers) spinning threads steal the cores doing the work.
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  const pl::cli::Program program = {
      "pl-trainer",
      "--model mlp|cnn|ctr --data DIR [flags]   (distributed: --master HOST:PORT [flags])",
      "Trains a built-in example model: in this process, or, given a master address, as one\n"
      "trainer of a distributed job (tasks from the master, parameters on the pservers).",
      pl::rpc::WithTlsEnv(pl::metrics::WithTelemetryEnv(
          {{"master", "PL_MASTER_ADDR"}, {"sync", "PL_SYNC"}, {"rank", "PL_TRAINER_RANK"}}))};
  pl::cli::ParseOrExit(program, argc, argv);
  pl::cli::CheckOrExit(program, {pl::cli::CheckAtLeast("threads", absl::GetFlag(FLAGS_threads), 0),
                                 pl::cli::CheckAtLeast<int64_t>("batch_size", absl::GetFlag(FLAGS_batch_size), 1),
                                 pl::cli::CheckAtLeast("epochs", absl::GetFlag(FLAGS_epochs), 0),
                                 pl::cli::CheckAtLeast<int64_t>("train_limit", absl::GetFlag(FLAGS_train_limit), 0),
                                 pl::cli::CheckAtLeast<int64_t>("test_limit", absl::GetFlag(FLAGS_test_limit), 0),
                                 pl::cli::CheckAtLeast<int64_t>("ctr_fields", absl::GetFlag(FLAGS_ctr_fields), 1),
                                 pl::cli::CheckRange<int64_t>("admit_after", absl::GetFlag(FLAGS_admit_after), 0,
                                                              pl::kMaxAdmitAfter),
                                 pl::cli::CheckRange<int64_t>("evict_after_s", absl::GetFlag(FLAGS_evict_after_s), 0,
                                                              pl::kMaxEvictAfterSeconds)});
  pl::SetMathThreads(absl::GetFlag(FLAGS_threads));
  pl::KeepLargeBuffersInHeap();
  pl::SkipMutexDeadlockChecks();

  pl::OptimizerSpec opt;
  auto kind = pl::ParseOptimizerKind(absl::GetFlag(FLAGS_optimizer));
  if (!kind.ok()) pl::cli::ExitWithUsageError(program, absl::StrCat("--optimizer: ", kind.status().message()));
  opt.kind = *kind;
  opt.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  opt.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  // --momentum is for the optimizers that have one; --optimizer_args names any.
  if (auto def = pl::FindOptimizer(opt.kind.name()); def.ok() && (*def)->HyperIndex("momentum") >= 0) {
    opt.Set("momentum", static_cast<float>(absl::GetFlag(FLAGS_momentum)));
  }
  if (auto s = pl::ParseHyperParams(absl::GetFlag(FLAGS_optimizer_args), &opt); !s.ok()) {
    pl::cli::ExitWithUsageError(program, absl::StrCat("--optimizer_args: ", s.message()));
  }
  if (auto s = pl::ValidateOptimizerSpec(opt); !s.ok()) {
    pl::cli::ExitWithUsageError(program,
                                absl::StrCat("--lr, --momentum, --weight_decay or --optimizer_args: ", s.message()));
  }
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "gpu" && device != "auto") {
    pl::cli::ExitWithUsageError(program, "--device: must be cpu, gpu or auto, got '" + device + "'");
  }

  pl::ModelOptions mo;
  mo.seed = absl::GetFlag(FLAGS_seed);
  mo.ctr_fields = absl::GetFlag(FLAGS_ctr_fields);
  mo.ctr_admit_after = absl::GetFlag(FLAGS_admit_after);
  mo.ctr_evict_after_s = absl::GetFlag(FLAGS_evict_after_s);
  const std::string model_name = absl::GetFlag(FLAGS_model);
  auto model = pl::MakeExampleModel(model_name, mo);
  if (!model.ok()) pl::cli::ExitWithUsageError(program, absl::StrCat("--model: ", model.status().message()));
  const pl::TaskKind task = (*model)->task();
  const char* metric = task == pl::TaskKind::kClassification ? "accuracy" : "auc";

  // A --save that cannot be written fails now, not after the whole job.
  if (const std::string save = absl::GetFlag(FLAGS_save); !save.empty()) {
    const std::filesystem::path dir = std::filesystem::absolute(save).parent_path();
    if (!std::filesystem::is_directory(dir) || ::access(dir.c_str(), W_OK) != 0) {
      pl::cli::ExitWithUsageError(program, absl::StrCat("--save: cannot write in ", dir.string(),
                                                        " (not a writable directory)"));
    }
  }

  const std::string master = absl::GetFlag(FLAGS_master);
  const std::string data = absl::GetFlag(FLAGS_data);
  const int local_steps = absl::GetFlag(FLAGS_local_steps);
  if (local_steps != 1 && master.empty()) {
    pl::cli::ExitWithUsageError(program, "--local_steps: only for a distributed trainer (--master); one process "
                                         "already takes every step locally");
  }
  if (auto s = pl::ValidateLocalSteps(local_steps, *pl::KeyStore::Of((*model)->module()),
                                      pl::PicksPipelined({absl::GetFlag(FLAGS_sync), absl::GetFlag(FLAGS_pipeline)},
                                                         (*model)->module()));
      !s.ok()) {
    pl::cli::ExitWithUsageError(program, s.message());
  }
  std::string test_path = absl::GetFlag(FLAGS_test_data);
  if (test_path.empty() && !data.empty()) test_path = data + "/test.plrec";

  pl::log::SetProcessName("trainer");
  pl::log::LineStream log;
  const std::string rank_or_zero = absl::GetFlag(FLAGS_rank).empty() ? "0" : absl::GetFlag(FLAGS_rank);
  if (!master.empty()) {
    pl::DistTrainerOptions d;
    d.master_address = master;
    d.model_name = model_name;
    d.model_options = mo;
    d.optimizer = opt;
    d.batch_size = absl::GetFlag(FLAGS_batch_size);
    d.test_path = test_path;
    d.test_limit = absl::GetFlag(FLAGS_test_limit);
    d.sync = absl::GetFlag(FLAGS_sync);
    d.log_every_s = absl::GetFlag(FLAGS_log_every_s);
    d.device = device;
    d.pipeline = absl::GetFlag(FLAGS_pipeline);
    d.local_steps = local_steps;
    d.defer_apply = absl::GetFlag(FLAGS_defer_apply);
    d.shared_memory = absl::GetFlag(FLAGS_shm);
    auto wire = pl::ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
    if (!wire.ok()) pl::cli::ExitWithUsageError(program, "--wire_dtype: " + std::string(wire.status().message()));
    d.wire_dtype = *wire;
    d.dense_link_lanes = absl::GetFlag(FLAGS_dense_link_lanes);
    if (d.dense_link_lanes < -1 || d.dense_link_lanes > pl::kMaxDenseLinkLanes) {
      pl::cli::ExitWithUsageError(program, absl::StrCat("--dense_link_lanes: ", d.dense_link_lanes,
                                                        " is outside -1..", pl::kMaxDenseLinkLanes));
    }
    d.save_path = absl::GetFlag(FLAGS_save);
    if (const std::string rank = absl::GetFlag(FLAGS_rank); !rank.empty()) d.name = "trainer-" + rank;
    pl::log::SetProcessName(d.name);
    pl::rpc::ConfigureTransportOrExit(program, "trainer");
    // --logdir, --metrics_port (or PL_LOGDIR, PL_METRICS_PORT from pl-launch).
    auto telemetry = pl::metrics::OpenTelemetryOrExit(program, "trainer", rank_or_zero, "0.0.0.0");
    pl::metrics::TrainerTelemetry observer(telemetry.get());
    // Curves for the master's status page, then on to the event file and /metrics.
    pl::metrics::ProgressReporter reporter(master, d.name, &observer);
    d.observer = &reporter;
    pl::InstallStopSignalHandlers();
    auto result = pl::RunDistributedTrainer(d, **model, log);
    if (!result.ok()) return Fail(std::string(result.status().message()));
    if (result->evaluated) pl::log::Info(absl::StrFormat("final test %s: %.4f", metric, result->final_metric));
    return 0;
  }

  if (data.empty()) {
    pl::cli::ExitWithUsageError(program,
                                "--data is required in local mode (a directory with train.plrec and test.plrec)");
  }
  // One process, same curves: --logdir writes DIR/trainer/, --metrics_port serves /metrics.
  auto telemetry = pl::metrics::OpenTelemetryOrExit(program, "trainer", rank_or_zero, "0.0.0.0");
  pl::metrics::TrainerTelemetry observer(telemetry.get());
  auto train = pl::LoadExampleSet(data + "/train.plrec", task, absl::GetFlag(FLAGS_train_limit));
  if (!train.ok()) return Fail(std::string(train.status().message()));
  auto test = pl::LoadExampleSet(test_path, task, absl::GetFlag(FLAGS_test_limit));
  if (!test.ok()) return Fail(std::string(test.status().message()));
  log << absl::StrFormat("model %s: %lld parameters; %lld train / %lld test examples; %s; %d threads",
                               model_name, static_cast<long long>((*model)->module().NumParameterElements()),
                               static_cast<long long>(train->size()), static_cast<long long>(test->size()),
                               opt.ToString(), omp_get_max_threads())
            << std::endl;

  auto backend = pl::MakeStepBackend(device, **model, log);
  if (!backend.ok()) return Fail(std::string(backend.status().message()));
  pl::LocalTrainOptions lo;
  lo.observer = &observer;
  lo.epochs = absl::GetFlag(FLAGS_epochs);
  lo.batch_size = absl::GetFlag(FLAGS_batch_size);
  lo.optimizer = opt;
  lo.seed = mo.seed;
  lo.log_every_s = absl::GetFlag(FLAGS_log_every_s);
  if (absl::GetFlag(FLAGS_eval_each_epoch)) lo.eval_every_epoch_limit = test->size();
  auto report = pl::TrainLocally(**model, *train, *test, lo, log, backend->get());
  if (!report.ok()) return Fail(std::string(report.status().message()));
  log << absl::StrFormat("trained %lld steps in %.1fs: %.0f samples/s", static_cast<long long>(report->steps),
                               report->train_seconds, report->samples_per_s)
            << std::endl;
  log << pl::process::CpuPerStepLine(report->cpu, report->steps, report->train_seconds) << std::endl;
  if (!absl::GetFlag(FLAGS_save).empty()) {
    if (auto s = pl::SaveModule(absl::GetFlag(FLAGS_save), (*model)->module()); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  log << absl::StrFormat("final test %s: %.4f", metric, report->final_metric) << std::endl;
  return 0;
}
