// Launcher: runs one training job as a local cluster of real processes on 127.0.0.1 —
// a master, P pservers and T trainers — and supervises it the way Kubernetes would run
// the same job as Pods.
//
// Run() starts the master (state in WORKDIR/master) and waits for its port file, then
// the pservers (checkpoints in WORKDIR/pservers/<index>) and waits for theirs, then the
// trainers (the user's command with PL_MASTER_ADDR, PL_ROLE=trainer, PL_TRAINER_RANK,
// PL_NUM_PSERVERS, PL_SYNC). Every child's output is streamed, line by line, prefixed
// with its name; a progress line from the master's JobStatus is printed every few
// seconds. The master and pservers are restarted with the same flags when they exit
// (their first port is pinned so addresses stay valid, like a Service; one that exits
// before it ever wrote its port file fails the launch instead); trainers are
// not restarted — the job is elastic and goes on without them. Trainers can be killed,
// stopped or added by timer flags or through a control FIFO.
//
// The job ends when JobStatus says job_done and the trainers have exited (they get
// SIGTERM after a grace period); then the pservers and the master get SIGTERM (SIGKILL
// after a timeout). Run() is OK when the job completed with no failed task and at least
// one trainer exited 0; otherwise an error with a one-line cause. RequestStop() (from a
// signal handler) makes Run() stop every process and return CANCELLED.
//
// Thread-safety: Run() is called once, from one thread; RequestStop() is
// async-signal-safe and may be called from any thread or signal handler.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "proto/master.grpc.pb.h"
#include "trainer/launcher/launch_options.h"
#include "trainer/launcher/supervisor.h"

namespace pl {

class Launcher {
 public:
  Launcher(LaunchOptions options, LineSink sink);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Checks what can be checked before starting anything: pl-master and pl-pserver are
  // executables in bin_dir, the trainer command resolves (bin_dir first, then PATH).
  // NOT_FOUND / INVALID_ARGUMENT naming what is missing.
  Status Validate();

  // Runs the job to its end (see the file comment). Call Validate() first.
  Status Run();

  // Async-signal-safe: Run() stops everything it started and returns CANCELLED.
  void RequestStop(int signo);
  // The signal passed to RequestStop, 0 when none.
  int stop_signal() const { return stop_signal_.load(); }

  // The working directory (known once Run() has created it).
  const std::string& workdir() const { return workdir_; }

 private:
  enum class Outcome { kRunning, kFinished, kFailed, kCancelled };

  Status PrepareWorkdir();
  Status OpenControlFifo();
  std::vector<std::string> MasterCommand(int port) const;
  std::vector<std::string> PserverCommand(int index, int port) const;
  std::string PortFile(const std::string& name) const;
  // Starts `name` and waits (bounded, streaming output) for its port file; pins the port
  // for restarts.
  StatusOr<int> StartServer(const std::string& name, const std::string& restart_note,
                            const std::function<std::vector<std::string>(int port)>& command);
  Status StartTrainer(const std::string& why);

  // One turn of the event loop: output, exits, signals, control lines, timers, status.
  void Step(std::chrono::milliseconds timeout);
  void HandleEvents(const std::vector<ProcessEvent>& events);
  void HandleControl();
  void RunCommand(const std::string& line);
  void SignalTrainer(const std::string& rank_arg, int sig, const std::string& source);
  void CheckTimers();
  StatusOr<proto::JobStatusResponse> QueryStatus();
  void PollStatus();
  std::string DescribeStatus(const proto::JobStatusResponse& s) const;
  // Decides whether the job is over; sets outcome_/cause_.
  void CheckEnd();
  // Stops every process (trainers, pservers, master in that order).
  void StopEverything();
  std::vector<std::string> RunningTrainers() const;

  LaunchOptions options_;
  LineSink sink_;
  std::unique_ptr<Supervisor> supervisor_;
  std::string workdir_;
  bool created_workdir_ = false;
  bool created_fifo_ = false;
  std::vector<std::string> trainer_argv_;  // the trainer command with argv[0] resolved

  std::set<std::string> served_;  // servers that wrote their port file at least once
  int master_port_ = 0;
  std::unique_ptr<proto::Master::Stub> master_;

  // Self-pipe: RequestStop writes, the loop polls the read end.
  int signal_pipe_[2] = {-1, -1};
  std::atomic<int> stop_signal_{0};
  int control_fd_ = -1;
  int control_write_fd_ = -1;  // keeps the FIFO open so writers closing it is not EOF
  std::string control_partial_;

  int next_rank_ = 0;
  int trainers_exited_ = 0;
  int trainers_ok_ = 0;

  using Clock = std::chrono::steady_clock;
  Clock::time_point start_time_;
  Clock::time_point trainers_started_;
  Clock::time_point next_status_;
  Clock::time_point next_progress_;
  bool kill_timer_done_ = false;
  bool add_timer_done_ = false;
  bool have_status_ = false;
  proto::JobStatusResponse status_;
  int64_t last_progress_samples_ = 0;
  Clock::time_point last_progress_time_;
  Clock::time_point job_done_at_;
  bool job_done_seen_ = false;
  bool trainers_stopped_ = false;
  bool idle_hint_logged_ = false;

  Outcome outcome_ = Outcome::kRunning;
  std::string cause_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_
