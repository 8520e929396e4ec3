// The distributed trainer loop: register with the master, learn the pservers, then
// repeatedly lease a task (a group of record chunks), train on it step by step
// (pull parameters, forward/backward, push gradients) and report it done. A stop
// signal (SIGTERM/SIGINT) gives the current task back at once and leaves cleanly;
// SIGUSR1 (what pl-launch sends first when it shrinks a job) finishes the current task,
// reports it and leaves before the next, so nothing is trained twice; JOB_DONE ends the
// loop with an evaluation of the final parameters.
//
// Thread-safety: one call at a time; it runs a heartbeat thread of its own.
#ifndef PADDLE_LIKE_TRAINER_DIST_TRAINER_H_
#define PADDLE_LIKE_TRAINER_DIST_TRAINER_H_

#include <ostream>
#include <string>

#include "paddle_like/dist/bf16.h"
#include "paddle_like/metrics/training_observer.h"
#include "paddle_like/optim/update_rules.h"
#include "trainer/models.h"

namespace pl {

struct DistTrainerOptions {
  std::string master_address;
  std::string name = "trainer";      // for logs
  std::string model_name;
  ModelOptions model_options;
  OptimizerSpec optimizer;           // applied by the pservers
  int64_t batch_size = 64;
  bool sync = false;
  std::string test_path;             // evaluated at JOB_DONE when set
  // Written at JOB_DONE when set: the job's final parameters pulled from the pservers, as
  // safetensors (nn/module_file.h); sparse tables hold the rows the evaluation pulled.
  std::string save_path;
  int64_t test_limit = 0;
  double log_every_s = 2.0;
  double give_up_after_s = 300;      // how long a peer may stay unreachable
  std::string device = "cpu";        // cpu, gpu or auto (see step_backend.h)
  bool pipeline = false;             // async dense models: overlap traffic and compute
  // Local steps (paddle_like/client/local_steps.h): the optimizer runs here, K steps a
  // round, and each round's change is pushed; 1: every step's gradients are pushed.
  int local_steps = 1;
  bool defer_apply = false;          // async: pservers acknowledge pushes before applying them
  bool shared_memory = true;         // dense traffic to pservers on this host through shared memory
  WireDtype wire_dtype = WireDtype::kFloat32;  // dense values over gRPC (paddle_like/dist/bf16.h)
  int dense_link_lanes = -1;         // pservers on other hosts: ParameterClientOptions::dense_link_lanes
  // Told of every step and of the final evaluation (TensorBoard, /metrics); may be null.
  metrics::TrainingObserver* observer = nullptr;
};

struct DistResult {
  bool evaluated = false;
  double final_metric = 0;
  int64_t tasks_done = 0;
  int64_t steps = 0;
  int64_t samples = 0;
  bool stopped = false;              // left because of a stop signal
};

// SIGTERM and SIGINT set a flag the loop checks between steps; SIGUSR1 one it checks
// before each lease.
void InstallStopSignalHandlers();
bool StopRequested();

StatusOr<DistResult> RunDistributedTrainer(const DistTrainerOptions& options, ExampleModel& model,
                                           std::ostream& log);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_DIST_TRAINER_H_
