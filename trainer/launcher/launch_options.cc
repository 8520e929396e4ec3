#include "trainer/launcher/launch_options.h"

#include <cmath>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/dist/step_mask.h"
#include "trainer/launcher/node_role.h"

ABSL_FLAG(int, pservers, 0, "pservers to run (required, >= 1)");
ABSL_FLAG(int, replicas, 0,
          "copies of each pserver's shard, each a pl-pserver process: with 2 or more a shard survives the death "
          "of any one of its processes with no update lost (a backup takes over). With --nnodes N > 1 the copies "
          "of a shard go to different machines (up to N). 0: 1 on one machine, 2 on several");
ABSL_FLAG(int, trainers, 0,
          "trainers to start (required, >= 1; on one machine 0 starts none until the job gets a trainer "
          "target: pl-autoscale, or 'scale N' on the control FIFO)");
ABSL_FLAG(bool, sync, false, "synchronous updates: the trainers get PL_SYNC=1");
ABSL_FLAG(std::string, workdir, "",
          "directory for state, checkpoints and port files (empty: a fresh /tmp/pl-launch-XXXXXX)");
ABSL_FLAG(std::string, data, "", "record file or directory the master cuts the job from, or indices:N[:K] for a script's own dataset (empty: not passed)");
ABSL_FLAG(int, passes, 1, "passes over the data (>= 1)");
ABSL_FLAG(int, chunks_per_task, 1, "record chunks per task (>= 1)");
ABSL_FLAG(int, virtual_trainers, 0,
          "> 0: the job trains this many virtual trainers, and its parameters are the same bits however many "
          "trainers run and whoever joins, leaves or is killed (pl-master --virtual_trainers; "
          "docs/consistent-training.md); a count with many divisors (12, 24, 60) keeps any number of trainers "
          "evenly loaded");
ABSL_FLAG(int64_t, lease_ms, 3000, "task and trainer lease in ms (>= 100)");
ABSL_FLAG(uint64_t, seed, 0, "seed of the master's task order");
ABSL_FLAG(int, checkpoint_every_s, 30, "seconds between pserver checkpoints (>= 0; 0: only on exit)");
ABSL_FLAG(int64_t, sparse_memory_mb, 0,
          "each pserver's cap on its sparse rows in MB, passed on as pl-pserver --sparse_memory_mb (0: the pserver's "
          "default, what its dense parameters leave of its memory budget)");
ABSL_FLAG(bool, sparse_disk, false,
          "with --sparse_memory_mb: rows beyond each pserver's cap go to a disk tier in WORKDIR/sparse-disk/<pserver> "
          "instead of being dropped");
ABSL_FLAG(double, kill_trainer_after_s, -1,
          "SIGKILL one trainer this many seconds after the trainers start (< 0: never; given: >= 0)");
ABSL_FLAG(double, add_trainer_after_s, -1,
          "start one more trainer this many seconds after the trainers start (< 0: never; given: >= 0)");
ABSL_FLAG(std::string, control, "", "create this FIFO and obey its lines (see the description above)");
ABSL_FLAG(int64_t, leave_grace_ms, 600,
          "a lower trainer target stops trainers with SIGUSR1 (finish the task in hand, then leave), then "
          "SIGTERM (give it back) after this many ms (>= 0; 0: SIGTERM at once)");
ABSL_FLAG(double, progress_every_s, 5, "seconds between the master's progress lines (> 0)");
ABSL_FLAG(bool, overlap_passes, true,
          "trainers with nothing left in a pass start on the next while its last tasks are out (pl-master "
          "--overlap_passes)");
ABSL_FLAG(bool, allow_losses, false,
          "exit 0 when the job finished but lost work: tasks set aside as failed in some pass (their chunks "
          "untrained in it), or a pserver restarted without its state after the job trained (its shard started "
          "over from the seed); by default such a job exits 3, naming each loss");
ABSL_FLAG(std::string, logdir, "",
          "every process writes TensorBoard event files under DIR/<process name>/ (empty: none)");
ABSL_FLAG(int, metrics_port, -1,
          "every process serves Prometheus /metrics: -1 off, 0 free ports, P: the master P, pserver i "
          "P+1+i (with --replicas R, its replica r P+1+i*R+r), trainer r P+1+pservers*R+r");
ABSL_FLAG(int, http_port, -1, "the master serves the job's status page on this port (-1: off; 0: a free port)");
ABSL_FLAG(int, nnodes, 1, "machines the job runs on, each running pl-launch (>= 1; 1: everything on 127.0.0.1)");
ABSL_FLAG(int, node_rank, 0, "this machine's rank in [0, nnodes): node 0 runs the master");
ABSL_FLAG(std::string, master_addr, "",
          "with --nnodes > 1 (required): HOST:PORT where the other nodes reach the master; node 0 runs it "
          "on 0.0.0.0:PORT. Or HOST:PORT,HOST:PORT,... (3 or more): nodes 0..K-1 each run a master and an etcd "
          "member, one master leads and the others stand by, so the job outlives any one of those nodes");
ABSL_FLAG(int, etcd_port, 2379,
          "with several masters (--master_addr A,B,C): the port of each master node's etcd member (its peers use "
          "the next one)");
ABSL_FLAG(std::string, node_addr, "",
          "with --nnodes > 1: the address this node's pservers advertise (empty: the local address of the "
          "interface that routes to the master's host)");
ABSL_FLAG(bool, insecure, false,
          "no transport security between the job's processes (debugging only; every process says so)");
ABSL_FLAG(std::string, tls_ca, "",
          "the job's CA: a directory with ca.crt and ca.key, the same on every node (needed with --nnodes > 1 "
          "unless --insecure; default: a new CA in WORKDIR/tls/ca)");
ABSL_FLAG(std::string, make_ca, "",
          "write a new CA for a job on several machines to this directory (ca.crt, ca.key) and exit; copy "
          "it to every machine and pass it as --tls_ca there (takes no other flag)");
ABSL_FLAG(double, master_wait_s, 60,
          "with --nnodes > 1: how long a node waits for the master to answer, at start and when it goes "
          "away mid-job (> 0)");

namespace pl {

namespace {

// A given timer must be a number of seconds >= 0 (the default -1 means never).
Status CheckTimer(const cli::CommandLine& line, const char* flag, double value) {
  if (line.given.count(flag) == 0) return absl::OkStatus();
  if (std::isnan(value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", value, " is not >= 0"));
  }
  return absl::OkStatus();
}

// --nnodes and its companions: a node rank in range, a master address for a job of
// several nodes, and none of the multi-node flags for a job on one machine.
Status CheckNodeFlags(const cli::CommandLine& line, const LaunchOptions& o) {
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("nnodes", o.num_nodes, 1));
  if (o.node_rank < 0 || o.node_rank >= o.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node_rank: ", o.node_rank, " is not in [0, ", o.num_nodes,
                                                   ") (--nnodes ", o.num_nodes, ")"));
  }
  if (o.num_nodes == 1) {
    for (const char* flag : {"master_addr", "node_addr", "master_wait_s", "etcd_port"}) {
      if (line.given.count(flag) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " is for a job on several machines (--nnodes > 1)"));
      }
    }
    return absl::OkStatus();
  }
  if (o.master_addr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master_addr HOST:PORT is required with --nnodes ", o.num_nodes,
                     " (where the nodes reach the master that node 0 runs)"));
  }
  PL_RETURN_IF_ERROR(ParseMasterAddrs(o.master_addr, o.num_nodes).status());
  PL_RETURN_IF_ERROR(cli::CheckRange("etcd_port", o.etcd_port, 1, 65534));
  if (!(o.master_wait_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--master_wait_s: ", o.master_wait_s, " is not > 0"));
  }
  if (!o.insecure && o.tls_ca.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes ", o.num_nodes, ": every node needs the job's CA for mutual TLS: --tls_ca DIR (ca.crt and ca.key, "
        "the same files on each node), or --insecure"));
  }
  return absl::OkStatus();
}

}  // namespace

const cli::Program& LaunchProgram() {
  static const cli::Program* const program = new cli::Program{
      "pl-launch",
      "--pservers P --trainers T [--sync] [--data PATH] [--passes N] [flags] -- <trainer command...>",
      "Runs a master, P pservers and T trainers on 127.0.0.1, restarts the master and\n"
      "pservers when they die, and exits 0 when the job is done (1: the job failed;\n"
      "2: bad input; 130/143: stopped by SIGINT/SIGTERM).\n"
      "Control FIFO lines: add-trainer | kill-trainer [rank] | stop-trainer [rank] |\n"
      "                    kill-pserver INDEX | kill-master |\n"
      "                    checkpoint-pserver INDEX\n"
      "Several machines: run on each  pl-launch --nnodes N --node_rank R --master_addr HOST:PORT\n"
      "--pservers P --trainers T ... -- <trainer command>; node 0 runs the master, every node\n"
      "its P pservers (indexes R*P..) and T trainers (ranks R*T..); with --replicas K (2 by\n"
      "default there) copy k of pserver i runs on node (i/P + k) mod N; each node needs the\n"
      "same --tls_ca DIR, made once with  pl-launch --make_ca DIR  (or --insecure everywhere).",
      /*env=*/{},
      /*max_positional=*/0,
      /*command_after_separator=*/true,
      /*positional_hint=*/"the trainer command goes after '--'"};
  return *program;
}

StatusOr<LaunchOptions> LaunchOptionsFromFlags(const cli::CommandLine& line) {
  for (const char* required : {"pservers", "trainers"}) {
    if (line.given.count(required) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", required, " is required"));
    }
  }
  LaunchOptions o;
  o.num_pservers = absl::GetFlag(FLAGS_pservers);
  o.num_trainers = absl::GetFlag(FLAGS_trainers);
  o.sync = absl::GetFlag(FLAGS_sync);
  o.workdir = absl::GetFlag(FLAGS_workdir);
  o.data = absl::GetFlag(FLAGS_data);
  o.passes = absl::GetFlag(FLAGS_passes);
  o.chunks_per_task = absl::GetFlag(FLAGS_chunks_per_task);
  o.virtual_trainers = absl::GetFlag(FLAGS_virtual_trainers);
  o.lease_ms = absl::GetFlag(FLAGS_lease_ms);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.checkpoint_every_s = absl::GetFlag(FLAGS_checkpoint_every_s);
  o.sparse_memory_mb = absl::GetFlag(FLAGS_sparse_memory_mb);
  o.sparse_disk = absl::GetFlag(FLAGS_sparse_disk);
  o.kill_trainer_after_s = absl::GetFlag(FLAGS_kill_trainer_after_s);
  o.add_trainer_after_s = absl::GetFlag(FLAGS_add_trainer_after_s);
  o.control_fifo = absl::GetFlag(FLAGS_control);
  o.leave_grace_ms = absl::GetFlag(FLAGS_leave_grace_ms);
  o.progress_every_s = absl::GetFlag(FLAGS_progress_every_s);
  o.allow_losses = absl::GetFlag(FLAGS_allow_losses);
  o.overlap_passes = absl::GetFlag(FLAGS_overlap_passes);
  o.logdir = absl::GetFlag(FLAGS_logdir);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.http_port = absl::GetFlag(FLAGS_http_port);
  o.num_nodes = absl::GetFlag(FLAGS_nnodes);
  o.node_rank = absl::GetFlag(FLAGS_node_rank);
  o.master_addr = absl::GetFlag(FLAGS_master_addr);
  o.node_addr = absl::GetFlag(FLAGS_node_addr);
  o.master_wait_s = absl::GetFlag(FLAGS_master_wait_s);
  o.etcd_port = absl::GetFlag(FLAGS_etcd_port);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  o.trainer_command = line.command;
  // One machine: copies there share its fate, so one by default; several: two, each on
  // a machine of its own (node_role.h), which is what replication is for.
  const int replicas = absl::GetFlag(FLAGS_replicas);
  o.replicas = replicas > 0 ? replicas : o.num_nodes > 1 ? 2 : 1;
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("pservers", o.num_pservers, 1));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("replicas", replicas, 0));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("trainers", o.num_trainers, o.num_nodes > 1 ? 1 : 0));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("passes", o.passes, 1));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("chunks_per_task", o.chunks_per_task, 1));
  PL_RETURN_IF_ERROR(cli::CheckRange("virtual_trainers", o.virtual_trainers, 0, kMaxVirtualTrainers));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast<int64_t>("lease_ms", o.lease_ms, 100));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast("checkpoint_every_s", o.checkpoint_every_s, 0));
  PL_RETURN_IF_ERROR(cli::CheckAtLeast<int64_t>("leave_grace_ms", o.leave_grace_ms, 0));
  PL_RETURN_IF_ERROR(cli::CheckRange<int64_t>("sparse_memory_mb", o.sparse_memory_mb, 0, int64_t{1} << 30));
  if (o.sparse_disk && o.sparse_memory_mb == 0) {
    return absl::InvalidArgumentError("--sparse_disk needs --sparse_memory_mb (the cap decides what goes to disk)");
  }
  PL_RETURN_IF_ERROR(CheckTimer(line, "kill_trainer_after_s", o.kill_trainer_after_s));
  PL_RETURN_IF_ERROR(CheckTimer(line, "add_trainer_after_s", o.add_trainer_after_s));
  PL_RETURN_IF_ERROR(cli::CheckRange("metrics_port", o.metrics_port, -1, 65535));
  PL_RETURN_IF_ERROR(cli::CheckRange("http_port", o.http_port, -1, 65535));
  if (!(o.progress_every_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--progress_every_s: ", o.progress_every_s, " is not > 0"));
  }
  PL_RETURN_IF_ERROR(CheckNodeFlags(line, o));
  if (o.trainer_command.empty() || o.trainer_command[0].empty()) {
    return absl::InvalidArgumentError("no trainer command: put it after '--', e.g. -- pl-trainer --model mlp");
  }
  return o;
}

StatusOr<std::string> MakeCaDirFromFlags(const cli::CommandLine& line) {
  if (line.given.count("make_ca") == 0) return std::string();
  const std::string dir = absl::GetFlag(FLAGS_make_ca);
  if (dir.empty()) return absl::InvalidArgumentError("--make_ca: give the directory to write the CA to");
  for (const std::string& flag : line.given) {
    if (flag != "make_ca") {
      return absl::InvalidArgumentError(absl::StrCat("--make_ca writes a CA and exits; it takes no other flag (--",
                                                     flag, " given)"));
    }
  }
  if (line.has_separator || !line.command.empty()) {
    return absl::InvalidArgumentError("--make_ca writes a CA and exits; it runs no trainer command");
  }
  return dir;
}

StatusOr<LaunchOptions> ParseLaunchFlags(const std::vector<std::string>& args) {
  PL_ASSIGN_OR_RETURN(cli::CommandLine line, cli::Parse(LaunchProgram(), args, nullptr));
  if (line.action != cli::CommandLine::Action::kRun) {
    return absl::InvalidArgumentError("--help and --version are answered by pl::cli::ParseOrExit");
  }
  return LaunchOptionsFromFlags(line);
}

}  // namespace pl
