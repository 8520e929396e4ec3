// pl-pserver's flags and its process (see pserver_main.h). Environment fallbacks
// PL_PSERVER_INDEX, PL_NUM_PSERVERS, PL_MASTER_ADDR, PL_CHECKPOINT_DIR,
// PL_ADVERTISE_HOST, PL_SNAPSHOT_LANES and the stream's are read here only.
#include "pserver/pserver_main.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/snapshot_lanes.h"
#include "paddle_like/metrics/telemetry_flags.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/tls_flags.h"
#include "pserver/service/pserver_process.h"

ABSL_FLAG(int, index, -1, "this pserver's index in [0, num_pservers): which blocks and rows it holds");
ABSL_FLAG(int, num_pservers, 0, "pservers in the job (>= 1)");
ABSL_FLAG(std::string, master, "", "master address host:port to register with; empty: no master");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on (default: this host only; 0.0.0.0 for every interface, as other hosts need)");
ABSL_FLAG(int, port, 0, "port to listen on (0: any free port; see --port_file)");
ABSL_FLAG(std::string, advertise_host, "",
          "host registered with the master (empty: --host, or 127.0.0.1 when --host is 0.0.0.0 or ::)");
ABSL_FLAG(std::string, port_file, "", "write the bound port here (atomically) once serving");
ABSL_FLAG(std::string, replica_id_file, "",
          "with --replicas > 1: write this process's replica id here (hex, atomically) before it joins, so "
          "that its supervisor can tell the master at once when the process dies (pl-launch does)");
ABSL_FLAG(std::string, checkpoint_dir, "", "checkpoints of this shard (restored at start); empty: none");
ABSL_FLAG(int, checkpoint_every_s, 10, "seconds between checkpoints (0: only the final one on SIGTERM)");
ABSL_FLAG(int, table_report_every_s, 60,
          "log each sparse table's rows, bytes and hottest rows this often (0: never)");
ABSL_FLAG(int, full_checkpoint_every, 10,
          "every Nth checkpoint is full, the others hold only the rows changed since the one before (>= 1; 1: all "
          "full)");
ABSL_FLAG(int, max_message_mb, 256,
          "largest gRPC message in MB, in [1, 2047]; once initialised the shard also refuses any push or pull "
          "larger than its parameters allow (Stats: largest_request_bytes)");
ABSL_FLAG(int, threads, 0,
          "gRPC polling threads for Init, Stats, Checkpoint and Attach (0: gRPC's default); Push and Pull "
          "run on gRPC's callback threads (async) or a pool of their own (sync)");
ABSL_FLAG(int, apply_threads, 0,
          "threads that apply one push (its dense blocks and sparse stripes split between them; any count gives the "
          "same bits); 0: one per core");
ABSL_FLAG(double, max_gradient_norm, 0,
          "refuse a push whose gradient of some parameter has a norm (this pserver's part of it) above this "
          "(0: no absolute cap; see --gradient_norm_ratio)");
ABSL_FLAG(double, gradient_norm_ratio, 100,
          "refuse a push whose gradient of some parameter has a norm more than this many times the median of that "
          "parameter's last 64 accepted pushes, once it has had 20 (0: off): finite values of 1e18 would otherwise "
          "ruin the optimizer's state");
ABSL_FLAG(int64_t, max_memory_mb, 0,
          "the most memory this pserver's dense parameters and their optimizer state may take, in MB: an Init that "
          "would pass it is refused before anything is allocated (0: three quarters of the host's memory, or of the "
          "container's limit when lower; -1: no limit)");
ABSL_FLAG(int, trim_idle_ms, 1000,
          "return freed message buffers to the kernel once traffic has paused this long (0: never)");
ABSL_FLAG(int, replicas, 1,
          "copies of this shard the job keeps, each in its own pl-pserver with the same --index (>= 1; > 1 needs "
          "--master): a primary serves trainers and streams every update to the others, a backup takes over when "
          "it dies; start one process per copy");
ABSL_FLAG(bool, replica_checkpoints, false,
          "every replica, backups too, checkpoints into its own --checkpoint_dir (replicas that do not share the "
          "directory, as Pods with claims of their own; a copy that outlives the others then restores its own "
          "newest state); default: only the primary writes, for replicas sharing one directory (pl-launch)");
ABSL_FLAG(int64_t, sparse_memory_mb, 0,
          "cap on this pserver's sparse rows (values, optimizer state, index), in MB: beyond it the least "
          "recently used rows are evicted in the background (0: what the dense parameters leave of --max_memory_mb's "
          "budget; -1: no cap; tables' evict_after_s applies either way)");
ABSL_FLAG(std::string, sparse_disk_dir, "",
          "with --sparse_memory_mb: rows beyond the cap move to a disk tier (RocksDB) in this directory instead of "
          "being dropped, and come back when touched (the directory is scratch: emptied at start)");
ABSL_FLAG(bool, snapshot_socket, true,
          "replicated shards: send a joining replica's snapshot over TCP connections of its own to a port the joiner "
          "picks, with the job's TLS unless --insecure (--nosnapshot_socket: in gRPC pieces, through the gRPC port "
          "alone)");
ABSL_FLAG(int32_t, snapshot_lanes, 0,
          "replicated shards: a snapshot over the socket goes on up to this many connections at once, each read "
          "into the shard on a thread of its own (1-16; the joiner takes the smaller of its own and the primary's; "
          "0: 4 with TLS, else one per 4 cores, at most 4)");
ABSL_FLAG(bool, dense_link, true,
          "accept dense links from trainers on other hosts (and, replicated, from the shard's primary for its "
          "stream; a primary uses them to its backups): dense blocks over TCP connections of their own, on ports "
          "the OS picks, with the job's TLS unless --insecure (--nodense_link: over gRPC)");
ABSL_FLAG(int64_t, dense_link_max_mb, 0,
          "the most memory the trainers' dense links may hold here together (each 2x the dense bytes that trainer "
          "exchanges with this pserver); a trainer past it keeps gRPC and asks again 30 s later (0: a quarter of the "
          "machine's memory)");
ABSL_FLAG(bool, stream_link, true,
          "replicated: a primary sends its stream's dense blocks to each backup over a dense link (when the "
          "backup takes links) instead of inside the gRPC calls");
ABSL_FLAG(bool, stream_shm, true,
          "replicated: a primary sends its stream's dense blocks to a backup on this host through shared memory "
          "(tried before --stream_link; a backup with --noshm or /dev/shm of its own refuses it)");
ABSL_FLAG(bool, snapshot_shm, true,
          "replicated, with --stream_shm: a joining replica on this host gets its snapshot through the stream's shared "
          "memory, a window at a time read straight into its shard (--nosnapshot_shm: as --snapshot_socket says)");
ABSL_FLAG(bool, stream_doorbell, true,
          "replicated, with --stream_shm: a primary rings such a backup through the shared memory (a futex) "
          "instead of calling it over gRPC for each update");
ABSL_FLAG(int32_t, stream_link_lanes, 0,
          "replicated, with --stream_link: connections each way of a primary's dense link to each backup (0: "
          "automatic, as a trainer's link)");
ABSL_FLAG(int32_t, heartbeat_ms, 100,
          "replicated: how often a replica tells the master it lives (and hears of promotions); at most half the "
          "master's --pserver_lease_ms, whose default is 800 (10-10000)");
ABSL_FLAG(bool, shm, true,
          "accept shared-memory regions from trainers on this host, and from a replicated primary's stream "
          "(--noshm: gRPC or dense links only)");

namespace pl::pserver {
namespace {

// SIGTERM/SIGINT are noted by a handler (whichever thread takes them, including
// threads libraries start before main) and woken through a self-pipe.
int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) {
  g_signal = sig;
  const char byte = 1;
  (void)!write(g_signal_pipe[1], &byte, 1);
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "pl-pserver: %s\n", why.c_str());
  return 1;
}

PserverOptions OptionsFromFlags() {
  PserverOptions o;
  o.index = absl::GetFlag(FLAGS_index);
  o.num_pservers = absl::GetFlag(FLAGS_num_pservers);
  o.master = absl::GetFlag(FLAGS_master);
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.replica_id_file = absl::GetFlag(FLAGS_replica_id_file);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_every_s = absl::GetFlag(FLAGS_checkpoint_every_s);
  o.table_report_every_s = absl::GetFlag(FLAGS_table_report_every_s);
  o.full_checkpoint_every = absl::GetFlag(FLAGS_full_checkpoint_every);
  o.max_message_mb = absl::GetFlag(FLAGS_max_message_mb);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.trim_idle_ms = absl::GetFlag(FLAGS_trim_idle_ms);
  o.apply_threads = absl::GetFlag(FLAGS_apply_threads);
  o.max_memory_mb = absl::GetFlag(FLAGS_max_memory_mb);
  o.norm_guard.max_norm = absl::GetFlag(FLAGS_max_gradient_norm);
  o.norm_guard.max_ratio = absl::GetFlag(FLAGS_gradient_norm_ratio);
  o.replicas = absl::GetFlag(FLAGS_replicas);
  o.replica_checkpoints = absl::GetFlag(FLAGS_replica_checkpoints);
  o.sparse_memory_mb = absl::GetFlag(FLAGS_sparse_memory_mb);
  o.sparse_disk_dir = absl::GetFlag(FLAGS_sparse_disk_dir);
  o.snapshot_socket = absl::GetFlag(FLAGS_snapshot_socket);
  o.snapshot_lanes = absl::GetFlag(FLAGS_snapshot_lanes);
  o.dense_link = absl::GetFlag(FLAGS_dense_link);
  o.dense_link_max_mb = absl::GetFlag(FLAGS_dense_link_max_mb);
  o.stream_link = absl::GetFlag(FLAGS_stream_link);
  o.stream_shm = absl::GetFlag(FLAGS_stream_shm);
  o.stream_doorbell = absl::GetFlag(FLAGS_stream_doorbell);
  o.snapshot_shm = absl::GetFlag(FLAGS_snapshot_shm);
  o.stream_link_lanes = absl::GetFlag(FLAGS_stream_link_lanes);
  o.heartbeat_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  o.shm = absl::GetFlag(FLAGS_shm);
  return o;
}

}  // namespace

int PserverMain(int argc, char** argv, Env* env) {
  cli::Program program = {
      "pl-pserver",
      "--index I --num_pservers P [--master HOST:PORT] [--port_file PATH] [--checkpoint_dir DIR] [flags]",
      "One parameter server: serves its shard of the parameters, registers with the master,\n"
      "checkpoints its shard, and on SIGTERM writes a final checkpoint and exits 0.",
      {{"index", "PL_PSERVER_INDEX"},
       {"num_pservers", "PL_NUM_PSERVERS"},
       {"master", "PL_MASTER_ADDR"},
       {"checkpoint_dir", "PL_CHECKPOINT_DIR"},
       {"advertise_host", "PL_ADVERTISE_HOST"},
       {"snapshot_lanes", "PL_SNAPSHOT_LANES"},
       {"stream_link", "PL_STREAM_LINK"},
       {"stream_link_lanes", "PL_STREAM_LINK_LANES"},
       {"stream_shm", "PL_STREAM_SHM"},
       {"snapshot_shm", "PL_SNAPSHOT_SHM"},
       {"stream_doorbell", "PL_STREAM_DOORBELL"}}};
  program.env = rpc::WithTlsEnv(program.env);
  cli::ParseOrExit(program, argc, argv);
  PserverOptions o = OptionsFromFlags();
  o.env = env;
  if (Status valid = ValidatePserverOptions(o); !valid.ok()) cli::ExitWithUsageError(program, valid.message());
  cli::CheckOrExit(program, {cli::CheckRange("port", o.port, 0, 65535),
                             cli::CheckAtLeast("checkpoint_every_s", o.checkpoint_every_s, 0),
                             cli::CheckAtLeast("full_checkpoint_every", o.full_checkpoint_every, 1),
                             cli::CheckAtLeast("table_report_every_s", o.table_report_every_s, 0),
                             cli::CheckAtLeast("trim_idle_ms", o.trim_idle_ms, 0),
                             cli::CheckRange("max_message_mb", o.max_message_mb, 1, 2047),
                             cli::CheckAtLeast("threads", o.threads, 0),
                             cli::CheckAtLeast("apply_threads", o.apply_threads, 0),
                             cli::CheckAtLeast("replicas", o.replicas, 1),
                             cli::CheckRange("heartbeat_ms", o.heartbeat_ms, 10, 10000),
                             cli::CheckRange("snapshot_lanes", o.snapshot_lanes, 0, kMaxSnapshotLanes),
                             cli::CheckRange("stream_link_lanes", o.stream_link_lanes, 0, kMaxDenseLinkLanes),
                             cli::CheckRange<int64_t>("sparse_memory_mb", o.sparse_memory_mb, -1, int64_t{1} << 30)});
  log::SetProcessName(absl::StrCat("pserver-", o.index));
  rpc::ConfigureTransportOrExit(program, rpc::PserverIdentity(o.index));
  // --logdir, --metrics_port: a bad one ends the process here, before it serves.
  auto telemetry = metrics::OpenTelemetryOrExit(program, "pserver", std::to_string(o.index), o.host);
  o.telemetry = telemetry.get();

  if (pipe(g_signal_pipe) != 0) return Fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  PserverProcess process(o);
  const Status run = process.Run([](absl::Duration wait) {
    if (g_signal == 0) {
      pollfd wake{g_signal_pipe[0], POLLIN, 0};
      (void)poll(&wake, 1, static_cast<int>(absl::ToInt64Milliseconds(wait)));
    }
    if (g_signal == 0) return false;
    log::Info(absl::StrCat(strsignal(g_signal), " received; shutting down"));
    return true;
  });
  if (!run.ok()) return Fail(std::string(run.message()));
  return 0;
}

}  // namespace pl::pserver
