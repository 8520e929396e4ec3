// Launcher: runs one training job as a local cluster of real processes on 127.0.0.1 —
// a master, P pservers and T trainers — and supervises it the way Kubernetes would run
// the same job as Pods.
//
// Run() starts the master (state in WORKDIR/master) and waits for its port file, then
// the pservers (checkpoints in WORKDIR/pservers/<index>[.<replica>]) and waits for theirs, then the
// trainers (the user's command with PL_MASTER_ADDR, PL_ROLE=trainer, PL_TRAINER_RANK,
// PL_NUM_PSERVERS, PL_SYNC). Every child's output is streamed, line by line, prefixed
// with its name; a progress line from the master's JobStatus is printed every few
// seconds. The master and pservers are restarted with the same flags when they exit
// (their first port is pinned so addresses stay valid, like a Service; one that exits
// before it ever wrote its port file fails the launch instead); trainers are
// not restarted — the job is elastic and goes on without them. Trainers can be killed,
// stopped or added by timer flags or through a control FIFO. When the master holds a
// trainer target (ScaleTrainers: pl-autoscale, or `scale N` on the control FIFO) the
// launcher follows it: it starts trainers, or stops the newest (SIGUSR1: finish the task
// in hand and leave; SIGTERM, which gives the task back at once, after
// --leave_grace_ms), until it runs the target; `--trainers 0` starts none until then.
//
// The job ends when JobStatus says job_done and the trainers have exited (they get
// SIGTERM after a grace period); then the pservers and the master get SIGTERM (SIGKILL
// after a timeout). Run() is OK when the job completed with no failed task and at least
// one trainer exited 0; otherwise an error with a one-line cause. RequestStop() (from a
// signal handler) makes Run() stop every process and return CANCELLED.
//
// Several machines (options.num_nodes > 1; node_role.h says who runs what): node 0 runs
// the master on 0.0.0.0 at the port of --master_addr, the other nodes wait (bounded by
// --master_wait_s) until it answers and fail at once when it was started for another
// --nnodes (INVALID_ARGUMENT). Pservers listen on 0.0.0.0 and advertise the node's
// address; children reach the master at --master_addr. Every node polls JobStatus and
// ends as node 0 does, with two differences. (1) A node keeps its pservers (node 0 also
// its master) while the job is not done, even when none of its own trainers is left
// (the other nodes' trainers need them); it fails when no trainer has been live on any
// node for --master_wait_s, unless a control FIFO may still add one. (2) Once the job is
// done and its own trainers have exited, a node waits until no trainer of the job is
// live (the others pull from its pservers for their final evaluation), bounded by
// trainer_exit_grace + stop_grace + the lease; node 0 then keeps the master up for
// two more polls so the other nodes read job_done. A node other than 0 fails when the
// master is unreachable for longer than --master_wait_s before the job is done; after
// job_done, a master that is gone means node 0 finished. The rule for the exit status
// is node 0's: no failed task and at least one of this node's trainers exited 0 (every
// node starts --trainers >= 1).
//
// Thread-safety: Run() is called once, from one thread; RequestStop() is
// async-signal-safe and may be called from any thread or signal handler.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/client/master_client.h"
#include "proto/master.grpc.pb.h"
#include "trainer/launcher/job_layout.h"
#include "trainer/launcher/job_telemetry.h"
#include "trainer/launcher/job_tls.h"
#include "trainer/launcher/launch_options.h"
#include "trainer/launcher/node_role.h"
#include "trainer/launcher/supervisor.h"

namespace pl {


class Launcher {
 public:
  Launcher(LaunchOptions options, LineSink sink);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Checks what can be checked before starting anything: pl-master and pl-pserver are
  // executables in bin_dir, the trainer command resolves (bin_dir first, then PATH),
  // and on several machines the node rank and master address are valid.
  // NOT_FOUND / INVALID_ARGUMENT naming what is missing or wrong.
  Status Validate();

  // Runs the job to its end (see the file comment). Call Validate() first.
  Status Run();

  // Async-signal-safe: Run() stops everything it started and returns CANCELLED.
  void RequestStop(int signo);
  // The signal passed to RequestStop, 0 when none.
  int stop_signal() const { return stop_signal_.load(); }

  // The working directory (known once Run() has created it).
  const std::string& workdir() const { return layout_.workdir(); }

 private:
  // kLost: done, but work was lost (tasks set aside as failed in some pass; a shard
  // restarted from its seed or an older checkpoint, pushes refused:
  // JobStatusResponse.losses), and --allow_losses was not given.
  enum class Outcome { kRunning, kFinished, kLost, kFailed, kCancelled };

  Status PrepareWorkdir();
  Status OpenControlFifo();
  std::vector<std::string> MasterCommand(int port) const;
  // Several masters: this node's etcd member, and starting it with the master.
  std::vector<std::string> EtcdCommand() const;
  Status StartMasterWithStandbys();
  std::vector<std::string> PserverCommand(int index, const std::string& name, int port) const;
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
  // The master holds a trainer target (ScaleTrainers): starts trainers, or stops the
  // newest with SIGTERM, until this node runs its part of it.
  void FollowTarget();
  // SIGTERM to each trainer FollowTarget asked to leave (SIGUSR1) that is still running
  // after --leave_grace_ms.
  void ExpireLeaves();
  // This node's part of a job-wide trainer target (nodes in rank order get the remainder).
  int LocalTarget(int target) const;
  // The control command `scale N`: asks the master for N trainers.
  void ScaleJob(const std::string& arg, const std::string& source);
  StatusOr<proto::JobStatusResponse> QueryStatus();
  void PollStatus();
  std::string DescribeStatus(const proto::JobStatusResponse& s) const;
  // Decides whether the job is over; sets outcome_/cause_.
  void CheckEnd();
  // Stops every process (trainers, pservers, master in that order).
  void StopEverything();
  std::vector<std::string> RunningTrainers() const;

  // ---- several machines (launcher_nodes.cc) ----
  std::map<std::string, int> server_ports_;  // name -> the port it serves on (restarts reuse it)
  bool multi_node() const { return layout_.multi_node(); }
  bool runs_master() const { return layout_.runs_master(); }
  // The process that serves shard `index` now: its only one, or with replicas the
  // primary the master names (empty when it names none this node runs).
  std::string PserverServing(int index);
  // A replicated pserver's process exited: tells the master at once (it would otherwise
  // wait out the replica's lease before promoting a backup), once per incarnation.
  void ReportReplicaExit(const ProcessEvent& e);
  // A trainer process that died: the master drops it now, not when its lease runs out.
  void ReportTrainerExit(const ProcessEvent& e);
  // The address of shard `index`'s primary, from the master ("" if none or unreachable).
  std::string PrimaryAddress(int index);
  // The control command checkpoint-pserver: shard `index`'s primary checkpoints now.
  void CheckpointPserver(int index, const std::string& source);
  // A node other than 0: waits (bounded) until the master answers JobStatus and checks
  // the job's --nnodes.
  Status WaitForMaster();
  // Sets node_addr_: --node_addr, or the address of the interface towards the master.
  Status ResolveNodeAddr();
  // The job is done and this node's trainers have exited: true once the job's other
  // trainers are gone too (or the bound is over, or node 0 finished).
  bool OtherNodesDone();
  // No trainer runs here and the job is not done: keep serving; fail when no trainer
  // has been live anywhere for too long.
  void WaitWithoutLocalTrainers();
  // A node other than 0 whose JobStatus call failed: fail once the master has been
  // unreachable for longer than --master_wait_s.
  void CheckMasterGone(const Status& error);

  LaunchOptions options_;
  LineSink sink_;
  std::unique_ptr<Supervisor> supervisor_;
  JobLayout layout_{&options_};  // what runs here, and where its files are (the workdir)
  JobTls tls_;
  JobTelemetry telemetry_;
  bool created_workdir_ = false;
  bool created_fifo_ = false;
  std::vector<std::string> trainer_argv_;  // the trainer command with argv[0] resolved

  std::set<std::string> served_;  // servers that wrote their port file at least once
  int master_port_ = 0;
  std::unique_ptr<MasterClient> master_;
  std::string master_addr_;  // how the children reach the master (PL_MASTER_ADDR)
  std::string node_addr_;    // several machines: what this node's pservers advertise
  HostPort master_hp_;       // several machines: this node's --master_addr entry (or the first)
  std::vector<std::string> etcd_hosts_;  // several masters: their hosts, where etcd runs

  // Self-pipe: RequestStop writes, the loop polls the read end.
  int signal_pipe_[2] = {-1, -1};
  std::atomic<int> stop_signal_{0};
  int control_fd_ = -1;
  int control_write_fd_ = -1;  // keeps the FIFO open so writers closing it is not EOF
  std::string control_partial_;

  using Clock = std::chrono::steady_clock;
  bool started_ = false;           // the master, pservers and first trainers were started
  int next_rank_ = 0;              // trainers started on this node (not a rank: see node_role.h)
  std::set<std::string> stopping_;  // trainers stopped to follow a lower target, not yet gone
  std::map<std::string, Clock::time_point> leave_deadlines_;  // of those sent SIGUSR1: when SIGTERM follows
  std::vector<Clock::time_point> target_failures_;  // trainers that failed while a target was set
  std::vector<int> trainer_ranks_;  // their ranks, in start order
  int trainers_exited_ = 0;
  int trainers_ok_ = 0;

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
  // Several machines.
  bool last_poll_ok_ = false;
  Clock::time_point master_ok_at_;       // the last JobStatus that succeeded
  Clock::time_point no_trainer_since_;   // job-wide live_trainers 0 since (epoch: not now)
  Clock::time_point all_left_at_;        // job done and no trainer live (epoch: not yet)
  bool others_wait_logged_ = false;
  bool bad_input_ = false;               // Run() returns INVALID_ARGUMENT (exit 2)


  Outcome outcome_ = Outcome::kRunning;
  std::string cause_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCHER_H_
