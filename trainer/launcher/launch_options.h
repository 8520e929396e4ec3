// LaunchOptions: what pl-launch was asked to run, and its flags (absl flags defined in
// launch_options.cc, parsed by pl::cli).
//
//   pl-launch --pservers P --trainers T [--sync] [--workdir DIR] [--data PATH]
//             [--passes N] [--chunks_per_task K] [--lease_ms MS] [--seed S]
//             [--checkpoint_every_s S] [--sparse_memory_mb M [--sparse_disk]] [--kill_trainer_after_s X]
//             [--add_trainer_after_s Y] [--control FIFO] [--progress_every_s S]
//             [--logdir DIR] [--metrics_port P] [--http_port P]
//             [--nnodes N --node_rank R --master_addr HOST:PORT [--node_addr A]
//              [--master_wait_s S]]
//             -- <trainer command...>
//
// With --nnodes N > 1 the job runs on N machines, each running pl-launch with the same
// flags but its own --node_rank (node_role.h says who runs what).
//
// Flags are written in pl::cli's dialect (--flag=value, --flag value, --sync/--nosync).
// Everything after "--" is the trainer command, passed through untouched.
//
// Thread-safety: LaunchOptions is plain data. ParseLaunchFlags sets the process's flags
// (pl::cli::Parse): one thread at a time, before other threads read them.
#ifndef PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCH_OPTIONS_H_
#define PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCH_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "paddle_like/core/cli.h"
#include "paddle_like/core/status.h"

namespace pl {

// pl-launch's exit status for a job that finished but lost work (--allow_losses).
inline constexpr int kLaunchLossExitCode = 3;


struct LaunchOptions {
  // --- from flags ---
  int num_pservers = 0;             // --pservers, required, >= 1
  int replicas = 1;                 // --replicas, resolved (0: 1 on one node, 2 on several): copies per pserver index
  int num_trainers = 0;             // --trainers, required, >= 1 (one machine: >= 0)
  bool sync = false;                // --sync: trainers get PL_SYNC=1
  std::string workdir;              // --workdir; empty: a fresh /tmp/pl-launch-XXXXXX
  std::string data;                 // --data, passed to the master; empty: not passed
  int passes = 1;                   // --passes, >= 1
  int chunks_per_task = 1;          // --chunks_per_task, >= 1
  int virtual_trainers = 0;         // --virtual_trainers: pl-master's (0: none)
  bool overlap_passes = true;       // --overlap_passes: pl-master's
  int64_t lease_ms = 3000;          // --lease_ms, >= 100
  uint64_t seed = 0;                // --seed
  int checkpoint_every_s = 30;      // --checkpoint_every_s, >= 0
  int64_t sparse_memory_mb = 0;     // --sparse_memory_mb, >= 0: each pserver's cap on its sparse rows
  bool sparse_disk = false;         // --sparse_disk: rows beyond the cap go to WORKDIR/sparse-disk/<pserver>
  // Both timers count from the moment the first trainers were started.
  double kill_trainer_after_s = -1; // --kill_trainer_after_s; < 0: never
  double add_trainer_after_s = -1;  // --add_trainer_after_s; < 0: never
  std::string control_fifo;         // --control; empty: no control FIFO
  // A lower trainer target stops trainers with SIGUSR1 first (finish the task in hand,
  // then leave: nothing trained twice), and SIGTERM (give it back now) once this has
  // passed without an exit; 0: SIGTERM at once. The default keeps a reclaimed slot free
  // within 1 s (SIGTERM to exit takes 0.13 s, benchmarks/README.md).
  int64_t leave_grace_ms = 600;     // --leave_grace_ms, >= 0
  double progress_every_s = 5;      // --progress_every_s, > 0
  // --allow_losses: a job that finished having lost work (tasks set aside as failed in
  // any pass, a shard restarted from its seed) exits 0 instead of kLaunchLossExitCode.
  bool allow_losses = false;
  // Seeing the job (job_telemetry.h).
  std::string logdir;               // --logdir: each process writes DIR/<its name>/; empty: none
  int metrics_port = -1;            // --metrics_port: -1 off, 0 free ports, P a base port
  int http_port = -1;               // --http_port: the master's status page; -1 off
  // Several machines (see node_role.h). The defaults are the one-machine job.
  int num_nodes = 1;                // --nnodes, >= 1
  int node_rank = 0;                // --node_rank, in [0, num_nodes)
  std::string master_addr;          // --master_addr HOST:PORT[,...]; required iff num_nodes > 1
  int etcd_port = 2379;             // --etcd_port: several masters' etcd members (peers: +1)
  std::string node_addr;            // --node_addr; empty: the address routing to the master
  double master_wait_s = 60;        // --master_wait_s, > 0: master unreachable -> give up
  // Mutual TLS between the job's processes (rpc/tls.h), on unless --insecure. The job's
  // CA is made in WORKDIR/tls/ca, or taken from --tls_ca DIR (ca.crt and ca.key; the
  // same files on every node of a job on several machines, which requires it).
  bool insecure = false;            // --insecure
  std::string tls_ca;               // --tls_ca
  std::vector<std::string> trainer_command;  // after "--", non-empty

  // --- set by the caller, not flags ---
  std::string bin_dir;              // where pl-master and pl-pserver live
  std::chrono::milliseconds port_file_timeout{30000};  // master/pserver start-up bound
  std::chrono::milliseconds status_poll{1000};         // JobStatus polling period
  std::chrono::milliseconds rpc_timeout{2000};         // one JobStatus call
  std::chrono::milliseconds trainer_exit_grace{30000}; // job done -> trainers must exit
  std::chrono::milliseconds stop_grace{5000};          // SIGTERM -> SIGKILL
  // All trainers gone but the job not done: how long the master may stay unreachable
  // before the launcher gives up asking.
  std::chrono::milliseconds final_status_timeout{10000};
};

// pl-launch for pl::cli: its usage, the --help text's description and the rule that the
// trainer command follows "--".
const cli::Program& LaunchProgram();

// The options from the flags as pl::cli parsed them and the trainer command after "--".
// INVALID_ARGUMENT naming the flag for a missing or out-of-range value, or a missing
// trainer command; also for --master_addr, --node_addr or --master_wait_s without
// --nnodes > 1, and for --nnodes > 1 without a valid --master_addr.
StatusOr<LaunchOptions> LaunchOptionsFromFlags(const cli::CommandLine& line);

// `pl-launch --make_ca DIR`: DIR, or empty when the flag is not given. INVALID_ARGUMENT
// for an empty DIR, or another flag or a trainer command beside it.
StatusOr<std::string> MakeCaDirFromFlags(const cli::CommandLine& line);

// cli::Parse(LaunchProgram(), args, no environment), then LaunchOptionsFromFlags:
// INVALID_ARGUMENT naming the flag for an unknown flag or a malformed value too, and for
// --help or --version, which only cli::ParseOrExit answers.
StatusOr<LaunchOptions> ParseLaunchFlags(const std::vector<std::string>& args);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LAUNCHER_LAUNCH_OPTIONS_H_
